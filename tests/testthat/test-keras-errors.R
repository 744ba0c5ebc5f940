# Bad input to Keras-style models: a ggmlR_error that names the function,
# the layer and the shapes and says what to do, and nothing lost.

mlp <- function(loss = "categorical_crossentropy", units = 2, act = "softmax") {
  ggml_model_sequential() |>
    ggml_layer_dense(8, activation = "relu", input_shape = 4) |>
    ggml_layer_dense(units, activation = act) |>
    ggml_compile(loss = loss, backend = "cpu")
}

test_that("a layer fed the wrong shape names the layer and the shapes", {
  m <- ggml_model_sequential() |> ggml_layer_conv_2d(4, 3, input_shape = 10)
  expect_error(ggml_compile(m), "layer \"conv_2d_1\" \\(conv_2d\\) needs an image c\\(H, W, C\\) input but got shape \\[10\\]",
               class = "ggmlR_error")
  m <- ggml_model_sequential() |> ggml_layer_dense(4, input_shape = 3) |> ggml_layer_lstm(2)
  expect_error(ggml_compile(m), "\"lstm_1\" \\(lstm\\) needs a sequence .* shape \\[4\\]", class = "ggmlR_error")
  m <- ggml_model_sequential() |> ggml_layer_conv_2d(4, 5, input_shape = c(3, 3, 1))
  expect_error(ggml_compile(m), "kernel 5 does not fit an input of size 3", class = "ggmlR_error")
  x <- ggml_input(4)
  bad <- ggml_model(x, ggml_layer_add(list(ggml_layer_dense(x, 3), ggml_layer_dense(x, 2))))
  expect_warning(bad <- ggml_compile(bad, loss = "mse", backend = "cpu"), "shape mismatch")
  expect_error(ggml_fit(bad, matrix(0, 2, 4), matrix(0, 2, 3)),
               "ggml_fit\\(\\): .*shape mismatch -- input 1 has shape \\[3\\] but input 2 has shape \\[2\\]",
               class = "ggmlR_error")
  expect_error(ggml_model_sequential() |> ggml_layer_dense(3) |> ggml_compile(), "input_shape", class = "ggmlR_error")
})

test_that("data that does not fit the model's inputs", {
  m <- mlp()
  expect_error(ggml_predict(m, matrix(0, 3, 5)),
               "ggml_predict\\(\\): input \"input\" takes samples of shape \\[4\\], but `x` has 5 features",
               class = "ggmlR_error")
  expect_error(ggml_fit(m, matrix(0, 3, 5), diag(2)[c(1, 2, 1), ]), "takes samples of shape \\[4\\]",
               class = "ggmlR_error")
  expect_error(ggml_predict(m, letters), "numeric matrix", class = "ggmlR_error")
  expect_error(ggml_predict(m, matrix(c(1, NA), 2, 4)), "missing values", class = "ggmlR_error")
  a <- ggml_input(2)
  b <- ggml_input(3)
  two <- ggml_model(list(a, b), ggml_layer_dense(ggml_layer_concatenate(list(a, b)), 2)) |>
    ggml_compile(loss = "mse", backend = "cpu")
  expect_error(ggml_predict(two, matrix(0, 2, 5)), "2 inputs, so `x` must be a list", class = "ggmlR_error")
  expect_error(ggml_predict(two, list(matrix(0, 2, 2), matrix(0, 3, 3))), "different numbers of samples",
               class = "ggmlR_error")
  e <- ggml_input(3, dtype = "int32")
  em <- ggml_model(e, ggml_layer_dense(ggml_layer_flatten(ggml_layer_embedding(e, 5, 2)), 2)) |>
    ggml_compile(loss = "mse", backend = "cpu")
  expect_error(ggml_predict(em, matrix(c(0, 1, 7), 1)), "\\(embedding\\): index 7 is not a whole number in \\[0, 5\\)",
               class = "ggmlR_error")
  expect_error(ggml_predict(em, matrix(c(0, 1.5, 2), 1)), "int32 \\(indices\\).*non-integer", class = "ggmlR_error")
})

test_that("labels that do not fit the loss say which loss to use", {
  m <- mlp()
  x <- matrix(runif(12), 3, 4)
  expect_error(ggml_fit(m, x, c(0.2, 1.7, 3.1)), "non-integer values.*use loss = \"mse\"", class = "ggmlR_error")
  expect_error(ggml_fit(m, x, c(0L, 1L, 1L)), "one-hot labels.*sparse_categorical_crossentropy",
               class = "ggmlR_error")
  expect_error(ggml_fit(m, x, diag(3)), "3 columns but the output \"dense_2\" has 2 units", class = "ggmlR_error")
  expect_error(ggml_fit(m, x, matrix(c(0.5, 0.7, 0.2, 0.1, 0.4, 0.9), 3)), "one-hot vector.*\"mse\"",
               class = "ggmlR_error")
  s <- mlp("sparse_categorical_crossentropy")
  expect_error(ggml_fit(s, x, c(0, 1, 2)), "class label 2 does not fit.*below 2", class = "ggmlR_error")
  expect_error(ggml_fit(s, x, c(0, 1.5, 1)), "class label 1.5", class = "ggmlR_error")
  expect_error(ggml_fit(s, x, factor(c("a", "b", "c"))), "3 classes but the output \"dense_2\" has 2 units",
               class = "ggmlR_error")
  r <- mlp("mse", units = 1, act = NULL)
  expect_error(ggml_fit(r, x, factor(c("a", "b", "a"))), "factor.*regression loss.*categorical_crossentropy",
               class = "ggmlR_error")
  expect_error(ggml_fit(r, x, c(1, 2)), "`x` has 3 samples but `y` has 2 rows", class = "ggmlR_error")
  bce <- mlp("binary_crossentropy", units = 1, act = "sigmoid")
  expect_error(ggml_fit(bce, x, c(0, 2, 1)), "targets in \\[0, 1\\].*\"mse\"", class = "ggmlR_error")
  one <- ggml_model_sequential() |> ggml_layer_dense(1, activation = "sigmoid", input_shape = 4)
  expect_error(ggml_compile(one, loss = "categorical_crossentropy", backend = "cpu"),
               "at least 2 units.*binary_crossentropy", class = "ggmlR_error")
})

test_that("arguments: compile before fit, options, weights, validation", {
  raw <- ggml_model_sequential() |> ggml_layer_dense(2, input_shape = 4)
  x <- matrix(runif(8), 2, 4)
  y <- diag(2)
  expect_error(ggml_fit(raw, x, y), "must be compiled first: call ggml_compile", class = "ggmlR_error")
  expect_error(ggml_predict(raw, x), "must be compiled", class = "ggmlR_error")
  expect_error(ggml_compile(raw, loss = "hinge"), "`loss` must be one of", class = "ggmlR_error")
  expect_error(ggml_compile(raw, optimizer = "rmsprop"), "`optimizer` must be", class = "ggmlR_error")
  expect_error(ggml_compile(raw, backend = "tpu"), "`backend` must be", class = "ggmlR_error")
  expect_error(ggml_layer_dense(raw, 2, activation = "swish"), "`activation` must be", class = "ggmlR_error")
  expect_error(ggml_layer_dense(raw, 0), "`units` must be", class = "ggmlR_error")
  expect_error(ggml_layer_dropout(raw, 1), "\\[0, 1\\)", class = "ggmlR_error")
  expect_error(ggml_layer_dense("model", 2), "must be a ggml_sequential_model .* or a ggml_tensor_node",
               class = "ggmlR_error")
  m <- mlp()
  expect_error(ggml_fit(m, x, y, validation_data = x), "list\\(x_val, y_val\\)", class = "ggmlR_error")
  expect_error(ggml_fit(m, x, y, class_weight = c("0" = 1), sample_weight = c(1, 1)), "not both",
               class = "ggmlR_error")
  expect_error(ggml_fit(m, x, y, sample_weight = 1), "length 1 but there are 2 samples", class = "ggmlR_error")
  expect_error(ggml_fit(m, x, y, validation_split = 1.5), "`validation_split`", class = "ggmlR_error")
  expect_error(ggml_fit(m, x, y, callbacks = function(...) 1), "`callbacks` must be a list", class = "ggmlR_error")
  expect_error(ggml_fit("m", x, y), "compiled ggml_sequential_model", class = "ggmlR_error")
  expect_error(ggml_layer_dense(m, 3), "already compiled", class = "ggmlR_error")
  expect_error(ggml_get_layer(m, index = 5), "out of range", class = "ggmlR_error")
  expect_error(ggml_get_layer(m, name = "nope"), "No layer named \"nope\"", class = "ggmlR_error")
  expect_error(ggml_freeze_weights(m, from = 2, to = 1), "Invalid range", class = "ggmlR_error")
  expect_error(ggml_model(ggml_layer_dense(ggml_input(2), 2), ggml_input(2)), "node_type \"dense\"",
               class = "ggmlR_error")
  expect_error(ggml_input(c(2, 2, 2, 2)), "`shape`", class = "ggmlR_error")
  expect_error(ggml_input(3, dtype = "float16"), "`dtype`", class = "ggmlR_error")
})

test_that("after an error, the model, its weights and its optimizer are as before", {
  d <- two_class(40, seed = 23)
  m <- mlp()
  m <- ggml_fit(m, d$x, d$y, epochs = 1, verbose = 0)
  p0 <- ggml_predict(m, d$x)
  w0 <- lapply(m$layers[[2]]$weights, function(t) t$data)
  steps <- m$compilation$runtime$optimizer$t
  expect_error(ggml_fit(m, d$x, d$cls), class = "ggmlR_error")
  expect_error(ggml_fit(m, d$x[, 1:3], d$y), class = "ggmlR_error")
  expect_error(ggml_fit(m, d$x, d$y, callbacks = list(list(on_epoch_end = function(...) stop("callback failed")))),
               "callback failed")
  expect_identical(lapply(m$layers[[2]]$weights, function(t) t$data) |> length(), 2L)
  m2 <- ggml_fit(m, d$x, d$y, epochs = 1, verbose = 0)
  expect_gt(m2$compilation$runtime$optimizer$t, steps)
  expect_true(all(is.finite(ggml_predict(m2, d$x))))
  m3 <- mlp()
  m3 <- ggml_fit(m3, d$x, d$y, epochs = 1, verbose = 0)
  before <- ggml_predict(m3, d$x)
  expect_error(ggml_fit(m3, d$x, d$y * 2), class = "ggmlR_error")
  expect_identical(ggml_predict(m3, d$x), before)
})
