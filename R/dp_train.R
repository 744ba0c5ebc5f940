# Data-parallel training: replicas of one model, each on its shard of the
# data, in step: every step each replica computes the gradients of its
# sample, the gradients are averaged (and clipped), and every replica
# applies the same Adam update, so all stay identical.

#' Data-parallel training
#'
#' Trains one model as several identical replicas, each computing the
#' gradients of its own sample at every step: the gradients are averaged
#' across replicas, clipped to `max_norm`, and every replica applies the same
#' Adam update (learning rate `lr`), so the replicas stay identical and the
#' effective batch is the number of replicas.
#'
#' `make_model()` is called once per replica; the weights (and batch-norm
#' running statistics) of replica 1 are then copied to the others, and each
#' replica starts its own optimizer from the same empty state. The data are
#' dealt to the replicas in turn (replica `r` of `R` holds samples `r`,
#' `r + R`, ...), and at step `t` each replica takes the next sample of its
#' shard, starting again at its first one when its shard is used up: with
#' `length(data)` a multiple of `R`, step `t` uses samples
#' `(t - 1) * R + 1` to `t * R` (modulo `length(data)`).
#'
#' At each step, for replica `r` and its sample `s`:
#' `out <- forward_fn(model, s)` (or `model$forward(s)`, `s` made an
#' [ag_tensor()] when it is not one), then `loss_fn(out, target_fn(s))` (or
#' `loss_fn(out, s)`; without `loss_fn`, `out` is the loss), recorded with
#' [with_grad_tape()] and differentiated with [backward()]. The loss of the
#' step is the mean over the replicas.
#'
#' **In one process** (`cluster = NULL`), the replicas are placed on the
#' host's devices in turn: each Vulkan GPU (device `"gpu"` with that
#' device's backend, weights resident there), or, where there is none, the
#' host (device `"cpu"`). A Vulkan driver that runs on the CPU (lavapipe)
#' does not count as a GPU. `options(ggmlR.dp_devices = c("vulkan0",
#' "vulkan1"))` chooses the devices (`"cpu"` or `"vulkan<k>"`). With
#' `n_gpu = 1` the single replica uses the current device ([ag_device()]).
#'
#' **On a cluster**, each worker holds one replica and its shard of the data;
#' the workers compute at the same time, and only the gradients and the
#' averaged update (one vector of all parameters each) travel at each step.
#' `cluster` is a cluster of the parallel package (such as
#' `parallel::makePSOCKcluster(2)`; one replica per node, or the first
#' `n_gpu` nodes), or `"future"` for the workers of the current
#' [future::plan()] (such as `future::plan(future::multisession, workers =
#' 2)`; one replica per worker, or `n_gpu`). ggmlR must be installed where
#' the workers run; each worker places its replica on a device of its host as
#' above, counting the replicas of that host. Functions made at the top level
#' take the global variables they use with them. Values that live only in
#' this R process (ag_tensors, ggml objects, connections) cannot travel:
#' such data, or functions that use them, are refused before any worker is
#' contacted. The future workers connect back to this process over a socket
#' (`options(ggmlR.dp_master =)` gives the address they use when it is not
#' this host's name; `options(ggmlR.dp_timeout =)`, the seconds they have to
#' connect, 120 by default).
#'
#' The random numbers a replica draws (in `make_model()`, dropout) come from
#' a stream of its own, seeded from the caller's random state; replica 1
#' builds its model from the caller's state itself. So a run gives the same
#' weights in one process and on a cluster for the same seed. The caller's
#' random state advances by one draw.
#'
#' A failure in a replica (an error in `forward_fn`, say) ends the run with
#' an error of class `ggmlR_dp_error` that names the replica or worker, the
#' step and the message; the cluster stays usable. A worker that dies ends
#' the run as soon as its connection closes, naming it; such a cluster has
#' lost a node and must be made again. Warnings raised in replicas are
#' raised again in the caller, prefixed with the replica.
#'
#' @param make_model A function of no arguments that returns a model with
#'   `$forward(x)` and `$parameters()` (a named list of [ag_param()]s), such
#'   as an [ag_sequential()]; each call must create new parameters.
#' @param data A list of samples (at least one per replica).
#' @param loss_fn A function `(out, target)` returning the loss, or `NULL`
#'   when `forward_fn` returns the loss.
#' @param forward_fn A function `(model, sample)` returning the output, or
#'   `NULL` for `model$forward(sample)`.
#' @param target_fn A function `(sample)` returning the target, or `NULL`
#'   for the sample itself.
#' @param n_gpu Number of replicas: by default one per Vulkan device (at
#'   least 1) in one process, one per worker on a cluster.
#' @param n_iter Number of steps.
#' @param lr Learning rate of Adam.
#' @param max_norm Largest global norm of the averaged gradients (`Inf`: no
#'   clipping).
#' @param verbose `FALSE` for silence; `TRUE` or a number of steps: a
#'   progress bar with the loss (refreshed every `verbose` steps).
#' @param cluster `NULL` (replicas in this process), a cluster of the
#'   parallel package, or `"future"`.
#' @return A list with `params` (the parameters of replica 1, a named list of
#'   `ag_tensor`s), `loss_history` (the loss of each step) and `model`
#'   (replica 1's model; on a cluster, built here with `make_model()` and
#'   given the trained weights). Its attribute `"dp"` describes the run: the
#'   replicas (`rank`, `host`, `pid`, `device`), `bytes_per_step` (bytes
#'   sent and received by this process per step, 0 in one process) and
#'   `seconds` (the time of the steps).
#' @export
#' @examples
#' make_model <- function() ag_sequential(ag_linear(2, 8, "relu"), ag_linear(8, 1))
#' set.seed(1)
#' data <- lapply(1:16, function(i) {
#'   x <- matrix(rnorm(2), 2, 1)
#'   list(x = x, y = matrix(sum(x), 1, 1))
#' })
#' fit <- dp_train(make_model, data,
#'                 loss_fn = function(out, y) ag_mse_loss(out, y),
#'                 forward_fn = function(model, s) model$forward(s$x),
#'                 target_fn = function(s) s$y,
#'                 n_gpu = 2, n_iter = 20, lr = 0.01, verbose = FALSE)
#' fit$loss_history
#' \donttest{
#' # the same run on two worker processes
#' cl <- parallel::makePSOCKcluster(2)
#' set.seed(1)
#' fit2 <- dp_train(make_model, data,
#'                  loss_fn = function(out, y) ag_mse_loss(out, y),
#'                  forward_fn = function(model, s) model$forward(s$x),
#'                  target_fn = function(s) s$y,
#'                  n_iter = 20, lr = 0.01, verbose = FALSE, cluster = cl)
#' parallel::stopCluster(cl)
#' }
dp_train <- function(make_model, data, loss_fn = NULL, forward_fn = NULL, target_fn = NULL,
                     n_gpu = NULL, n_iter = 10L, lr = 0.001, max_norm = Inf, verbose = 10L,
                     cluster = NULL) {
  call <- sys.call()
  if (!is.function(make_model)) .abort("`make_model` must be a function of no arguments that returns a model", call = call)
  for (nm in c("loss_fn", "forward_fn", "target_fn")) {
    f <- get(nm)
    if (!is.null(f) && !is.function(f)) {
      .abort(sprintf("`%s` must be a function or NULL, not %s", nm, .describe_value(f)), call = call)
    }
  }
  if (!is.list(data) || is.data.frame(data) || !length(data)) {
    .abort("`data` must be a non-empty list of samples (e.g. lapply() over the columns of a matrix)", call = call)
  }
  if (!is.null(n_gpu)) n_gpu <- .ag_count(n_gpu, "n_gpu", call = call)
  n_iter <- .ag_count(n_iter, "n_iter", call = call)
  lr <- .ag_hyper(lr, "lr", 0, lo_open = TRUE, call = call)
  if (!is.numeric(max_norm) || length(max_norm) != 1L || is.na(max_norm) || max_norm <= 0) {
    .abort("`max_norm` must be a single positive number (Inf: no clipping)", call = call)
  }
  every <- .dp_verbose(verbose, call)
  mode <- .dp_mode(cluster, call)

  # the replicas' random streams, from one draw of the caller's state
  if (is.null(.dp_get_seed())) stats::runif(1L)
  run_seed <- sample.int(.Machine$integer.max - 10000L, 1L)
  caller_seed <- .dp_get_seed()
  run <- sprintf("%d-%d-%s", Sys.getpid(), run_seed, format(Sys.time(), "%H%M%OS3"))

  fns <- list(make_model = make_model, loss_fn = loss_fn, forward_fn = forward_fn, target_fn = target_fn)
  if (mode == "local") {
    n <- n_gpu %||% max(1L, tryCatch(ggml_vulkan_device_count(), error = function(e) 0L))
    devices <- if (n == 1L) "current" else .dp_devices()
    fns <- lapply(fns, function(f) list(fn = f, globals = list()))
  } else {
    for (nm in names(fns)) if (!is.null(fns[[nm]])) .dp_check_portable(fns[[nm]], nm, call)
    .dp_check_portable(data, "data", call)
    n <- if (mode == "future") .dp_future_workers(n_gpu, call) else .dp_cluster_size(cluster, n_gpu, call)
    devices <- if (is.null(getOption("ggmlR.dp_devices"))) NULL else .dp_devices()
    fns <- lapply(fns, .dp_pack_fn)
  }
  if (length(data) < n) {
    .abort(sprintf("`data` has %d sample%s but there are %d replicas; give at least one sample per replica",
                   length(data), if (length(data) == 1L) "" else "s", n), call = call)
  }
  attached <- sub("^package:", "", grep("^package:", search(), value = TRUE))
  spec <- list(fns = fns, devices = devices, lr = lr, build_seed = caller_seed,
               packages = unique(c("ggmlR", rev(setdiff(attached, c("base", .dp_base_packages))))),
               seeds = lapply(seq_len(n), function(r) .dp_seed_state(run_seed + r)))
  shards <- lapply(seq_len(n), function(r) data[seq.int(r, length(data), by = n)])

  on.exit(.dp_put_seed(caller_seed), add = TRUE)
  tr <- switch(mode,
    local = .dp_local_transport(n, run),
    psock = .dp_socket_transport(n, run, .dp_parallel_launcher(cluster), call),
    future = .dp_socket_transport(n, run, .dp_future_launcher(), call))
  on.exit(tr$close(), add = TRUE)
  out <- .dp_drive(tr, spec, shards, n_iter, max_norm, every, call)

  model <- if (mode == "local") {
    .dp_replica_detach(get(paste0(run, ":1"), envir = .dp_replicas))
  } else {
    m <- make_model()
    .dp_install_state(m, .dp_params_of(m), out$state)
    m
  }
  res <- list(params = .dp_params_of(model), loss_history = out$loss, model = model)
  attr(res, "dp") <- list(replicas = out$replicas, bytes_per_step = out$bytes, seconds = out$seconds)
  res
}

.dp_base_packages <- c("stats", "graphics", "grDevices", "utils", "datasets", "methods")

.dp_verbose <- function(verbose, call) {
  if (is.null(verbose) || isFALSE(verbose)) return(0L)
  if (isTRUE(verbose)) return(1L)
  if (is.numeric(verbose) && length(verbose) == 1L && !is.na(verbose) && verbose >= 0) {
    return(as.integer(ceiling(verbose)))
  }
  .abort("`verbose` must be TRUE, FALSE or a number of steps", call = call)
}

.dp_mode <- function(cluster, call) {
  if (is.null(cluster)) return("local")
  if (identical(cluster, "future")) return("future")
  if (inherits(cluster, "cluster")) return("psock")
  .abort(sprintf("`cluster` must be NULL, a cluster of the parallel package or \"future\", not %s",
                 if (is.character(cluster) && length(cluster) == 1L) sprintf("\"%s\"", cluster)
                 else .describe_value(cluster)), class = "ggmlR_dp_error", call = call)
}

.dp_cluster_size <- function(cl, n, call) {
  if (!length(cl)) .abort("`cluster` has no nodes", class = "ggmlR_dp_error", call = call)
  if (is.null(n)) return(length(cl))
  if (n > length(cl)) {
    .abort(sprintf("`n_gpu` is %d but `cluster` has %d nodes; use at most %d", n, length(cl), length(cl)),
           class = "ggmlR_dp_error", call = call)
  }
  n
}

# One operation on replicas `ranks` (arguments `args`, one each): the values,
# after warnings were raised again here and a failure became the error.
.dp_call <- function(tr, op, args, ranks, call) {
  res <- tr$call(op, args, ranks)
  for (i in seq_along(res)) {
    for (w in res[[i]]$warnings) warning(sprintf("%s: %s", tr$label(ranks[i]), w), call. = FALSE)
  }
  for (i in seq_along(res)) {
    v <- res[[i]]$value
    if (inherits(v, "dp_failure")) {
      .abort(sprintf("%s failed %s: %s", tr$label(ranks[i]), .dp_when(v$op, v$t), v$message),
             class = "ggmlR_dp_error", call = call)
    }
  }
  lapply(res, `[[`, "value")
}

# The run: build, share replica 1's weights, start the optimizers, the steps
# (each message applies the previous update and computes the next
# gradients), the last update, the trained weights.
.dp_drive <- function(tr, spec, shards, n_iter, max_norm, every, call) {
  n <- tr$n
  all <- seq_len(n)
  hello <- .dp_call(tr, "hello", lapply(all, function(r) list(rank = r)), all, call)
  tr$info <- hello
  hosts <- vapply(hello, `[[`, character(1L), "host")
  local_rank <- vapply(all, function(r) sum(hosts[seq_len(r)] == hosts[r]), integer(1L))
  info <- .dp_call(tr, "init", lapply(all, function(r) {
    list(rank = r, local_rank = local_rank[r], spec = spec, shard = shards[[r]])
  }), all, call)
  .dp_check_same(info, tr, call)
  if (n > 1L) {
    state <- .dp_call(tr, "get_state", list(list(rank = 1L)), 1L, call)[[1L]]
    .dp_call(tr, "set_state", lapply(all[-1L], function(r) list(rank = r, bytes = state)), all[-1L], call)
  }
  .dp_call(tr, "start", lapply(all, function(r) list(rank = r)), all, call)

  loss <- numeric(n_iter)
  bytes <- 0
  bar <- if (every > 0L) .dp_bar(n_iter) else NULL
  avg <- NULL
  t0 <- proc.time()[["elapsed"]]
  for (t in seq_len(n_iter)) {
    args <- lapply(all, function(r) list(rank = r, t = t, avg = avg))
    res <- .dp_call(tr, "step", args, all, call)
    if (t == 2L && tr$what == "worker") bytes <- .dp_bytes(args, res)
    loss[t] <- mean(vapply(res, `[[`, numeric(1L), "loss"), na.rm = TRUE)
    avg <- .dp_average(res, max_norm)
    if (!is.null(bar) && (t %% every == 0L || t == 1L || t == n_iter)) .dp_bar_update(bar, t, loss[t])
  }
  .dp_call(tr, "step", lapply(all, function(r) list(rank = r, t = NULL, avg = avg)), all, call)
  secs <- proc.time()[["elapsed"]] - t0
  if (!is.null(bar)) cli::cli_progress_done(id = bar$id, .envir = bar)
  if (n_iter == 1L && tr$what == "worker") bytes <- NA_real_
  final <- if (tr$what == "worker") .dp_call(tr, "get_state", list(list(rank = 1L)), 1L, call)[[1L]]
  replicas <- data.frame(rank = all, host = hosts,
                         pid = vapply(hello, function(h) as.integer(h$pid), integer(1L)),
                         device = vapply(info, `[[`, character(1L), "device"),
                         stringsAsFactors = FALSE)
  list(loss = loss, state = final, replicas = replicas, bytes = bytes, seconds = secs)
}

# Every replica must have replica 1's parameters (names and shapes).
.dp_check_same <- function(info, tr, call) {
  for (r in seq_along(info)[-1L]) {
    if (!identical(info[[r]]$names, info[[1L]]$names) || !identical(info[[r]]$shapes, info[[1L]]$shapes)) {
      .abort(sprintf("make_model() built a different model for %s than for %s (parameters %s against %s)",
                     tr$label(r), tr$label(1L), paste(info[[r]]$names, collapse = ", "),
                     paste(info[[1L]]$names, collapse = ", ")), class = "ggmlR_dp_error", call = call)
    }
  }
  for (r in seq_along(info)) {
    if (!is.null(info[[r]]$note)) message(sprintf("dp_train(): %s: %s; it runs on the host", tr$label(r), info[[r]]$note))
  }
}

# The mean of the replicas' gradients (summed in rank order), clipped to
# `max_norm`; a parameter has a gradient when some replica gave one.
.dp_average <- function(res, max_norm) {
  g <- res[[1L]]$grad
  has <- res[[1L]]$has
  for (r in seq_along(res)[-1L]) {
    g <- g + res[[r]]$grad
    has <- has | res[[r]]$has
  }
  g <- g / length(res)
  if (is.finite(max_norm)) {
    norm <- sqrt(sum(g * g))
    if (norm > max_norm) g <- g * (max_norm / (norm + 1e-6))
  }
  list(grad = g, has = has)
}

# Bytes of one step's messages, both ways, for all workers.
.dp_bytes <- function(args, res) {
  sum(vapply(args, function(a) length(serialize(list(op = "step", args = a), NULL)), numeric(1L))) +
    sum(vapply(res, function(v) length(serialize(list(value = v, warnings = character()), NULL)), numeric(1L)))
}

.dp_bar <- function(n_iter) {
  bar <- new.env()
  bar$step <- 0L
  bar$loss <- NA_real_
  bar$id <- cli::cli_progress_bar(
    "dp_train", total = n_iter,
    format = "dp_train {cli::pb_bar} {step}/{cli::pb_total} | loss {sprintf('%.5g', loss)} | {cli::pb_eta}",
    .envir = bar)
  bar
}

.dp_bar_update <- function(bar, t, loss) {
  bar$step <- t
  bar$loss <- loss
  cli::cli_progress_update(set = t, id = bar$id, .envir = bar)
}
