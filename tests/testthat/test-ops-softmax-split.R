# A softmax large enough to be split over the CPU backend's threads
# (2^17 values, rows of 128) gives the same values on 2 threads as on 1,
# and the softmax of base R.
test_that("a softmax split over two threads equals one thread and base R", {
  set.seed(7)
  v <- rnorm(128 * 1024, sd = 3)
  run <- function(threads) {
    ctx <- ggml_init(16 * 1024 * 1024)
    on.exit(ggml_free(ctx))
    x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 128, 1024)
    ggml_set_f32(x, v)
    y <- ggml_soft_max(ctx, x)
    be <- ggml_backend_cpu_init()
    on.exit(ggml_backend_free(be), add = TRUE)
    ggml_backend_cpu_set_n_threads(be, threads)
    ggml_backend_graph_compute(be, ggml_build_forward_expand(ctx, y))
    ggml_get_f32(y)
  }
  one <- run(1)
  two <- run(2)
  expect_identical(two, one)
  m <- matrix(v, 128)
  ref <- as.vector(apply(m, 2, function(c) exp(c - max(c)) / sum(exp(c - max(c)))))
  expect_lt(max(abs(two - ref) / ref), 1e-5)
  expect_equal(colSums(matrix(two, 128)), rep(1, 1024), tolerance = 1e-5)
})
