# Training Keras-style models: to a stated accuracy on data made here, with
# callbacks, schedules, weights and frozen layers.

test_that("a sequential model learns a two-class problem to 95% held-out accuracy", {
  for (be in keras_backends()) {
    d <- two_class(600, seed = 1)
    set.seed(1)
    m <- ggml_model_sequential() |>
      ggml_layer_dense(16, activation = "relu", input_shape = 4) |>
      ggml_layer_batch_norm() |>
      ggml_layer_dense(2, activation = "softmax") |>
      ggml_compile(optimizer = "adam", loss = "categorical_crossentropy", backend = be, learning_rate = 0.005)
    m <- ggml_fit(m, d$x, d$y, epochs = 40, batch_size = 32, validation_split = 0.2, verbose = 0)
    h <- m$history
    expect_s3_class(h, "ggml_history")
    expect_lt(tail(h$train_loss, 1), h$train_loss[1])
    test <- two_class(400, seed = 99)
    acc <- mean(ggml_predict_classes(m, test$x) == test$cls + 1L)
    expect_gt(acc, 0.95)
    ev <- ggml_evaluate(m, test$x, test$y)
    expect_equal(ev$accuracy, acc, tolerance = 1e-12)
    expect_equal(ev$n_samples, 400L)
    expect_gt(tail(h$val_accuracy, 1), 0.9)
  }
})

test_that("a functional model with two inputs, a shared layer and a residual add learns to 95%", {
  for (be in keras_backends()) {
    set.seed(12)
    n <- if (be == "cpu") 800 else 400
    a <- matrix(runif(n * 3), n, 3)
    b <- matrix(runif(n * 3), n, 3)
    # the class: which input has the larger sum (the same encoder reads both)
    cls <- as.integer(rowSums(a) > rowSums(b))
    y <- cbind(cls == 0, cls == 1) * 1
    ia <- ggml_input(3, name = "a")
    ib <- ggml_input(3, name = "b")
    enc <- ggml_dense(8, activation = "tanh", name = "encoder")
    ha <- ggml_apply(ia, enc)
    hb <- ggml_apply(ib, enc)
    h <- ggml_layer_concatenate(list(ha, hb))
    r <- ggml_layer_dense(h, 16, activation = "relu")
    r <- ggml_layer_add(list(r, ggml_layer_dense(r, 16, activation = "relu")))
    out <- ggml_layer_dense(r, 2, activation = "softmax")
    m <- ggml_model(list(ia, ib), out) |>
      ggml_compile(loss = "categorical_crossentropy", backend = be, learning_rate = 0.01)
    rt <- m$compilation$runtime
    # one set of encoder weights for its two uses
    expect_equal(sum(vapply(rt$plan$steps, function(s) identical(s$key, enc$layer_id), TRUE)), 2L)
    m <- ggml_fit(m, list(a, b), y, epochs = if (be == "cpu") 30 else 20, batch_size = 32, verbose = 0)
    set.seed(13)
    ta <- matrix(runif(600), 200, 3)
    tb <- matrix(runif(600), 200, 3)
    pc <- ggml_predict_classes(m, list(a = ta, b = tb))
    expect_gt(mean(pc == as.integer(rowSums(ta) > rowSums(tb)) + 1L), 0.95)
    # inputs by name in any order
    expect_equal(ggml_predict(m, list(b = tb, a = ta)), ggml_predict(m, list(ta, tb)))
  }
})

test_that("a small CNN, an LSTM and an embedding model learn their tasks", {
  set.seed(14)
  n <- 300
  img <- array(runif(n * 8 * 8), c(n, 8, 8, 1)) * 0.2
  cls <- sample(0:1, n, TRUE)
  for (i in which(cls == 1)) img[i, 1:4, 1:4, 1] <- img[i, 1:4, 1:4, 1] + 0.8
  m <- ggml_model_sequential() |>
    ggml_layer_conv_2d(4, 3, activation = "relu", input_shape = c(8, 8, 1)) |>
    ggml_layer_max_pooling_2d(2) |>
    ggml_layer_flatten() |>
    ggml_layer_dense(2, activation = "softmax") |>
    ggml_compile(loss = "sparse_categorical_crossentropy", backend = "cpu", learning_rate = 0.02)
  m <- ggml_fit(m, img, cls, epochs = 15, batch_size = 32, verbose = 0)
  expect_gt(ggml_evaluate(m, img, cls)$accuracy, 0.95)
  # the sign of a sequence's sum, read step by step
  s <- array(rnorm(n * 6), c(n, 6, 1))
  sc <- as.integer(apply(s, 1, sum) > 0)
  for (rnn in list(ggml_layer_lstm, ggml_layer_gru)) {
    set.seed(15)
    m <- ggml_model_sequential() |> rnn(8, input_shape = c(6, 1)) |>
      ggml_layer_dense(2, activation = "softmax") |>
      ggml_compile(loss = "sparse_categorical_crossentropy", backend = "cpu", learning_rate = 0.02)
    m <- ggml_fit(m, s, sc, epochs = 25, batch_size = 32, verbose = 0)
    expect_gt(ggml_evaluate(m, s, sc)$accuracy, 0.9)
  }
  # whether token 3 occurs in a sequence of 5
  tok <- matrix(sample(0:9, n * 5, TRUE), n, 5)
  tc <- as.integer(apply(tok == 3, 1, any))
  inp <- ggml_input(5, dtype = "int32")
  out <- inp |> ggml_layer_embedding(10, 4) |> ggml_layer_flatten() |>
    ggml_layer_dense(16, activation = "relu") |> ggml_layer_dense(2, activation = "softmax")
  m <- ggml_compile(ggml_model(inp, out), loss = "sparse_categorical_crossentropy", backend = "cpu",
                    learning_rate = 0.02)
  m <- ggml_fit(m, tok, tc, epochs = 30, batch_size = 32, verbose = 0)
  expect_gt(ggml_evaluate(m, tok, tc)$accuracy, 0.95)
})

test_that("regression with mse and binary classification with binary_crossentropy", {
  set.seed(16)
  x <- matrix(rnorm(400 * 2), 400, 2)
  y <- 2 * x[, 1] - x[, 2] + 0.5
  m <- ggml_model_sequential() |> ggml_layer_dense(1, input_shape = 2) |>
    ggml_compile(optimizer = "sgd", loss = "mse", backend = "cpu", learning_rate = 0.1)
  m <- ggml_fit(m, x, y, epochs = 30, batch_size = 40, verbose = 0)
  w <- m$layers[[1]]$weights
  expect_equal(as.vector(w$weight$data), c(2, -1), tolerance = 1e-3)
  expect_equal(as.vector(w$bias$data), 0.5, tolerance = 1e-3)
  expect_true(is.na(ggml_evaluate(m, x, y)$accuracy))
  yb <- as.integer(x[, 1] > 0)
  mb <- ggml_model_sequential() |> ggml_layer_dense(1, activation = "sigmoid", input_shape = 2) |>
    ggml_compile(loss = "binary_crossentropy", backend = "cpu", learning_rate = 0.05)
  mb <- ggml_fit(mb, x, yb, epochs = 20, batch_size = 40, verbose = 0)
  ev <- ggml_evaluate(mb, x, yb)
  p <- ggml_predict(mb, x)[, 1]
  expect_equal(ev$loss, -mean(yb * log(p) + (1 - yb) * log(1 - p)), tolerance = 1e-6)
  expect_gt(ev$accuracy, 0.95)
  expect_equal(ggml_predict_classes(mb, x), 1L + as.integer(p > 0.5))
})

test_that("weights: evaluate's weighted loss matches the weighted mean of per-sample losses", {
  d <- two_class(60, seed = 17)
  m <- ggml_model_sequential() |> ggml_layer_dense(2, activation = "softmax", input_shape = 4) |>
    ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  p <- ggml_predict(m, d$x)
  per <- -log(p[cbind(seq_len(60), d$cls + 1L)])
  w <- runif(60)
  expect_equal(ggml_evaluate(m, d$x, d$y, sample_weight = w)$loss, sum(w * per) / 60, tolerance = 1e-10)
  cw <- c("0" = 1, "1" = 3)
  expect_equal(ggml_evaluate(m, d$x, d$y, class_weight = cw)$loss,
               sum(ifelse(d$cls == 1, 3, 1) * per) / 60, tolerance = 1e-10)
  expect_equal(ggml_evaluate(m, d$x, d$y, batch_size = 7)$loss, mean(per), tolerance = 1e-10)
  # zero weights: those samples do not move the weights
  m1 <- ggml_model_sequential() |> ggml_layer_dense(2, activation = "softmax", input_shape = 4) |>
    ggml_compile(optimizer = "sgd", loss = "categorical_crossentropy", backend = "cpu")
  w0 <- lapply(m1$layers[[1]]$weights, function(t) t$data)
  ggml_fit(m1, d$x, d$y, epochs = 1, batch_size = 60, sample_weight = rep(0, 60), verbose = 0)
  expect_equal(lapply(m1$layers[[1]]$weights, function(t) t$data), w0)
})

test_that("frozen layers keep their weights; batch norm statistics still learn", {
  d <- two_class(64, seed = 18)
  m <- ggml_model_sequential() |>
    ggml_layer_dense(8, activation = "relu", input_shape = 4) |>
    ggml_layer_batch_norm() |>
    ggml_layer_dense(2, activation = "softmax")
  m <- ggml_freeze_weights(m, from = 1, to = 2) |> ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  w1 <- m$layers[[1]]$weights$weight$data
  w3 <- m$layers[[3]]$weights$weight$data
  m <- ggml_fit(m, d$x, d$y, epochs = 2, batch_size = 16, verbose = 0)
  expect_identical(m$layers[[1]]$weights$weight$data, w1)
  expect_false(identical(m$layers[[3]]$weights$weight$data, w3))
  bn <- m$compilation$runtime$bn[["layer_2"]]
  expect_false(all(bn$mean == 0))
  # unfreezing takes effect at the next fit
  m <- ggml_unfreeze_weights(m)
  m <- ggml_fit(m, d$x, d$y, epochs = 1, batch_size = 16, verbose = 0)
  expect_false(identical(m$layers[[1]]$weights$weight$data, w1))
  # functional: by layer name
  inp <- ggml_input(4)
  out <- ggml_layer_dense(ggml_layer_dense(inp, 4, name = "base"), 2, activation = "softmax", name = "head")
  fm <- ggml_freeze_weights(ggml_model(inp, out), layers = "base") |>
    ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  base0 <- fm$compilation$runtime$weights[["name:base"]]$weight$data
  fm <- ggml_fit(fm, d$x, d$y, epochs = 1, verbose = 0)
  expect_identical(fm$compilation$runtime$weights[["name:base"]]$weight$data, base0)
})

test_that("callbacks see the epoch's logs; early stopping and schedules act on a model fit", {
  d <- two_class(80, seed = 19)
  mk <- function() ggml_model_sequential() |> ggml_layer_dense(2, activation = "softmax", input_shape = 4) |>
    ggml_compile(loss = "categorical_crossentropy", backend = "cpu", learning_rate = 0.1)
  seen <- list()
  lrs <- numeric(0)
  cb <- list(on_epoch_end = function(epoch, logs, state) {
    seen[[epoch]] <<- logs
    lrs <<- c(lrs, ggml_opt_get_lr(state$lr_ud)[["adamw"]])
  })
  m <- ggml_fit(mk(), d$x, d$y, epochs = 5, validation_split = 0.25, verbose = 0,
                callbacks = list(ggml_schedule_step_decay(step_size = 2, gamma = 0.5), cb))
  expect_length(seen, 5)
  expect_equal(vapply(seen, function(l) l$val_loss, 0), m$history$val_loss)
  expect_equal(lrs, c(0.1, 0.1, 0.05, 0.05, 0.025))
  expect_equal(m$compilation$runtime$optimizer$lr, 0.025)
  m <- ggml_fit(mk(), d$x, d$y, epochs = 5, verbose = 0,
                callbacks = list(ggml_schedule_cosine_decay(eta_min = 0.01), cb))
  expect_equal(m$compilation$runtime$optimizer$lr, 0.01 + 0.5 * 0.09 * (1 + cos(pi * 4 / 5)))
  stopper <- list(on_epoch_end = function(epoch, logs, state) if (epoch == 3) state$stop <- TRUE)
  m <- ggml_fit(mk(), d$x, d$y, epochs = 10, verbose = 0, callbacks = list(stopper))
  expect_length(m$history$train_loss, 3)
  expect_message(m <- ggml_fit(mk(), d$x, d$y, epochs = 50, verbose = 0,
                               callbacks = list(ggml_callback_early_stopping("train_accuracy", patience = 0,
                                                                             min_delta = 1))),
                 "Early stopping")
  # the first epoch sets the best value, the second does not beat it by 1
  expect_length(m$history$train_loss, 2)
})

test_that("verbose prints one line per epoch; 0 prints nothing", {
  d <- two_class(40, seed = 20)
  m <- ggml_model_sequential() |> ggml_layer_dense(2, activation = "softmax", input_shape = 4) |>
    ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
  out <- capture.output(m <- ggml_fit(m, d$x, d$y, epochs = 3, verbose = 2, validation_split = 0.25))
  expect_length(out, 3)
  expect_match(out[3], "^Epoch 3/3 .* loss: [0-9.]+ - accuracy: [0-9.]+ - val_loss: [0-9.]+ - val_accuracy")
  expect_length(capture.output(m <- ggml_fit(m, d$x, d$y, epochs = 3, verbose = 0)), 0)
  # the progress bar of verbose = 1, drawn even when not interactive
  old <- options(cli.dynamic = FALSE, cli.progress_show_after = 0)
  on.exit(options(old))
  out <- c(capture.output(msgs <- capture.output(m <- ggml_fit(m, d$x, d$y, epochs = 2, batch_size = 8,
                                                               verbose = 1), type = "message")))
  expect_true(any(grepl("Epoch 1/2 .*5/5 - loss: [0-9.]+ - accuracy: [0-9.]+", msgs)))
  expect_equal(sum(grepl("^Epoch [12]/2 - ", out)), 2L)
})

test_that("reduce_on_plateau: reduces after `patience` epochs without improvement, waits again, stops at min_lr", {
  lr <- .nn_lr_new(adamw = 0.1, sgd = 0.1)
  state <- new.env()
  state$lr_ud <- lr
  cb <- ggml_schedule_reduce_on_plateau("val_loss", factor = 0.5, patience = 2, min_lr = 0.02, verbose = FALSE)
  vals <- c(1, 0.9, 0.95, 0.92, 0.91, 0.93, 0.94, 0.99, 1, 1)
  got <- numeric(0)
  for (e in seq_along(vals)) {
    cb$on_epoch_end(e, list(val_loss = vals[e]), state)
    got <- c(got, ggml_opt_get_lr(lr)[["adamw"]])
  }
  expect_equal(got, c(0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.02, 0.02, 0.02))
  cb$on_epoch_end(11, list(val_loss = NA), state)
  expect_equal(ggml_opt_get_lr(lr)[["sgd"]], 0.02)
})
