# dp_train() with its replicas in this process.

test_that("replicas in step equal one loop that averages their samples' gradients", {
  data <- dp_problem(n = 12L)
  for (R in c(1L, 3L)) {
    res <- dp_train(dp_fixed_mlp, data, loss_fn = dp_mse, forward_fn = dp_fwd, target_fn = dp_tgt,
                    n_gpu = R, n_iter = 7L, lr = 0.01, verbose = FALSE)
    want <- dp_oracle(dp_fixed_mlp, data, R, n_iter = 7L, lr = 0.01)
    expect_named(res, c("params", "loss_history", "model"))
    expect_equal(dp_weights(res), want$weights, tolerance = 1e-12)
    expect_equal(res$loss_history, want$loss, tolerance = 1e-12)
    expect_identical(res$params, res$model$parameters())
  }
})

test_that("max_norm clips the averaged gradients before the update", {
  data <- dp_problem(n = 8L)
  res <- dp_train(dp_fixed_mlp, data, loss_fn = dp_mse, forward_fn = dp_fwd, target_fn = dp_tgt,
                  n_gpu = 2L, n_iter = 5L, lr = 0.05, max_norm = 0.05, verbose = FALSE)
  want <- dp_oracle(dp_fixed_mlp, data, 2L, n_iter = 5L, lr = 0.05, max_norm = 0.05)
  free <- dp_oracle(dp_fixed_mlp, data, 2L, n_iter = 5L, lr = 0.05)
  expect_equal(dp_weights(res), want$weights, tolerance = 1e-12)
  expect_gt(max(abs(want$weights - free$weights)), 1e-4)
})

test_that("the defaults: samples are model inputs and targets, the first replica's weights are shared", {
  set.seed(9L)
  make_model <- function() {
    W <- ag_param(matrix(rnorm(4) * 0.1, 2, 2))
    list(forward = function(x) ag_matmul(W, x), parameters = function() list(W = W))
  }
  data <- lapply(1:8, function(i) matrix(rnorm(2), 2, 1))
  res <- dp_train(make_model, data, loss_fn = function(out, tgt) ag_mse_loss(out, tgt),
                  n_gpu = 2L, n_iter = 20L, lr = 1e-2, verbose = FALSE)
  expect_length(res$loss_history, 20L)
  expect_true(all(is.finite(res$loss_history)))
  # learning the identity: the loss falls
  expect_lt(mean(tail(res$loss_history, 4)), mean(head(res$loss_history, 4)))
  # forward_fn returning the loss itself
  res2 <- dp_train(make_model, data, forward_fn = function(m, s) ag_mse_loss(m$forward(ag_tensor(s)), s),
                   n_gpu = 2L, n_iter = 3L, verbose = FALSE)
  expect_length(res2$loss_history, 3L)
})

test_that("the same seed gives the same run, and the caller's random state does not depend on the model", {
  data <- dp_problem(n = 8L)
  mk <- function() ag_sequential(ag_linear(3, 16, "relu"), ag_dropout(0.3), ag_linear(16, 2))
  run <- function(seed, make_model = mk) {
    set.seed(seed)
    r <- dp_train(make_model, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, n_iter = 4L, verbose = FALSE)
    list(w = dp_weights(r), after = stats::runif(1))
  }
  a <- run(1L)
  b <- run(1L)
  expect_identical(a$w, b$w)
  expect_false(isTRUE(all.equal(a$w, run(2L)$w)))
  # a model without dropout draws less, yet leaves the caller's stream where the first left it
  expect_identical(run(1L, function() ag_sequential(ag_linear(3, 2)))$after, a$after)
})

test_that("batch-norm running statistics of replica 1 are shared and returned", {
  data <- dp_problem(n = 8L)
  mk <- function() ag_sequential(ag_linear(3, 4), ag_batch_norm(4), ag_linear(4, 2))
  res <- dp_train(mk, data, dp_mse, function(m, s) m$forward(ag_tensor(cbind(s$x, -s$x))),
                  function(s) cbind(s$y, s$y), n_gpu = 2L, n_iter = 3L, verbose = FALSE)
  bn <- res$model$layers[[2L]]
  expect_false(isTRUE(all.equal(as.vector(bn$running_var), rep(1, 4))))
})

test_that("replicas placed on Vulkan agree with replicas on the host (f32 against f64)", {
  skip_if_no_vulkan()
  data <- dp_problem(n = 8L)
  host <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, n_iter = 6L,
                   lr = 0.01, verbose = FALSE)
  old <- options(ggmlR.dp_devices = c("vulkan0", "cpu"))
  on.exit(options(old))
  dev <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, n_iter = 6L,
                  lr = 0.01, verbose = FALSE)
  expect_identical(attr(dev, "dp")$replicas$device, c("vulkan0", "cpu"))
  expect_lt(max(abs(dp_weights(dev) - dp_weights(host))), 1e-5)
  expect_gt(max(abs(dp_weights(dev) - dp_weights(host))), 0)
  # the caller's device is back, and the model still computes
  expect_identical(ag_default_device(), "cpu")
  out <- suppressMessages(dev$model$forward(ag_tensor(data[[1]]$x)))
  expect_equal(dim(out), c(2L, 1L))
})

test_that("a replica that fails ends the run naming it and the step; the session stays usable", {
  data <- dp_problem(n = 8L)
  bad <- function(m, s) {
    if (s$i == 4L) stop("sample four is broken")
    if (s$i == 1L) warning("sample one is odd")
    dp_fwd(m, s)
  }
  expect_warning(
    err <- expect_error(dp_train(dp_fixed_mlp, data, dp_mse, bad, dp_tgt, n_gpu = 2L, n_iter = 5L,
                                 verbose = FALSE), class = "ggmlR_dp_error"),
    "replica 1: sample one is odd")
  expect_match(conditionMessage(err), "replica 2 failed at step 2: sample four is broken", fixed = TRUE)
  expect_identical(deparse(conditionCall(err)[[1L]]), "dp_train")
  expect_identical(ag_default_device(), "cpu")
  res <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, n_iter = 2L, verbose = FALSE)
  expect_length(res$loss_history, 2L)
})

test_that("bad arguments are refused with what to give", {
  data <- dp_problem(n = 4L)
  expect_error(dp_train(1, data), "`make_model` must be a function", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, list()), "non-empty list of samples", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, loss_fn = "mse"), "`loss_fn` must be a function", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, n_gpu = 0), "`n_gpu` must be a positive whole number",
               class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, n_gpu = 5L, verbose = FALSE),
               "4 samples but there are 5 replicas", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, lr = -1), "`lr`", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, max_norm = 0), "`max_norm`", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, verbose = "yes"), "`verbose`", class = "ggmlR_error")
  expect_error(dp_train(dp_fixed_mlp, data, cluster = 2), "`cluster` must be NULL, a cluster",
               class = "ggmlR_dp_error")
  expect_error(dp_train(function() list(forward = identity, parameters = function() list()), data,
                        n_gpu = 1L, verbose = FALSE),
               "replica 1 failed while building its replica: the model's \\$parameters\\(\\) must return",
               class = "ggmlR_dp_error")
  i <- 0L
  grows <- function() {
    i <<- i + 1L
    ag_sequential(ag_linear(3, 2 + i))
  }
  expect_error(dp_train(grows, data, n_gpu = 2L, verbose = FALSE),
               "different model for replica 2 than for replica 1", class = "ggmlR_dp_error")
  old <- options(ggmlR.dp_devices = "gpu0")
  on.exit(options(old))
  expect_error(dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, verbose = FALSE),
               "ggmlR.dp_devices must be a character vector", class = "ggmlR_dp_error")
})

test_that("the progress bar shows the steps and the loss", {
  data <- dp_problem(n = 4L)
  withr_opts <- options(cli.dynamic = FALSE, cli.progress_show_after = 0, cli.progress_handlers = "cli")
  on.exit(options(withr_opts))
  out <- capture.output(
    res <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, n_iter = 3L, verbose = 1L),
    type = "message")
  expect_match(paste(out, collapse = "\n"), "dp_train .*3/3 \\| loss [0-9.]+")
})
