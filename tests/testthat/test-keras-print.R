# Printing models and histories, and reading where a model computes.

test_that("print and summary show layers, shapes and parameter counts", {
  m <- ggml_model_sequential() |>
    ggml_layer_conv_2d(4, c(3, 3), activation = "relu", input_shape = c(8, 8, 2)) |>
    ggml_layer_max_pooling_2d(2) |>
    ggml_layer_flatten() |>
    ggml_layer_dense(3, activation = "softmax")
  out <- capture.output(print(m))
  expect_match(out[1], "Sequential Model")
  expect_true(any(grepl("conv_2d_1 \\(conv_2d\\) +\\(6, 6, 4\\) +76", out)))
  expect_true(any(grepl("flatten_1 \\(flatten\\) +\\(36\\)", out)))
  expect_true(any(grepl("Total parameters: 187", out)))   # 4 * (3 * 3 * 2) + 4 + 36 * 3 + 3
  expect_true(any(grepl("Compiled: no", out)))
  m <- ggml_freeze_weights(m, from = 1, to = 1)
  s <- capture.output(summary(m))
  expect_true(any(grepl("Input shape: \\(8, 8, 2\\)", s)))
  expect_true(any(grepl("Trainable: 111", s)))
  expect_true(any(grepl("Non-trainable: 76", s)))
  expect_true(any(grepl("Weight memory \\(f32\\): 748 B", s)))
  expect_match(capture.output(print(ggml_model_sequential()))[2], "no layers")
  x <- ggml_input(4)
  enc <- ggml_dense(4)
  f <- ggml_model(x, ggml_layer_add(list(ggml_apply(x, enc), ggml_apply(ggml_apply(x, enc), enc))))
  fo <- capture.output(print(f))
  expect_match(fo[1], "Functional Model: 1 input, 1 output")
  expect_equal(sum(grepl("\\(dense \\(shared\\)\\)", fo)), 2L)
  expect_true(any(grepl("Total parameters: 20", fo)))
  # one layer object on inputs of two shapes cannot share its weights
  bad <- ggml_dense(3)
  g <- ggml_model(x, ggml_apply(ggml_apply(x, bad), bad))
  expect_warning(g <- ggml_compile(g, loss = "mse", backend = "cpu"),
                 "used twice with different settings or input shapes \\(\\[4\\] then \\[3\\]\\)")
  expect_error(ggml_predict(g, matrix(0, 1, 4)), "used twice", class = "ggmlR_error")
  expect_output(print(ggml_input(c(2, 3), name = "seq")), "input \"seq\" shape \\(2, 3\\), float32")
  expect_output(print(ggml_dense(4, activation = "relu")), "<ggml_layer> dense")
})

test_that("histories print, plot and convert; the backend is reported", {
  d <- two_class(40, seed = 24)
  m <- ggml_model_sequential() |> ggml_layer_dense(2, activation = "softmax", input_shape = 4) |>
    ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  expect_warning(expect_null(ggml_training_history(m)), "no training history")
  m <- ggml_fit(m, d$x, d$y, epochs = 3, verbose = 0)
  h <- m$history
  out <- capture.output(print(h))
  expect_match(out[1], "Training History: 3 epochs")
  expect_false(any(grepl("val_loss", out)))
  df <- as.data.frame(h)
  expect_equal(df$train_loss, h$train_loss)
  hl <- ggml_training_history(m, "long")
  expect_equal(nrow(hl), 6L)
  expect_identical(names(hl), c("epoch", "metric", "split", "value"))
  expect_identical(unique(hl$split), "train")
  expect_identical(hl$value[hl$metric == "loss"], h$train_loss)
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  expect_identical(plot(h), h)
  grDevices::dev.off()
  unlink(f)
  expect_identical(ggml_model_backend(m), "cpu")
  v <- ggml_model_backend(m, verbose = TRUE)
  # f32 on the CPU backend: the engine's pools (device "gpu") unless a
  # Vulkan GPU holds them.
  expect_identical(v$autograd_device, m$compilation$device)
  expect_true(v$autograd_device %in% c("cpu", "gpu"))
  expect_identical(v$device, "cpu")
  expect_false(v$fallback)
  if ("vulkan" %in% keras_backends()) {
    mv <- ggml_compile(m, loss = "categorical_crossentropy", backend = "vulkan")
    expect_identical(ggml_model_backend(mv), "vulkan")
    expect_true(ggml_vulkan_is_backend(mv$compilation$backend))
    # the weights are resident in the persistent pool
    w <- mv$compilation$runtime$weights[[1]]$weight
    expect_identical(w$ctx_scope, "persistent")
    expect_true(.ag_ptr_is_live(w))
  }
})
