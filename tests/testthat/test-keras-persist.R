# Saving and loading Keras-style models: round trips, files that are data
# only, corrupted files, and saves that fail without harming the old file.

fitted_model <- function(backend = "cpu") {
  d <- two_class(64, seed = 21)
  m <- ggml_model_sequential() |>
    ggml_layer_dense(8, activation = "relu", input_shape = 4) |>
    ggml_layer_batch_norm() |>
    ggml_layer_dropout(0.3) |>
    ggml_layer_dense(2, activation = "softmax") |>
    ggml_compile(optimizer = "sgd", loss = "categorical_crossentropy", backend = backend, learning_rate = 0.05)
  list(m = ggml_fit(m, d$x, d$y, epochs = 3, batch_size = 16, verbose = 0), d = d)
}

test_that("ggml_save_model / ggml_load_model round-trip a sequential model with batch norm", {
  for (be in keras_backends()) {
    f <- fitted_model(be)
    path <- tempfile(fileext = ".ggml")
    ggml_save_model(f$m, path)
    m2 <- ggml_load_model(path)
    expect_s3_class(m2, "ggml_sequential_model")
    expect_true(m2$compiled)
    expect_identical(m2$compilation$optimizer, "sgd")
    expect_identical(m2$compilation$backend_used, f$m$compilation$backend_used)
    expect_equal(m2$history, f$m$history)
    expect_equal(ggml_predict(m2, f$d$x), ggml_predict(f$m, f$d$x), tolerance = 1e-12)
    expect_equal(m2$compilation$runtime$bn[["layer_2"]], f$m$compilation$runtime$bn[["layer_2"]])
    # the loaded model trains on
    m2 <- ggml_fit(m2, f$d$x, f$d$y, epochs = 1, verbose = 0)
    expect_length(m2$history$train_loss, 1)
    # on the other backend
    m3 <- ggml_load_model(path, backend = "cpu")
    expect_equal(ggml_predict(m3, f$d$x), ggml_predict(f$m, f$d$x), tolerance = 1e-5)
  }
})

test_that("functional models with several inputs, shared layers and outputs round-trip", {
  set.seed(22)
  a <- ggml_input(3, name = "a")
  b <- ggml_input(2, name = "b")
  enc <- ggml_dense(4, activation = "tanh")
  h <- ggml_layer_add(list(ggml_apply(a, enc), ggml_apply(ggml_layer_dense(b, 3), enc)))
  out <- ggml_layer_dense(h, 2, activation = "softmax")
  m <- ggml_model(list(a, b), list(h, out)) |> ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  xa <- matrix(runif(30), 10, 3)
  xb <- matrix(runif(20), 10, 2)
  m <- ggml_fit(m, list(xa, xb), diag(2)[rep(1:2, 5), ], epochs = 2, verbose = 0)
  path <- tempfile()
  ggml_save_model(m, path)
  m2 <- ggml_load_model(path)
  expect_s3_class(m2, "ggml_functional_model")
  expect_equal(ggml_predict(m2, list(xa, xb)), ggml_predict(m, list(xa, xb)), tolerance = 1e-12)
  # still one encoder shared by two uses
  keys <- vapply(Filter(function(s) s$type == "dense", m2$compilation$runtime$plan$steps),
                 function(s) s$key, "")
  expect_equal(sum(duplicated(keys)), 1L)
  mm <- ggml_unmarshal_model(ggml_marshal_model(m))
  expect_equal(ggml_predict(mm, list(xa, xb)), ggml_predict(m, list(xa, xb)), tolerance = 1e-12)
})

test_that("weights files: round trip, architecture checks, and no model from a weights file", {
  f <- fitted_model()
  path <- tempfile()
  ggml_save_weights(f$m, path)
  fresh <- ggml_model_sequential() |>
    ggml_layer_dense(8, activation = "relu", input_shape = 4) |>
    ggml_layer_batch_norm() |>
    ggml_layer_dropout(0.3) |>
    ggml_layer_dense(2, activation = "softmax") |>
    ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  fresh <- ggml_load_weights(fresh, path)
  expect_equal(ggml_predict(fresh, f$d$x), ggml_predict(f$m, f$d$x), tolerance = 1e-12)
  other <- ggml_model_sequential() |> ggml_layer_dense(9, input_shape = 4) |> ggml_layer_batch_norm() |>
    ggml_layer_dense(2) |> ggml_compile(loss = "mse", backend = "cpu")
  before <- ggml_predict(other, f$d$x)
  expect_error(ggml_load_weights(other, path), "architecture mismatch.*8x4.*9x4|9x4.*8x4", class = "ggmlR_error")
  expect_equal(ggml_predict(other, f$d$x), before)
  expect_error(ggml_load_model(path), "ggml_save_weights", class = "ggmlR_error")
})

test_that("files are data: corrupted, truncated or foreign files are errors, never code", {
  f <- fitted_model()
  path <- tempfile()
  ggml_save_model(f$m, path)
  bytes <- readBin(path, "raw", file.size(path))
  bad <- tempfile()
  flip <- bytes
  flip[length(flip) - 10] <- xor(flip[length(flip) - 10], as.raw(1))
  writeBin(flip, bad)
  expect_error(ggml_load_model(bad), "checksum", class = "ggmlR_error")
  writeBin(bytes[seq_len(length(bytes) - 7)], bad)
  expect_error(ggml_load_model(bad), "truncated", class = "ggmlR_error")
  saveRDS(list(format = "ggmlR.model", version = 1L, architecture = function() stop("ran")), bad)
  expect_error(ggml_load_model(bad), "RDS", class = "ggmlR_error")
  expect_error(ggml_load_model(tempfile()), "no file", class = "ggmlR_error")
  # a well-formed container whose content is not a model
  .write_data_file(list(format = "something", x = 1), bad, "test")
  expect_error(ggml_load_model(bad), "does not hold a ggmlR model", class = "ggmlR_error")
  # the codec keeps what it is given, and refuses what is not data
  v <- list(a = 1:3, b = c(x = 1.5, y = NA), c = c("é", NA), d = matrix(c(TRUE, NA, FALSE, TRUE), 2),
            e = NULL, f = list(list()))
  .write_data_file(v, bad, "test")
  expect_identical(.read_data_file(bad, "test"), v)
  expect_error(.write_data_file(list(f = function() 1), bad, "test"), "holds only numbers, strings, logicals and lists")
})

test_that("a save that fails leaves the previous file intact", {
  f <- fitted_model()
  path <- tempfile()
  ggml_save_model(f$m, path)
  good <- readBin(path, "raw", file.size(path))
  # a device and a folder are refused before anything is written; a disk
  # that fills during the write is tested with ag_save_model() in
  # test-hostile-files.R (the same writer)
  expect_error(ggml_save_model(f$m, "/dev/full"), "not a regular file", class = "ggmlR_error")
  expect_error(ggml_save_weights(f$m, tempdir()), "is a folder", class = "ggmlR_error")
  expect_identical(readBin(path, "raw", file.size(path)), good)
  # no temporary file is left behind
  expect_identical(list.files(dirname(path), pattern = paste0("^\\.", basename(path))), character(0))
  expect_error(ggml_save_model(f$m, file.path(tempfile(), "x", "y")), "does not exist", class = "ggmlR_error")
  expect_identical(ggml_predict(ggml_load_model(path), f$d$x), ggml_predict(f$m, f$d$x))
})
