# ag_fit()'s data handling (layouts, targets, refusals), its output, and
# predict() / summary() / print() of models. Oracles: the same fit on data
# given another way, and base R computations on the model's own forward.

iris_x <- scale(as.matrix(iris[, 1:4]))
iris_y <- iris$Species

fit_with <- function(x, y, seed = 3, epochs = 3, lr = 0.001, ...) {
  set.seed(seed)
  model <- ag_sequential(ag_linear(4, 8, "relu"), ag_linear(8, 3))
  h <- ag_fit(model, x, y, epochs = epochs, batch_size = 25, verbose = 0,
              optimizer = optimizer_adam(model$parameters(), lr = lr), ...)
  list(model = model, history = h)
}

test_that("samples as rows, as columns and a data frame train the same model", {
  by_cols <- fit_with(t(iris_x), as.integer(iris_y) - 1L)
  by_rows <- fit_with(iris_x, as.integer(iris_y) - 1L)
  by_df <- fit_with(as.data.frame(iris_x), iris_y)
  expect_identical(by_cols$history$layout, "columns")
  expect_identical(by_rows$history$layout, "rows")
  expect_identical(by_df$history$layout, "rows")
  expect_identical(by_rows$history$metrics$loss, by_cols$history$metrics$loss)
  expect_identical(by_df$history$metrics$loss, by_cols$history$metrics$loss)
  expect_identical(by_df$model$layers[[1]]$W$data, by_cols$model$layers[[1]]$W$data)
  # an explicit layout, and an ag_tensor (always [features, samples])
  expect_identical(fit_with(iris_x, iris_y, layout = "rows")$history$metrics$loss,
                   by_cols$history$metrics$loss)
  expect_identical(fit_with(ag_tensor(t(iris_x)), iris_y)$history$metrics$loss,
                   by_cols$history$metrics$loss)
  # a one-hot target matrix with samples as rows
  oh <- diag(3)[as.integer(iris_y), ]
  expect_identical(fit_with(iris_x, oh)$history$metrics$loss, by_cols$history$metrics$loss)
})

test_that("the layout taken is said, with the reason", {
  set.seed(1)
  model <- ag_sequential(ag_linear(4, 3))
  expect_message(ag_fit(model, iris_x, iris_y, epochs = 1, verbose = 2),
                 "150 samples of 4 features, samples as rows \\(the model takes 4 features and `y` has 150 samples\\)")
  expect_message(ag_fit(model, iris[, 1:4], iris_y, epochs = 1, verbose = 2),
                 "samples as rows \\(a data frame\\)")
  expect_message(ag_fit(model, t(iris_x), iris_y, epochs = 1, verbose = 2), "samples as columns")
  # a square matrix that both readings fit is [features, samples], the convention
  sq <- matrix(rnorm(16), 4, 4)
  expect_identical(ag_fit(model, sq, c(0, 1, 2, 0), epochs = 1, verbose = 0)$layout, "columns")
})

test_that("classification losses refuse numeric targets, naming the loss to use", {
  model <- ag_sequential(ag_linear(4, 3))
  expect_error(ag_fit(model, iris_x, rnorm(150), verbose = 0),
               "not whole .*ag_softmax_cross_entropy_loss, a classification loss.*use loss = ag_mse_loss",
               class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, c(1.5, rep(1, 149)), verbose = 0), "e.g. 1.5", class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, as.integer(iris_y), verbose = 0), "look 1-based", class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, matrix(rnorm(450), 150, 3), verbose = 0),
               "not class probabilities.*use loss = ag_mse_loss", class = "ggmlR_error")
  one <- ag_sequential(ag_linear(4, 1))
  expect_error(ag_fit(one, iris_x, rep(0:1, 75), verbose = 0), "1 output.*always 0.*ag_mse_loss",
               class = "ggmlR_error")
  expect_error(ag_fit(one, iris_x, rnorm(150) > 0, verbose = 0), "2 classes.*1 output", class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, iris_y, loss = ag_mse_loss, verbose = 0),
               "factor.*ag_mse_loss, a regression loss", class = "ggmlR_error")
  # the model is untouched by a refusal
  w <- model$layers[[1]]$W$data
  expect_error(ag_fit(model, iris_x, rnorm(150), verbose = 0), class = "ggmlR_error")
  expect_identical(model$layers[[1]]$W$data, w)
})

test_that("malformed data is refused with the reason", {
  model <- ag_sequential(ag_linear(4, 3))
  expect_error(ag_fit(model, iris_x[, 1:3], iris_y, verbose = 0), "150 x 3 matrix, which fits neither layout",
               class = "ggmlR_error")
  expect_error(ag_fit(model, iris, iris_y, verbose = 0), "not numbers \\(Species\\)", class = "ggmlR_error")
  xn <- iris_x
  xn[c(3, 9), 2] <- NA
  expect_error(ag_fit(model, xn, iris_y, verbose = 0), "missing values \\(NA\\) in 2 samples",
               class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, iris_y[-1], verbose = 0), "150 x 4 matrix, which fits neither",
               class = "ggmlR_error")
  expect_error(ag_fit(model, t(iris_x), iris_y[-1], layout = "columns", verbose = 0),
               "`x` has 150 samples but `y` has 149", class = "ggmlR_error")
  expect_error(ag_fit(model, iris[, 1:4], iris_y, layout = "columns", verbose = 0), "rows are samples",
               class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, iris_y, verbose = 3), "`verbose` must be 0, 1 or 2", class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, iris_y, validation = iris, verbose = 0), "list\\(x, y\\)",
               class = "ggmlR_error")
  expect_error(ag_fit(model, iris_x, iris_y, validation = list(iris_x, factor(rep("x", 150))), verbose = 0),
               "validation\\[\\[2\\]\\]` has missing or unknown classes", class = "ggmlR_error")
})

test_that("regression with ag_mse_loss takes numeric targets in either layout", {
  set.seed(5)
  x <- matrix(runif(2 * 200, -1, 1), 200, 2)
  y <- cbind(x[, 1] - 2 * x[, 2], x[, 1] * 0.5)
  model <- ag_sequential(ag_linear(2, 2))
  h <- ag_fit(model, x, y, loss = ag_mse_loss, optimizer = optimizer_adam(model$parameters(), lr = 0.05),
              epochs = 40, batch_size = 20, verbose = 0)
  expect_identical(h$layout, "rows")
  expect_true(all(is.na(h$metrics$accuracy)))
  expect_lt(h$metrics$loss[40], 1e-3)
  expect_equal(predict(model, x), y, tolerance = 0.05)
  one <- ag_sequential(ag_linear(2, 1))
  h1 <- ag_fit(one, x, y[, 1], loss = ag_mse_loss, epochs = 2, verbose = 0)
  expect_identical(dim(predict(one, x)), c(200L, 1L))
})

test_that("verbose = 1 leaves one line per epoch, with validation; verbose = 0 prints nothing", {
  set.seed(2)
  model <- ag_sequential(ag_linear(4, 3))
  msgs <- testthat::capture_messages(
    ag_fit(model, iris_x, iris_y, epochs = 4, verbose = 1, validation = list(iris_x[1:20, ], iris_y[1:20])))
  lines <- grep("^epoch [0-9]/4  loss", msgs, value = TRUE)
  expect_length(lines, 4)
  expect_match(lines, "accuracy [0-9.]+  val_loss [0-9.]+  val_accuracy [0-9.]+  [0-9.]+s\n$")
  expect_match(msgs[1], "^ag_fit: 150 samples")
  expect_silent(ag_fit(model, iris_x, iris_y, epochs = 2, verbose = 0))
  expect_silent(suppressMessages(ag_fit(model, iris_x, iris_y, epochs = 2)))
})

test_that("losses are printed with significant digits, not as 0.0000", {
  expect_identical(.ag_fmt(1.234567e-05), "1.235e-05")
  expect_identical(.ag_fmt(0.5), "0.5000")
  expect_identical(.ag_fmt(123.456), "123.5")
  expect_identical(.ag_fmt(NA_real_), "-")
  row <- data.frame(epoch = 7L, loss = 3.2e-6, accuracy = 1, val_loss = NA, val_accuracy = NA, seconds = 0.5)
  expect_identical(.ag_epoch_line(row, 10L), "epoch  7/10  loss 3.200e-06  accuracy 1.00  0.50s")
})

test_that("the progress bar shows the running loss and the last validation loss", {
  bar <- .ag_bar_start(2L, 5L, 10L)
  .ag_bar_update(bar, 0.25, 0.000123456)
  expect_identical(bar$loss, "0.2500")
  expect_identical(bar$val, "0.0001235")
  cli::cli_progress_done(id = bar$id)
})

test_that("predict() returns outputs, probabilities and classes in the data's layout", {
  f <- fit_with(as.data.frame(iris_x), iris_y, epochs = 20, lr = 0.02)
  model <- f$model
  ag_train(model)
  raw <- model$layers[[2]]$forward(model$layers[[1]]$forward(ag_tensor(t(iris_x))))
  expect_true(model$training)                 # raw forward in training mode (no dropout here)
  out <- predict(model, as.data.frame(iris_x))
  expect_true(model$training)                 # the mode is left as it was
  expect_identical(dim(out), c(150L, 3L))
  expect_equal(out, t(raw$data), tolerance = 1e-12)
  expect_equal(predict(model, t(iris_x)), raw$data, tolerance = 1e-12)
  expect_equal(predict(model, iris_x, batch_size = 7), out, tolerance = 1e-12)
  p <- predict(model, iris_x, type = "prob")
  sm <- exp(out) / rowSums(exp(out))
  expect_equal(unname(p), sm, tolerance = 1e-12)
  expect_identical(colnames(p), levels(iris_y))
  cl <- predict(model, iris_x, type = "class")
  expect_identical(levels(cl), levels(iris_y))
  expect_identical(as.integer(cl), max.col(out, ties.method = "first"))
  expect_gt(mean(cl == iris_y), 0.9)
  # without factor levels: 0-based labels
  g <- fit_with(iris_x, as.integer(iris_y) - 1L, epochs = 2)
  expect_identical(predict(g$model, iris_x, type = "class"),
                   max.col(predict(g$model, iris_x), ties.method = "first") - 1L)
  expect_error(predict(model, iris_x[, 1:3]), "fits neither layout", class = "ggmlR_error")
  # a vector with one value per feature is one sample
  expect_equal(predict(model, iris_x[7, ]), raw$data[, 7, drop = FALSE], tolerance = 1e-12)
})

test_that("predict() uses the softmax or sigmoid the model ends with", {
  set.seed(4)
  sm <- ag_sequential(ag_linear(4, 3, activation = "softmax"))
  p <- predict(sm, iris_x, type = "prob")
  expect_equal(p, predict(sm, iris_x), tolerance = 1e-12)
  expect_equal(rowSums(p), rep(1, 150), tolerance = 1e-12)
  sg <- ag_sequential(ag_linear(4, 1, activation = "sigmoid"))
  q <- predict(sg, iris_x, type = "prob")
  expect_equal(q[, 2], predict(sg, iris_x)[, 1], tolerance = 1e-12)
  expect_identical(predict(sg, iris_x, type = "class"), as.integer(q[, 2] > 0.5))
  lin <- ag_sequential(ag_linear(4, 1))
  expect_error(predict(lin, iris_x, type = "prob"), "one output without a sigmoid", class = "ggmlR_error")
})

test_that("summary() counts parameters per layer", {
  model <- ag_sequential(ag_linear(4, 16, "relu"), ag_dropout(0.1), ag_batch_norm(16), ag_linear(16, 3))
  s <- summary(model)
  expect_s3_class(s, "summary.ag_layer")
  expect_identical(s$layers$parameters, c(4 * 16 + 16, 0, 32, 16 * 3 + 3))
  expect_identical(s$parameters, sum(vapply(model$parameters(), length, 1L)) + 0)
  expect_identical(s$inputs, 4L)
  expect_identical(s$outputs, 3L)
  expect_identical(summary(ag_linear(3, 2))$parameters, 8)
})

test_that("print snapshots: models, summaries, histories, epoch lines", {
  set.seed(11)
  model <- ag_sequential(ag_linear(4, 8, "relu"), ag_dropout(0.1), ag_linear(8, 3))
  expect_snapshot(model)
  expect_snapshot(ag_linear(300, 200))
  expect_snapshot(summary(model))
  h <- ag_fit(model, iris_x, iris_y, epochs = 3, batch_size = 50, verbose = 0,
              validation = list(iris_x[1:30, ], iris_y[1:30]))
  expect_snapshot(h)
  expect_snapshot(summary(model))
  expect_snapshot(ag_fit(model, iris_x, iris_y, epochs = 2, batch_size = 50, verbose = 2),
                  transform = function(x) sub("[0-9.]+s$", "<time>s", x))
  expect_snapshot(error = TRUE, ag_fit(model, iris_x, c(0.5, rep(0, 149))))
  expect_snapshot(error = TRUE, ag_fit(ag_sequential(ag_linear(4, 1)), iris_x, rep(0:1, 75)))
})
