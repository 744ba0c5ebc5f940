# Quantized tensors as engine tensors on the CPU backend: creation, data in
# and out, cpy f32 -> quantized, mul_mat and get_rows with quantized
# weights against dequantize-then-f64 in R, the ledger's bytes; on Vulkan the
# same products and lookups dequantized in the shader for every type, and
# the refusal of other ops on quantized tensors.

all_quant_types <- c(GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
  GGML_TYPE_Q8_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
  GGML_TYPE_Q8_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ1_S,
  GGML_TYPE_IQ4_NL, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_S, GGML_TYPE_IQ4_XS, GGML_TYPE_IQ1_M,
  GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4, GGML_TYPE_NVFP4, GGML_TYPE_Q1_0)

run_mul_mat <- function(type, q, K, M, B, threads = 2) {
  backend <- ggml_backend_cpu_init()
  on.exit(ggml_backend_free(backend))
  ggml_backend_cpu_set_n_threads(backend, threads)
  ctx <- ggml_init(16 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  w <- ggml_new_tensor_2d(ctx, type, K, M)
  b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, ncol(B))
  y <- ggml_mul_mat(ctx, w, b)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(w, q)
  ggml_backend_tensor_set_data(b, as.vector(B))
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y))
  matrix(ggml_backend_tensor_get_data(y), M)
}

test_that("mul_mat with quantized weights matches the dequantized product within its bound", {
  set.seed(21)
  K <- 512
  M <- 19
  for (type in all_quant_types) {
    W <- matrix(rnorm(K * M), K, M)
    wq <- weights_of(type, W)
    for (N in c(1, 5, 40)) {
      B <- matrix(rnorm(K * N), K, N)
      got <- run_mul_mat(type, wq$q, K, M, B)
      exact <- t(wq$deq) %*% B
      # From 32 columns on the weights are dequantized for the f32 kernel.
      tol <- if (N >= 32) 1e-4 * (t(abs(wq$deq)) %*% abs(B)) + 1e-6 else product_bound(type, wq$deq, B)
      expect(all(abs(got - exact) <= tol), sprintf("%s, %d columns: worst excess %g", ggml_type_name(type), N,
        max(abs(got - exact) - tol)))
    }
  }
})

test_that("one and two threads give the same quantized products", {
  set.seed(22)
  W <- matrix(rnorm(256 * 70), 256, 70)
  B <- matrix(rnorm(256 * 3), 256, 3)
  for (type in c(GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_IQ2_S)) {
    q <- weights_of(type, W)$q
    expect_identical(run_mul_mat(type, q, 256, 70, B, 1), run_mul_mat(type, q, 256, 70, B, 2))
  }
})

test_that("get_rows dequantizes the rows picked; cpy quantizes; the ledger counts real bytes", {
  set.seed(23)
  backend <- ggml_backend_cpu_init()
  on.exit(ggml_backend_free(backend))
  ctx <- ggml_init(16 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  E <- matrix(rnorm(64 * 10), 64, 10)
  emb <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 10)
  idx <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)
  rows <- ggml_get_rows(ctx, emb, idx)
  src <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 2)
  dst <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 256, 2)
  cp <- ggml_cpy(ctx, src, dst)
  before <- ag_memory_stats()$user_bytes
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  expect_identical(ggml_nbytes(emb), 10 * 2 * 34)
  expect_identical(ggml_nbytes(dst), 2 * 144)
  # One buffer of the tensors' real sizes, each rounded up to 64 bytes.
  sizes <- vapply(list(emb, idx, rows, src, dst), ggml_nbytes, 0)
  expect_identical(ag_memory_stats()$user_bytes - before, sum(ceiling(sizes / 64) * 64))
  ggml_backend_tensor_set_data(emb, as.vector(E))
  ggml_backend_tensor_set_data(idx, c(9, 0, 4))
  X <- matrix(rnorm(512), 256, 2)
  ggml_backend_tensor_set_data(src, as.vector(X))
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, rows))
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, cp))
  deq <- matrix(dequantize_row_q8_0(quantize_q8_0(E, 10, 64), 640), 64)
  expect_identical(ggml_backend_tensor_get_data(rows), as.vector(deq[, c(10, 1, 5)]))
  expect_identical(ggml_backend_tensor_get_raw(dst), quantize_q4_K(X, 2, 256))
  expect_identical(ggml_backend_tensor_get_data(dst), dequantize_row_q4_K(quantize_q4_K(X, 2, 256), 512))
  ggml_backend_tensor_set_data(idx, c(10, 0, 0))
  expect_error(ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, rows)),
    "row index 10 is out of range", class = "ggmlR_error")
})

test_that("cpy quantizes a large tensor's rows in parallel exactly as quantize_*() does", {
  # 400 rows of 256: enough values (102400) for the rows to be split over
  # the threads; every row's bytes must be those of the serial quantizer.
  set.seed(29)
  backend <- ggml_backend_cpu_init()
  on.exit(ggml_backend_free(backend))
  ggml_backend_cpu_set_n_threads(backend, 2)
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  X <- matrix(rnorm(256 * 400), 256, 400)
  X[, 7] <- 0
  X[3, 11] <- 1e6
  src <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 400)
  q8 <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 256, 400)
  q4k <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 256, 400)
  c8 <- ggml_cpy(ctx, src, q8)
  c4k <- ggml_cpy(ctx, src, q4k)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(src, as.vector(X))
  for (y in list(c8, c4k)) ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y))
  expect_identical(ggml_backend_tensor_get_raw(q8), quantize_q8_0(X, 400, 256))
  expect_identical(ggml_backend_tensor_get_raw(q4k), quantize_q4_K(X, 400, 256))
})

test_that("quantized tensors refuse what they cannot do, with clear errors", {
  ctx <- ggml_init(4 * 1024 * 1024)
  on.exit(ggml_free(ctx))
  expect_error(ggml_new_tensor_1d(ctx, GGML_TYPE_Q4_K, 100), "blocks of 256", class = "ggmlR_error")
  w <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 2)
  expect_error(ggml_relu(ctx, w), "floating-point tensor.*q4_0", class = "ggmlR_error")
  expect_error(ggml_backend_tensor_set_data(w, rnorm(10)), "whole row \\(64 values\\)", class = "ggmlR_error")
  ggml_backend_tensor_set_data(w, rnorm(64), offset = 36)
  expect_error(ggml_backend_tensor_set_data(w, as.raw(1:40), offset = 36), "do not fit", class = "ggmlR_error")
  iq <- ggml_new_tensor_1d(ctx, GGML_TYPE_IQ2_XXS, 256)
  expect_error(ggml_backend_tensor_set_data(iq, rnorm(256)), "importance matrix", class = "ggmlR_error")
  expect_output(print(w), "q4_0 \\[64, 2\\]")
})

# mul_mat (or get_rows with `idx`) of quantized weights on `backend`.
run_on <- function(backend, type, q, K, M, B = NULL, idx = NULL) {
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx))
  w <- ggml_new_tensor_2d(ctx, type, K, M)
  if (is.null(idx)) {
    b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, ncol(B))
    y <- ggml_mul_mat(ctx, w, b)
  } else {
    b <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, length(idx))
    y <- ggml_get_rows(ctx, w, b)
  }
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(w, q)
  ggml_backend_tensor_set_data(b, if (is.null(idx)) as.vector(B) else idx)
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y))
  matrix(ggml_backend_tensor_get_data(y), if (is.null(idx)) M else K)
}

# every type, the lattice IQ types (grids read from a table) among them
vulkan_quant_types <- all_quant_types

test_that("on Vulkan, quantized weights are dequantized in the shader: products and row lookups", {
  skip_if_no_vulkan()
  backend <- ggml_vulkan_init(0L)
  on.exit(ggml_backend_free(backend))
  set.seed(24)
  K <- 256
  M <- 7
  for (type in vulkan_quant_types) {
    W <- matrix(rnorm(K * M), K, M)
    wq <- weights_of(type, W)
    for (N in c(1, 6)) {
      B <- matrix(rnorm(K * N), K, N)
      got <- run_on(backend, type, wq$q, K, M, B)
      exact <- t(wq$deq) %*% B
      # the shader's products are f32 sums of the dequantized weights
      tol <- 1e-5 * (t(abs(wq$deq)) %*% abs(B)) + 1e-6
      expect(all(abs(got - exact) <= tol), sprintf("%s, %d columns: worst excess %g", ggml_type_name(type), N,
        max(abs(got - exact) - tol)))
      # and the CPU backend's (activations quantized to 8 bits) within its bound
      expect(all(abs(got - run_mul_mat(type, wq$q, K, M, B)) <= product_bound(type, wq$deq, B) + tol),
        sprintf("%s against the CPU backend", ggml_type_name(type)))
    }
    rows <- run_on(backend, type, wq$q, K, M, idx = c(6, 0, 3))
    expect(all(abs(rows - wq$deq[, c(7, 1, 4)]) <= 1e-6 * abs(wq$deq[, c(7, 1, 4)])),
      sprintf("%s get_rows", ggml_type_name(type)))
  }
})

test_that("on Vulkan, ops other than mul_mat and get_rows are refused on quantized tensors by name", {
  skip_if_no_vulkan()
  backend <- ggml_vulkan_init(0L)
  on.exit(ggml_backend_free(backend))
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  w <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 32, 2)
  x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 32, 2)
  y <- ggml_cpy(ctx, x, w)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  expect_error(ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y)),
    "quantized \\(q4_0\\) tensors only as the weights.*not in CPY", class = "ggmlR_error")
})
