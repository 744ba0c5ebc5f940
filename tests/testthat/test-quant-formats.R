# The R quantization API against the `gguf` Python package's outputs
# (fixtures/quant, written by tools/quant-fixtures.py): bit-exact bytes and
# values through R, and the R-facing behaviour (formals, sizes, errors).

read_qf <- function(name) {
  con <- file(test_path("fixtures", "quant", paste0(name, ".qf")), "rb")
  on.exit(close(con))
  expect_identical(readChar(con, 8, useBytes = TRUE), "GGMLRQF1")
  code <- readBin(con, "integer", size = 4, endian = "little")
  info <- ggml_quant_block_info(code)
  rs <- function(n) n %/% info$block_size * info$type_size
  cases <- function(first_values) {
    n_cases <- readBin(con, "integer", size = 4, endian = "little")
    lapply(seq_len(n_cases), function(i) {
      n <- readBin(con, "integer", size = 4, endian = "little")
      if (first_values) {
        x <- readBin(con, "double", n, size = 4, endian = "little")
        list(x = x, q = readBin(con, "raw", rs(n)))
      } else {
        q <- readBin(con, "raw", rs(n))
        list(q = q, x = readBin(con, "double", n, size = 4, endian = "little"))
      }
    })
  }
  list(code = code, name = info$type_name, quant = cases(TRUE), deq = cases(FALSE))
}

quant_fixtures <- c("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m",
  "tq1_0", "tq2_0", "mxfp4", "nvfp4")

# Equal values, NaN matching NaN.
expect_same_values <- function(got, want, what) {
  both_nan <- is.nan(got) & is.nan(want)
  ok <- both_nan | (!is.nan(got) & !is.nan(want) & got == want)
  expect(all(ok), sprintf("%s: %d of %d values differ (first at %d: %g vs %g)", what, sum(!ok),
    length(ok), which(!ok)[1], got[which(!ok)[1]], want[which(!ok)[1]]))
}

test_that("quantizers and dequantizers agree bit for bit with the gguf package", {
  n_quant <- 0
  for (f in quant_fixtures) {
    fx <- read_qf(f)
    deq <- get(paste0("dequantize_row_", fx$name), asNamespace("ggmlR"))
    for (case in fx$quant) {
      ref <- get(paste0("quantize_row_", fx$name, "_ref"), asNamespace("ggmlR"))
      expect_identical(ref(case$x, length(case$x)), case$q, label = paste(f, "quantize"))
      expect_identical(ggml_quantize_chunk(fx$code, case$x, 1, length(case$x)), case$q)
      n_quant <- n_quant + 1
    }
    for (case in fx$deq) {
      expect_same_values(deq(case$q, length(case$x)), case$x, paste(f, "dequantize"))
    }
  }
  expect_identical(n_quant, 8 * 13)
})

test_that("bf16 conversion agrees bit for bit with the gguf package, NaN and infinities included", {
  fx <- read_qf("bf16")
  expect_identical(fx$name, "bf16")
  backend <- ggml_backend_cpu_init()
  on.exit(ggml_backend_free(backend))
  ctx <- ggml_init(2 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  n <- length(fx$quant[[1]]$x)
  t <- ggml_new_tensor_1d(ctx, GGML_TYPE_BF16, n)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  for (case in fx$quant) {
    expect_identical(ggml_quantize_chunk(GGML_TYPE_BF16, case$x, 1, n), case$q)
    ggml_backend_tensor_set_data(t, case$x)
    expect_identical(ggml_backend_tensor_get_raw(t), case$q)
  }
  for (case in fx$deq) {
    ggml_backend_tensor_set_data(t, case$q)
    expect_same_values(ggml_backend_tensor_get_data(t), case$x, "bf16 values")
  }
  expect_length(fx$quant, 14)
  expect_true(any(is.nan(fx$quant[[14]]$x)))
})

test_that("quantize_*() takes ggml's formals and whole rows", {
  x <- seq(-1, 1, length.out = 512)
  expect_identical(names(formals(quantize_q4_K)), c("src_data", "n_rows", "n_per_row", "imatrix"))
  expect_identical(names(formals(dequantize_row_q4_K)), c("raw_data", "n_elements"))
  expect_identical(names(formals(quantize_row_q4_K_ref)), c("src_data", "n_elements"))
  expect_identical(quantize_q4_K(x), quantize_q4_K(x, 1, 512, NULL))
  expect_identical(quantize_q4_K(x, 2, 256), c(quantize_q4_K(x[1:256]), quantize_q4_K(x[257:512])))
  expect_length(quantize_q4_0(x, 4, 128), 16 * 18)
  expect_length(dequantize_row_q4_0(quantize_q4_0(x)), 512)
  m <- matrix(x, 256, 2)
  expect_identical(quantize_q6_K(m, n_rows = 2, n_per_row = 256), quantize_q6_K(x, 2, 256))
  expect_error(quantize_q4_K(x[1:100]), "blocks of 256", class = "ggmlR_error")
  expect_error(quantize_q4_K(x, 3, 256), "n_rows \\* n_per_row", class = "ggmlR_error")
  expect_error(quantize_q4_K(x, 1, 512, imatrix = 1:3), "one per column", class = "ggmlR_error")
  expect_error(quantize_iq2_xxs(x), "importance matrix", class = "ggmlR_error")
  expect_error(dequantize_row_q4_K(as.raw(1:10), 256), "need 144 bytes", class = "ggmlR_error")
  expect_error(dequantize_row_q4_0(1:10), "raw vector", class = "ggmlR_error")
  e <- tryCatch(quantize_q4_K(x[1:100]), error = identity)
  expect_match(deparse(conditionCall(e))[1], "quantize_q4_K")
})

test_that("importance matrices lower the weighted error", {
  set.seed(3)
  x <- rnorm(1024)
  w <- rep(c(20, 0.05), each = 16, length.out = 1024)
  for (ty in c("q4_0", "q5_1", "q3_K", "q4_K", "q6_K", "iq4_xs", "iq3_s")) {
    q <- get(paste0("quantize_", ty))
    d <- get(paste0("dequantize_row_", ty))
    plain <- sum(w * (x - d(q(x), 1024))^2)
    weighted <- sum(w * (x - d(q(x, 1, 1024, imatrix = w), 1024))^2)
    expect_lt(weighted, plain, label = ty)
  }
})

test_that("type information follows ggml", {
  expect_identical(GGML_TYPE_Q4_K, 12L)
  expect_identical(GGML_TYPE_Q1_0, 41L)
  expect_identical(ggml_type_size(GGML_TYPE_Q4_0), 18L)
  expect_identical(ggml_type_name(GGML_TYPE_IQ2_XXS), "iq2_xxs")
  expect_identical(ggml_blck_size(GGML_TYPE_Q8_K), 256L)
  expect_identical(ggml_blck_size(GGML_TYPE_F32), 1L)
  expect_equal(ggml_type_sizef(GGML_TYPE_Q4_0), 18 / 32)
  expect_true(ggml_is_quantized(GGML_TYPE_NVFP4))
  expect_false(ggml_is_quantized(GGML_TYPE_BF16))
  expect_identical(ggml_quant_block_info(GGML_TYPE_Q8_1)$type_size, 36L)
  expect_true(ggml_quantize_requires_imatrix(GGML_TYPE_IQ1_S))
  expect_false(ggml_quantize_requires_imatrix(GGML_TYPE_IQ1_M))
  expect_error(ggml_blck_size(4L), "unsupported tensor type code 4", class = "ggmlR_error")
})

test_that("lattice tables are built, freed and built again", {
  x <- cos(1:256)
  iq3xs_init_impl(512)
  a <- quantize_iq3_s(x)
  iq3xs_free_impl(512)
  expect_identical(quantize_iq3_s(x), a)
  iq2xs_init_impl(GGML_TYPE_IQ1_S)
  b <- quantize_iq1_s(x, 1, 256, rep(1, 256))
  iq2xs_free_impl(GGML_TYPE_IQ1_S)
  ggml_quantize_free()
  expect_identical(quantize_iq1_s(x, 1, 256, rep(1, 256)), b)
  expect_error(iq3xs_init_impl(300), "256 \\(IQ3_XXS\\) or 512", class = "ggmlR_error")
  expect_error(iq2xs_init_impl(GGML_TYPE_Q4_0), "iq2xs_init_impl\\(\\) takes", class = "ggmlR_error")
})

test_that("ggml_quantize_chunk() gives plain bytes for f32, f16 and bf16", {
  x <- c(1, -2, 0.5, 3)
  expect_identical(ggml_quantize_chunk(GGML_TYPE_F32, x, 1, 4), writeBin(x, raw(), size = 4, endian = "little"))
  expect_length(ggml_quantize_chunk(GGML_TYPE_F16, x, 2, 2), 8)
  expect_identical(ggml_quantize_chunk(GGML_TYPE_BF16, x, 1, 4)[3:4], as.raw(c(0x00, 0xc0)))
})
