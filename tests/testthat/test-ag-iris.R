test_that("an iris classifier reaches 95% validation accuracy on cpu", {
  d <- iris_task()
  x <- d$x; y <- d$y; va <- d$va
  fit <- iris_fit(d)
  model <- fit$model
  h <- fit$history
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
