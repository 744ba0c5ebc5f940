test_that("an iris classifier reaches 95% validation accuracy on cpu", {
  set.seed(1)
  X <- as.matrix(iris[, 1:4])
  y <- as.integer(iris$Species) - 1L
  tr <- unlist(lapply(split(seq_len(150), iris$Species), function(i) sample(i, 40)))
  va <- setdiff(seq_len(150), tr)
  mu <- colMeans(X[tr, ]); s <- apply(X[tr, ], 2, sd)
  x <- t(sweep(sweep(X, 2, mu), 2, s, "/"))
  model <- ag_sequential(
    ag_linear(4, 64), ag_batch_norm(64), list(forward = ag_relu), ag_dropout(0.3),
    ag_linear(64, 32), ag_batch_norm(32), list(forward = ag_relu), ag_dropout(0.3),
    ag_linear(32, 3))
  h <- ag_fit(model, x[, tr], y[tr], optimizer = optimizer_adam(model$parameters(), lr = 0.02),
              epochs = 30, batch_size = 32, validation = list(x[, va], y[va]), verbose = FALSE)
  expect_s3_class(h, "ag_history")
  m <- h$metrics
  expect_identical(nrow(m), 30L)
  expect_lt(m$loss[30], m$loss[1])
  expect_gte(m$val_accuracy[30], 0.95)
  # the accuracy reported is the model's, recomputed here in eval mode
  pred <- model$forward(ag_tensor(x[, va]))$data
  expect_equal(mean(max.col(t(pred)) - 1L == y[va]), m$val_accuracy[30])
  f <- tempfile(fileext = ".png")
  on.exit(unlink(f))
  grDevices::png(f)
  plot(h)
  grDevices::dev.off()
  expect_gt(file.size(f), 0)
})
