# A model compiled for Vulkan keeps each batch's activations in the pass
# pool only until the next batch: fitting and predicting over many batches
# leave no more behind than over one.

test_that("the batches of a Vulkan model free the activations of the batch before", {
  skip_if_no_vulkan()
  dp_release_device()
  on.exit(dp_release_device(), add = TRUE)
  st <- .ag_device_state
  inp <- ggml_input(4)
  m <- ggml_compile(ggml_model(inp, ggml_layer_dense(inp, 3)), loss = "mse", backend = "vulkan")
  set.seed(3)
  x <- matrix(rnorm(40 * 4), 40, 4)
  y <- matrix(rnorm(40 * 3), 40, 3)
  p_one <- ggml_predict(m, x, batch_size = 40L)
  after_one <- length(st$buffers)
  p_many <- ggml_predict(m, x, batch_size = 4L)
  expect_identical(length(st$buffers), after_one)       # not ten batches' worth
  expect_equal(p_many, p_one, tolerance = 1e-5)          # and each batch still right
  ggml_fit(m, x, y, epochs = 1L, batch_size = 40L, verbose = 0L)
  after_fit_one <- length(st$buffers)
  ggml_fit(m, x, y, epochs = 2L, batch_size = 4L, verbose = 0L)
  expect_lte(length(st$buffers), after_fit_one)
  expect_lt(length(st$buffers), 20L)
})
