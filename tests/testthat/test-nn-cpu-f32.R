# backend = "cpu" in f32 (ggml's CPU backend, the engine's pools) against the
# same model in f64 on the host: training batches are copied from the data
# converted once to f32 columns, in the layout the f64 path builds in R.

conv_model <- function() {
  ggml_model_sequential() |>
    ggml_layer_conv_2d(3, c(2, 3), activation = "relu", input_shape = c(6, 5, 2)) |>
    ggml_layer_flatten() |>
    ggml_layer_dense(3, activation = "softmax")
}

test_that("f32 on the CPU evaluates as the f64 host model with the same weights", {
  set.seed(3)
  n <- 23L
  x <- array(rnorm(n * 60), c(n, 6, 5, 2))
  y <- diag(3)[sample.int(3, n, replace = TRUE), ]
  m32 <- ggml_compile(conv_model(), loss = "categorical_crossentropy", backend = "cpu")
  m64 <- ggml_compile(conv_model(), loss = "categorical_crossentropy", backend = "cpu", dtype = "f64")
  expect_identical(m64$compilation$device, "cpu")
  f <- tempfile(fileext = ".rds")
  on.exit(unlink(f))
  ggml_save_weights(m32, f)
  m64 <- ggml_load_weights(m64, f)
  e32 <- ggml_evaluate(m32, x, y, batch_size = 5)
  e64 <- ggml_evaluate(m64, x, y, batch_size = 5)
  expect_equal(e32$loss, e64$loss, tolerance = 1e-5)
  expect_equal(e32$accuracy, e64$accuracy)
  expect_equal(ggml_predict(m32, x), ggml_predict(m64, x), tolerance = 1e-5)
  # Samples flattened in R's order for the shape take the same path.
  e_flat <- ggml_evaluate(m32, matrix(x, n), y, batch_size = 5)
  expect_equal(e_flat$loss, e32$loss, tolerance = 1e-12)
})

test_that("f32 on the CPU trains, with a validation split, and refuses missing values", {
  d <- two_class(200)
  m <- ggml_model_sequential() |>
    ggml_layer_dense(16, activation = "relu", input_shape = 4) |>
    ggml_layer_dense(2, activation = "softmax")
  m <- ggml_compile(m, loss = "categorical_crossentropy", backend = "cpu", learning_rate = 0.01)
  m <- ggml_fit(m, d$x, d$y, epochs = 60, batch_size = 20, validation_split = 0.2, verbose = 0)
  h <- m$history
  expect_lt(h$train_loss[60], h$train_loss[1] / 2)
  expect_gt(h$val_accuracy[60], 0.85)
  expect_gt(ggml_evaluate(m, d$x, d$y)$accuracy, 0.85)
  bad <- d$x
  bad[7, 2] <- NA
  expect_error(ggml_fit(m, bad, d$y, epochs = 1, verbose = 0), "contains missing values", class = "ggmlR_error")
  bad[7, 2] <- NaN
  expect_error(ggml_evaluate(m, bad, d$y), "contains missing values", class = "ggmlR_error")
  expect_error(ggml_compile(m, loss = "mse", backend = "cpu", dtype = "f16"), "`dtype` must be", class = "ggmlR_error")
})
