# GGUF files: the reader on files written by the `gguf` Python package
# (fixtures/gguf, tools/gguf-fixtures.py), the writer (byte for byte what
# that package writes), engine tensors over the mapped file, and damaged
# files as clear errors.

fixture_gguf <- function(name) test_path("fixtures", "gguf", name)

test_that("every metadata value type reads back as written by the gguf package", {
  g <- gguf_load(fixture_gguf("all-types.gguf"))
  on.exit(gguf_free(g))
  expect_identical(c(g$version, g$n_tensors, g$alignment), c(3L, 31L, 32L))
  m <- gguf_metadata(g)
  ty <- gguf_metadata_types(g)
  expect_identical(names(m), names(ty))
  expect_identical(m$t.u8, 200L)
  expect_identical(m$t.i8, -100L)
  expect_identical(m$t.u16, 60000L)
  expect_identical(m$t.i16, -30000L)
  expect_identical(m$t.u32, 4e9)
  expect_identical(m$t.i32, -2000000000L)
  expect_identical(m$t.f32, as.numeric(readBin(writeBin(0.1, raw(), size = 4), "double", size = 4)))
  expect_identical(m$t.u64, 2^53 + 2)
  expect_identical(m$t.i64, -(2^40) - 3)
  expect_identical(m$t.f64, 1 / 3)
  expect_identical(c(m$t.bool, m$t.false), c(TRUE, FALSE))
  expect_identical(m$t.str, "hello, GGUF \u00e9\u4e2d")
  expect_identical(m$t.empty, "")
  expect_identical(m$a.i8, c(-128L, 0L, 127L))
  expect_identical(m$a.u32, c(0, 4294967295))
  expect_identical(m$a.bool, c(TRUE, FALSE, TRUE))
  expect_identical(m$a.str, c("a", "", "tokens \u2581x"))
  expect_identical(m$a.nested, list(1:3, 4L, 5:6))
  expect_identical(m$a.nested_str, list(c("x", "y"), "z"))
  expect_identical(unname(ty[c("t.u32", "a.str", "a.nested", "t.f64")]),
    c("uint32", "array[string]", "array[array[int32]]", "float64"))
})

test_that("every tensor type reads as the gguf package dequantizes it", {
  g <- gguf_load(fixture_gguf("all-types.gguf"))
  on.exit(gguf_free(g))
  want <- readBin(fixture_gguf("all-types.f32"), "double", n = 1e6, size = 4, endian = "little")
  at <- 0
  types <- character()
  for (nm in gguf_tensor_names(g)) {
    info <- gguf_tensor_info(g, nm)
    expect_identical(info$shape, c(256, 2))
    v <- gguf_tensor_data(g, nm)
    expect_identical(dim(v), c(256L, 2L))
    w <- want[at + seq_len(512)]
    v32 <- readBin(writeBin(as.vector(v), raw(), size = 4), "double", 512, size = 4)
    same <- (is.nan(v32) & is.nan(w)) | (!is.nan(w) & v32 == w)
    expect(all(same), sprintf("%s: %d values differ", nm, sum(!same)))
    at <- at + 512
    types <- c(types, info$type)
  }
  expect_true(all(c("f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "q4_K", "iq1_m", "nvfp4") %in% types))
})

test_that("gguf_write() writes the gguf package's bytes and reads back exactly", {
  src <- fixture_gguf("all-types.gguf")
  g <- gguf_load(src)
  on.exit(gguf_free(g))
  ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE)
  # Engine tensors exist for engine types; the others go as raw specs below.
  engine <- gguf_tensor_names(g)[!vapply(gguf_tensor_names(g), function(nm)
    gguf_tensor_info(g, nm)$type %in% c("f64", "i8", "i16", "i64"), TRUE)]
  expect_length(engine, 27)
  out <- tempfile(fileext = ".gguf")
  on.exit(unlink(out), add = TRUE)
  w <- list()
  for (nm in gguf_tensor_names(g)) {
    w[[nm]] <- if (nm %in% engine) gguf_tensor(g, nm, ctx) else gguf_tensor_data(g, nm)
  }
  tt <- c(w.f64 = 28L, w.i8 = 24L, w.i16 = 25L, w.i64 = 27L)
  gguf_write(out, gguf_metadata(g), w, types = gguf_metadata_types(g), tensor_types = tt)
  expect_identical(readBin(out, "raw", file.size(out)), readBin(src, "raw", file.size(src)))
  g2 <- gguf_load(fixture_gguf("aligned.gguf"))
  on.exit(gguf_free(g2), add = TRUE)
  expect_identical(g2$alignment, 64L)
  out2 <- tempfile(fileext = ".gguf")
  on.exit(unlink(out2), add = TRUE)
  gguf_write(out2, gguf_metadata(g2), list(odd = gguf_tensor_data(g2, "odd"), matrix = gguf_tensor_data(g2, "matrix"),
    q = gguf_tensor(g2, "q", ctx)), types = gguf_metadata_types(g2), alignment = 64)
  expect_identical(readBin(out2, "raw", 1e4), readBin(fixture_gguf("aligned.gguf"), "raw", 1e4))
  g3 <- gguf_load(out2)
  on.exit(gguf_free(g3), add = TRUE)
  expect_identical(gguf_tensor_data(g3, "matrix"), matrix(0:11, 4, 3) + 0)
  expect_identical(gguf_metadata(g3)$general.alignment, 64)
})

test_that("engine tensors over the mapped file multiply without a copy", {
  set.seed(31)
  path <- tempfile(fileext = ".gguf")
  on.exit(unlink(path))
  W <- matrix(rnorm(256 * 6), 256, 6)
  E <- matrix(rnorm(32 * 4), 32, 4)
  gguf_write(path, list(general.architecture = "test"), list(w = W, emb = E),
    tensor_types = c(w = GGML_TYPE_Q4_K, emb = GGML_TYPE_F16))
  g <- gguf_load(path)
  ctx <- ggml_init(16 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  before <- ag_memory_stats()$user_bytes
  w <- gguf_tensor(g, "w", ctx)
  emb <- gguf_tensor(g, "emb", ctx)
  mapped <- ag_memory_stats()$user_bytes - before
  expect_identical(mapped, file.size(path) - gguf_tensor_info(g, "w")$offset)
  gguf_free(g)
  expect_identical(ggml_tensor_shape(w)[1:2], c(256L, 6L))
  expect_output(print(w), "q4_K \\[256, 6\\]")
  x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 2)
  idx <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2)
  y <- ggml_mul_mat(ctx, w, x)
  r <- ggml_get_rows(ctx, emb, idx)
  backend <- ggml_backend_cpu_init()
  on.exit(ggml_backend_free(backend), add = TRUE)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  X <- matrix(rnorm(512), 256, 2)
  ggml_backend_tensor_set_data(x, as.vector(X))
  ggml_backend_tensor_set_data(idx, c(3, 0))
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y))
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, r))
  Wq <- matrix(dequantize_row_q4_K(quantize_q4_K(W, 6, 256), length(W)), 256)
  got <- matrix(ggml_backend_tensor_get_data(y), 6)
  expect_true(all(abs(got - t(Wq) %*% X) <= product_bound(GGML_TYPE_Q4_K, Wq, X)))
  Ef <- round_to(E, GGML_TYPE_F16)
  expect_identical(ggml_backend_tensor_get_data(r), as.vector(Ef[, c(4, 1)]))
  expect_error(ggml_backend_tensor_set_data(w, quantize_q4_K(W, 6, 256)), "read-only mapped file", class = "ggmlR_error")
})

test_that("damaged files are errors that say what and where, never crashes", {
  good <- readBin(fixture_gguf("aligned.gguf"), "raw", 1e4)
  path <- tempfile(fileext = ".gguf")
  on.exit(unlink(path))
  load_bytes <- function(b) {
    writeBin(b, path)
    gguf_load(path)
  }
  expect_error(load_bytes(good[1:200]), "truncated", class = "ggmlR_error")
  expect_error(load_bytes(c(charToRaw("GGML"), good[-(1:4)])), "not a GGUF file", class = "ggmlR_error")
  expect_error(load_bytes(good[1:10]), "too few for a GGUF file", class = "ggmlR_error")
  bad <- good
  bad[17:24] <- as.raw(0xff) # the number of metadata pairs
  expect_error(load_bytes(bad), "at byte 16: the number of metadata pairs is 18446744073709551615", class = "ggmlR_error")
  expect_error(gguf_load(file.path(tempdir(), "no-such.gguf")), "there is no file", class = "ggmlR_error")
  set.seed(32)
  for (i in 1:300) {
    b <- good
    at <- sample(length(good) - 200, 3)
    b[at] <- as.raw(sample(0:255, 3))
    r <- tryCatch({
      g <- load_bytes(b)
      for (nm in gguf_tensor_names(g)) gguf_tensor_data(g, nm)
      gguf_free(g)
      "ok"
    }, ggmlR_error = function(e) "error")
    expect_true(r %in% c("ok", "error"))
  }
})

test_that("gguf objects are checked and freed once", {
  path <- tempfile(fileext = ".gguf")
  on.exit(unlink(path))
  gguf_write(path, list(a = 1L))
  g <- gguf_load(path, meta_only = TRUE)
  expect_output(print(g), "meta_only")
  gguf_free(g)
  expect_no_error(gguf_free(g))
  expect_error(gguf_metadata(g), "freed with gguf_free", class = "ggmlR_error")
  expect_output(print(g), "freed")
  expect_error(gguf_tensor_names(list()), "Expected a gguf object", class = "ggmlR_error")
  expect_error(gguf_write(path, list(1)), "named list", class = "ggmlR_error")
  expect_error(gguf_write(path, list(a = 300L), types = c(a = "uint8")), "0 to 255", class = "ggmlR_error")
  expect_error(gguf_write(path, list(a = 1:3), types = c(a = "uint32")), "declare it \"array\\[uint32\\]\"",
    class = "ggmlR_error")
  expect_error(gguf_write(path, list(a = 1), types = c(a = "float16")), "not a GGUF value type", class = "ggmlR_error")
  expect_error(gguf_write(path, tensors = list(w = 1:10), tensor_types = c(w = GGML_TYPE_Q4_0)),
    "blocks of 32", class = "ggmlR_error")
  expect_identical(gguf_metadata(gguf_load(path))$a, 1L)
})
