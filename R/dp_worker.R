# The operations a replica's process runs for dp_train(), whatever carries
# them there: the caller itself (replicas in one process) or a worker's loop
# over a socket back to the caller (R/dp_socket.R).

# Runs operation `op` of run `run` with arguments `args` (for replica
# args$rank). Never fails: an error comes back as a "dp_failure" value, and
# warnings are collected to be raised again in the caller.
.dp_worker_call <- function(args, op, run) {
  warns <- character()
  value <- withCallingHandlers(
    tryCatch(.dp_worker_op(op, run, args), error = function(e) {
      structure(list(message = conditionMessage(e), op = op, t = args$t), class = "dp_failure")
    }),
    warning = function(w) {
      warns <<- c(warns, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  list(value = value, warnings = warns)
}

.dp_worker_op <- function(op, run, a) {
  key <- paste0(run, ":", a$rank)
  if (op == "hello") return(list(host = Sys.info()[["nodename"]], pid = Sys.getpid()))
  if (op == "init") {
    .dp_attach(a$spec$packages)
    rep <- .dp_replica_new(a$spec, a$rank, a$local_rank, a$shard)
    assign(key, rep, envir = .dp_replicas)
    return(.dp_replica_info(rep))
  }
  if (op == "close") {
    if (exists(key, envir = .dp_replicas, inherits = FALSE)) rm(list = key, envir = .dp_replicas)
    return(NULL)
  }
  rep <- get0(key, envir = .dp_replicas, inherits = FALSE)
  if (is.null(rep)) stop("this process holds no replica of the run (it was closed or never started)")
  switch(op,
    get_state = .dp_replica_get_state(rep),
    set_state = .dp_replica_set_state(rep, a$bytes),
    start = .dp_replica_start(rep),
    step = .dp_replica_step(rep, a$t, a$avg),
    stop(sprintf("unknown operation '%s'", op)))
}

# The packages attached in the caller (ggmlR among them) are attached here
# too, for the functions that find their names on the search path.
.dp_attach <- function(packages) {
  for (pkg in packages) {
    if (paste0("package:", pkg) %in% search()) next
    tryCatch(suppressPackageStartupMessages(library(pkg, character.only = TRUE)),
             error = function(e) stop(sprintf("package '%s', attached in the caller, cannot be attached here: %s",
                                              pkg, conditionMessage(e)), call. = FALSE))
  }
}

# Replicas in the caller's process, one after the other.
.dp_local_transport <- function(n, run) {
  tr <- new.env(parent = emptyenv())
  tr$n <- n
  tr$what <- "replica"
  tr$call <- function(op, args, ranks) {
    lapply(seq_along(ranks), function(i) .dp_worker_call(args[[i]], op, run))
  }
  tr$close <- function() {
    for (r in seq_len(n)) .dp_worker_op("close", run, list(rank = r))
    invisible(NULL)
  }
  tr$label <- function(r) sprintf("replica %d", r)
  tr
}

.dp_worker_label <- function(tr, r) {
  w <- tr$info[[r]]
  if (is.null(w)) sprintf("worker %d", r) else sprintf("worker %d (process %d on %s)", r, w$pid, w$host)
}

.dp_when <- function(op, t) {
  if (identical(op, "step") && !is.null(t)) sprintf("at step %d", as.integer(t))
  else switch(op, init = "while building its replica", get_state = , set_state = "while sharing the weights",
              step = "while applying the last update", hello = "when first contacted",
              sprintf("during '%s'", op))
}
