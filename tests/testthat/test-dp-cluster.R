# dp_train() on the workers of a parallel cluster and of a future plan,
# against the same run with its replicas in this process. One cluster (and
# one plan) serves several checks: starting workers costs seconds.
# Functions sent to workers do not call the helpers by name: testthat keeps
# the helpers in a copy of the package namespace, which travels as a
# reference to the real namespace (where they are not).

dp_mlp_dropout <- function() ag_sequential(ag_linear(3, 16, "relu"), ag_dropout(0.2), ag_linear(16, 2))

dp_pair <- function(make_model, data, ..., cluster) {
  set.seed(5L)
  here <- dp_train(make_model, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 2L, ..., verbose = FALSE)
  set.seed(5L)
  there <- dp_train(make_model, data, dp_mse, dp_fwd, dp_tgt, ..., verbose = FALSE, cluster = cluster)
  list(here = here, there = there)
}

test_that("two PSOCK workers train as two replicas in one process", {
  cl <- parallel::makePSOCKcluster(2L)
  on.exit(parallel::stopCluster(cl))
  data <- dp_problem(n = 24L)

  # an MLP with random initial weights and dropout: the seed decides both
  p <- dp_pair(dp_mlp_dropout, data, n_iter = 20L, lr = 0.01, cluster = cl)
  expect_lt(max(abs(dp_weights(p$there) - dp_weights(p$here))), 1e-5)
  expect_equal(p$there$loss_history, p$here$loss_history, tolerance = 1e-8)
  info <- attr(p$there, "dp")
  expect_identical(info$replicas$rank, 1:2)
  expect_false(any(info$replicas$pid == Sys.getpid()))
  expect_gt(info$bytes_per_step, 2 * 2 * 8 * length(dp_weights(p$here)))
  # the model comes back built here, with the trained weights
  expect_s3_class(p$there$model, "ag_sequential")
  expect_identical(p$there$params, p$there$model$parameters())
  expect_equal(dim(p$there$model$forward(ag_tensor(data[[1L]]$x))), c(2L, 1L))

  # in f32 on a Vulkan device, on both sides
  if (ggml_vulkan_available()) {
    old <- options(ggmlR.dp_devices = "vulkan0")
    q <- dp_pair(dp_fixed_mlp, data, n_iter = 20L, lr = 0.01, cluster = cl)
    options(old)
    expect_identical(attr(q$there, "dp")$replicas$device, c("vulkan0", "vulkan0"))
    expect_lt(max(abs(dp_weights(q$there) - dp_weights(q$here))), 1e-5)
  }

  # a function made at the top level takes the global variables it uses along
  assign("dp_hidden_units", 5L, envir = globalenv())
  top <- eval(quote(function() ag_sequential(ag_linear(3, dp_hidden_units), ag_linear(dp_hidden_units, 2))),
              globalenv())
  on.exit(rm("dp_hidden_units", envir = globalenv()), add = TRUE)
  r <- dp_train(top, data, dp_mse, dp_fwd, dp_tgt, n_iter = 2L, verbose = FALSE, cluster = cl)
  expect_identical(r$params[[1L]]$shape, c(5L, 3L))

  # one node of the cluster
  r1 <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_gpu = 1L, n_iter = 6L, lr = 0.01,
                 verbose = FALSE, cluster = cl)
  expect_equal(dp_weights(r1), dp_oracle(dp_fixed_mlp, data, 1L, 6L, 0.01)$weights, tolerance = 1e-12)
  expect_error(dp_train(dp_fixed_mlp, data, n_gpu = 3L, cluster = cl), "cluster` has 2 nodes",
               class = "ggmlR_dp_error")

  # what cannot travel is refused before any worker is contacted
  W <- ag_param(matrix(1, 2, 3))
  outside <- function() list(forward = function(x) ag_matmul(W, x), parameters = function() list(W = W))
  expect_error(dp_train(outside, data, dp_mse, dp_fwd, dp_tgt, cluster = cl),
               "cannot send `make_model` to the cluster's workers: it uses `W`, which is an ag_tensor.*create such values inside `make_model`",
               class = "ggmlR_dp_error")
  bad <- data
  bad[[3L]]$x <- ag_tensor(bad[[3L]]$x)
  expect_error(dp_train(dp_fixed_mlp, bad, dp_mse, dp_fwd, dp_tgt, cluster = cl),
               "cannot send `data`.*data\\[\\[3\\]\\]\\$x is an ag_tensor.*give plain matrices",
               class = "ggmlR_dp_error")
  con <- file(tempfile(), "w")
  on.exit(close(con), add = TRUE)
  logger <- function(o, y) { cat("step\n", file = con); dp_mse(o, y) }
  expect_error(dp_train(dp_fixed_mlp, data, logger, dp_fwd, dp_tgt, cluster = cl),
               "cannot send `loss_fn`.*`con`, which is a connection", class = "ggmlR_dp_error")

  # a worker's error names it and the step; its warnings come back; the cluster stays usable
  faulty <- function(m, s) {
    if (s$i == 6L) stop("sample six is broken")
    if (s$i == 1L) warning("sample one is odd")
    m$forward(ag_tensor(s$x))
  }
  expect_warning(
    err <- expect_error(dp_train(dp_fixed_mlp, data, dp_mse, faulty, dp_tgt, n_iter = 5L,
                                 verbose = FALSE, cluster = cl), class = "ggmlR_dp_error"),
    "worker 1 \\(process [0-9]+ on .*\\): sample one is odd")
  expect_match(conditionMessage(err), "worker 2 \\(process [0-9]+ on .*\\) failed at step 3: sample six is broken")
  expect_identical(unlist(parallel::clusterCall(cl, function() 7L)), c(7L, 7L))
  again <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_iter = 2L, verbose = FALSE, cluster = cl)
  expect_length(again$loss_history, 2L)

  # a worker that dies ends the run at once, named
  dies <- function(m, s) {
    if (s$i == 6L) tools::pskill(Sys.getpid(), tools::SIGKILL)
    m$forward(ag_tensor(s$x))
  }
  pid2 <- parallel::clusterCall(cl[2L], Sys.getpid)[[1L]]
  took <- system.time(
    err <- expect_error(dp_train(dp_fixed_mlp, data, dp_mse, dies, dp_tgt, n_iter = 5L,
                                 verbose = FALSE, cluster = cl), class = "ggmlR_dp_error"))
  expect_lt(took[["elapsed"]], 30)
  expect_match(conditionMessage(err), sprintf("worker 2 \\(process %d on .*\\) died or lost its connection at step 3", pid2))
  expect_match(conditionMessage(err), "parallel::stopCluster")
  expect_identical(parallel::clusterCall(cl[1L], function() 8L)[[1L]], 8L)
})

test_that("the workers of a future plan train as replicas in one process", {
  skip_if_not_installed("future")
  data <- dp_problem(n = 24L)
  oplan <- future::plan(future::sequential)
  on.exit(future::plan(oplan))
  expect_error(dp_train(dp_fixed_mlp, data, cluster = "future"), "runs futures in this R process",
               class = "ggmlR_dp_error")
  future::plan(future::multisession, workers = 2L)

  p <- dp_pair(dp_mlp_dropout, data, n_iter = 20L, lr = 0.01, cluster = "future")
  expect_lt(max(abs(dp_weights(p$there) - dp_weights(p$here))), 1e-5)
  expect_equal(p$there$loss_history, p$here$loss_history, tolerance = 1e-8)
  expect_error(dp_train(dp_fixed_mlp, data, n_gpu = 3L, cluster = "future"), "has 2 workers",
               class = "ggmlR_dp_error")

  faulty <- function(m, s) {
    if (s$i == 4L) stop("sample four is broken")
    m$forward(ag_tensor(s$x))
  }
  err <- expect_error(dp_train(dp_fixed_mlp, data, dp_mse, faulty, dp_tgt, n_iter = 5L,
                               verbose = FALSE, cluster = "future"), class = "ggmlR_dp_error")
  expect_match(conditionMessage(err), "worker 2 \\(process [0-9]+ on .*\\) failed at step 2: sample four is broken")
  again <- dp_train(dp_fixed_mlp, data, dp_mse, dp_fwd, dp_tgt, n_iter = 2L, verbose = FALSE, cluster = "future")
  expect_length(again$loss_history, 2L)

  dies <- function(m, s) {
    if (s$i == 4L) tools::pskill(Sys.getpid(), tools::SIGKILL)
    m$forward(ag_tensor(s$x))
  }
  took <- system.time(
    err <- expect_error(dp_train(dp_fixed_mlp, data, dp_mse, dies, dp_tgt, n_iter = 5L,
                                 verbose = FALSE, cluster = "future"), class = "ggmlR_dp_error"))
  expect_lt(took[["elapsed"]], 30)
  expect_match(conditionMessage(err), "worker 2 \\(process [0-9]+ on .*\\) died or lost its connection at step 2")
})
