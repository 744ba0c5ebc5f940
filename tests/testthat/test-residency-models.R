# A model compiled for Vulkan owns the weights it made resident: dropping it
# gives their device memory back (the byte ledger returns to where it was,
# once the last batch's activations that refer to them are freed), while
# another model's weights stay and keep working.

test_that("a dropped Vulkan model frees its resident weights", {
  skip_if_no_vulkan()
  dp_release_device()
  on.exit(dp_release_device(), add = TRUE)
  make <- function(units) {
    inp <- ggml_input(16)
    ggml_compile(ggml_model(inp, ggml_layer_dense(ggml_layer_dense(inp, units), 8)), loss = "mse", backend = "vulkan")
  }
  set.seed(7)
  x <- matrix(rnorm(4 * 16), 4, 16)
  keep <- make(4L)
  p_keep <- ggml_predict(keep, x)
  invisible(gc())
  before <- ag_memory_stats()
  gone <- make(32L)
  p_gone <- ggml_predict(gone, x)
  expect_identical(dim(p_gone), c(4L, 8L))
  mid <- ag_memory_stats()
  # 16 x 32 + 32 + 32 x 8 + 8 weights in f32, at least.
  expect_gte(mid$persistent_bytes - before$persistent_bytes, (16 * 32 + 32 + 32 * 8 + 8) * 4)
  expect_gte(mid$persistent_buffers - before$persistent_buffers, 4)
  rm(gone)
  # The last batch's activations (in the pass pool, freed when the next
  # batch starts) still refer to the weights: the next batch of the model
  # left alive lets them go, and that model still has its own weights.
  expect_equal(ggml_predict(keep, x), p_keep, tolerance = 1e-6)
  invisible(gc())
  after <- ag_memory_stats()
  expect_identical(after$persistent_bytes, before$persistent_bytes)
  expect_identical(after$persistent_buffers, before$persistent_buffers)
})

test_that("a persistent reset still frees weights a live model holds", {
  skip_if_no_vulkan()
  dp_release_device()
  on.exit(dp_release_device(), add = TRUE)
  inp <- ggml_input(3)
  m <- ggml_compile(ggml_model(inp, ggml_layer_dense(inp, 2)), loss = "mse", backend = "vulkan")
  x <- matrix(c(1, 2, 3, 4, 5, 6), 2, 3)
  p <- ggml_predict(m, x)
  expect_gt(ag_memory_stats()$persistent_bytes, 0)
  get(".ag_residency_reset", envir = asNamespace("ggmlR"))(scope = "persistent")
  expect_identical(ag_memory_stats()$persistent_bytes, 0)
  # The model makes its weights resident again on its next use.
  expect_equal(ggml_predict(m, x), p, tolerance = 1e-6)
})
