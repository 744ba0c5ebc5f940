# Workers of a cluster. Each worker runs one long call for the whole run: a
# loop that connects back to the caller over a socket of its own and carries
# out the operations the caller sends (R/dp_worker.R). The cluster engine
# only starts the loops (a future each, or one call on each node of a
# parallel cluster) and collects their ends. A worker that fails or dies
# closes its socket, or ends its call; the caller notices either while it
# waits, polling, so it never waits blind.

.dp_timeout <- function() {
  t <- getOption("ggmlR.dp_timeout", 120)
  if (!is.numeric(t) || length(t) != 1L || is.na(t) || t <= 0) 120 else t
}

# Bytes no other process can guess, to recognise the run's workers.
.dp_token <- function() {
  b <- if (file.exists("/dev/urandom")) {
    con <- file("/dev/urandom", "rb", raw = TRUE)
    on.exit(close(con))
    readBin(con, "raw", 16L)
  } else {
    charToRaw(sprintf("%s%d%s", format(Sys.time(), "%OS6"), Sys.getpid(), tempfile()))
  }
  paste(format(b), collapse = "")
}

# A listening socket on a free port (tried in turn from one that depends on
# the process and the time, leaving the caller's random stream alone).
.dp_listen <- function(call) {
  base <- 20000L + (Sys.getpid() * 37L + as.integer(Sys.time()) %% 997L) %% 30000L
  for (i in 0:49) {
    port <- base + i * 101L
    srv <- tryCatch(serverSocket(port), error = function(e) NULL)
    if (!is.null(srv)) return(list(srv = srv, port = port))
  }
  .abort("found no free port to listen on for the workers", class = "ggmlR_dp_error", call = call)
}

# One message, written at once (small writes of a serialisation in pieces
# meet TCP's delayed acknowledgements).
.dp_send <- function(x, con) writeBin(serialize(x, NULL), con)

# The worker's loop.
.dp_socket_loop <- function(master, caller_host, port, token, rank, timeout) {
  here <- Sys.info()[["nodename"]]
  host <- master %||% if (identical(here, caller_host)) "localhost" else caller_host
  con <- socketConnection(host, port, blocking = TRUE, open = "a+b", timeout = timeout)
  run <- NULL
  on.exit({
    close(con)
    # the replica goes with the loop, however the loop ends
    if (!is.null(run)) .dp_worker_op("close", run, list(rank = rank))
  })
  .dp_send(list(token = token, rank = rank, host = here, pid = Sys.getpid()), con)
  repeat {
    msg <- unserialize(con)
    if (identical(msg$op, "bye")) break
    run <- msg$run
    .dp_send(.dp_worker_call(msg$args, msg$op, msg$run), con)
  }
  invisible(TRUE)
}

# Starts the loops with `launcher` (launch(r, fun, args); ended(r): NULL
# while worker r's call runs, else what ended it; finish(): collects the
# calls) and connects to them.
.dp_socket_transport <- function(n, run, launcher, call) {
  lst <- .dp_listen(call)
  token <- .dp_token()
  tr <- new.env(parent = emptyenv())
  tr$n <- n
  tr$what <- "worker"
  tr$broken <- FALSE
  tr$srv <- lst$srv
  tr$cons <- vector("list", n)
  tr$info <- vector("list", n)
  tr$launcher <- launcher
  tr$label <- function(r) .dp_worker_label(tr, r)
  tr$close <- function() .dp_socket_close(tr, bye = !tr$broken)
  args <- list(master = getOption("ggmlR.dp_master"), caller_host = Sys.info()[["nodename"]],
               port = lst$port, token = token, timeout = .dp_timeout())
  for (r in seq_len(n)) {
    ok <- tryCatch({
      launcher$launch(r, .dp_socket_loop, c(args, rank = r))
      TRUE
    }, error = function(e) conditionMessage(e))
    if (!isTRUE(ok)) .dp_socket_lost(tr, r, "hello", NULL, ok, call)
  }
  deadline <- Sys.time() + .dp_timeout()
  while (any(waiting <- vapply(tr$cons, is.null, logical(1L)))) {
    if (isTRUE(socketSelect(list(tr$srv), timeout = 0.25))) {
      con <- socketAccept(tr$srv, blocking = TRUE, open = "a+b", timeout = .dp_timeout())
      hi <- tryCatch(unserialize(con), error = function(e) NULL)
      if (!is.list(hi) || !identical(hi$token, token) || !is.numeric(hi$rank) || length(hi$rank) != 1L ||
          !hi$rank %in% seq_len(n) || !is.null(tr$cons[[hi$rank]])) {
        close(con)
        next
      }
      tr$cons[[hi$rank]] <- con
      tr$info[[hi$rank]] <- list(host = hi$host, pid = hi$pid)
      next
    }
    for (r in which(waiting)) .dp_socket_check(tr, r, "hello", NULL, call)
    if (Sys.time() > deadline) {
      tr$broken <- TRUE
      .dp_socket_close(tr)
      .abort(sprintf(paste("%d of %d workers did not connect back within %g s (options(ggmlR.dp_timeout =));",
                           "are they busy, or unable to reach this host (options(ggmlR.dp_master = <address>))?"),
                     sum(waiting), n, .dp_timeout()), class = "ggmlR_dp_error", call = call)
    }
  }
  tr$call <- function(op, args, ranks) {
    for (i in seq_along(ranks)) {
      ok <- tryCatch({
        .dp_send(list(op = op, run = run, args = args[[i]]), tr$cons[[ranks[i]]])
        TRUE
      }, error = function(e) conditionMessage(e))
      if (!isTRUE(ok)) .dp_socket_lost(tr, ranks[i], op, args[[i]]$t, ok, call)
    }
    out <- vector("list", length(ranks))
    pending <- seq_along(ranks)
    while (length(pending)) {
      ready <- socketSelect(tr$cons[ranks[pending]], timeout = 1)
      for (i in pending[ready]) {
        v <- tryCatch(unserialize(tr$cons[[ranks[i]]]), error = function(e) e)
        if (inherits(v, "error")) {
          why <- tr$launcher$ended(ranks[i]) %||% conditionMessage(v)
          .dp_socket_lost(tr, ranks[i], op, args[[i]]$t, why, call)
        }
        out[[i]] <- v
      }
      pending <- pending[!ready]
      if (!any(ready)) for (i in pending) .dp_socket_check(tr, ranks[i], op, args[[i]]$t, call)
    }
    out
  }
  tr
}

# Worker `r`'s call ended before it answered: it failed or died.
.dp_socket_check <- function(tr, r, op, t, call) {
  why <- tr$launcher$ended(r)
  if (!is.null(why)) .dp_socket_lost(tr, r, op, t, why, call)
  invisible(NULL)
}

.dp_socket_lost <- function(tr, r, op, t, msg, call) {
  tr$broken <- TRUE
  .dp_socket_close(tr)
  .abort(sprintf("%s died or lost its connection %s (%s). %s", tr$label(r), .dp_when(op, t),
                 sub("\\s+$", "", msg), tr$launcher$hint), class = "ggmlR_dp_error", call = call)
}

# Ends the loops (`bye`; otherwise closing their sockets ends them), closes
# the sockets and collects the calls.
.dp_socket_close <- function(tr, bye = FALSE) {
  for (con in tr$cons) {
    if (is.null(con)) next
    if (bye) tryCatch(.dp_send(list(op = "bye"), con), error = function(e) NULL)
    tryCatch(close(con), error = function(e) NULL)
  }
  tr$cons <- vector("list", tr$n)
  if (!is.null(tr$srv)) tryCatch(close(tr$srv), error = function(e) NULL)
  tr$srv <- NULL
  tr$launcher$finish()
  invisible(NULL)
}

# Launchers.

.dp_future_launcher <- function() {
  l <- new.env(parent = emptyenv())
  l$futures <- list()
  l$hint <- "If its process died, set the future plan again (future::plan()) for new workers."
  l$launch <- function(r, fun, args) {
    l$futures[[r]] <- future::future(as.call(c(list(quote(loop)), sapply(names(args), as.name))),
                                     substitute = FALSE, globals = c(list(loop = fun), args),
                                     packages = "ggmlR", seed = FALSE,
                                     label = sprintf("dp_train worker %d", r))
  }
  l$ended <- function(r) {
    f <- l$futures[[r]]
    done <- tryCatch(future::resolved(f), error = function(e) e)
    if (isFALSE(done)) return(NULL)
    if (inherits(done, "error")) return(conditionMessage(done))
    v <- tryCatch(future::value(f), error = function(e) e)
    if (inherits(v, "error")) conditionMessage(v) else "its future ended"
  }
  l$finish <- function() {
    for (f in l$futures) tryCatch(future::value(f), error = function(e) NULL)
    l$futures <- list()
  }
  l
}

# The nodes of a parallel cluster. A loop is one call on its node, sent
# without waiting (parallel's own sendCall(), not exported), whose end is
# read back when the node answers (recvResult()), so the cluster is left in
# step for its next use.
.dp_parallel_launcher <- function(cl) {
  l <- new.env(parent = emptyenv())
  send <- utils::getFromNamespace("sendCall", "parallel")
  recv <- utils::getFromNamespace("recvResult", "parallel")
  l$running <- logical(length(cl))
  l$hint <- "If its process died, the cluster has lost that node: stop it (parallel::stopCluster()) and make a new one."
  l$launch <- function(r, fun, args) {
    send(cl[[r]], fun, args)
    l$running[r] <- TRUE
  }
  l$ended <- function(r) {
    con <- cl[[r]]$con
    if (!l$running[r] || !inherits(con, "connection") || !isTRUE(socketSelect(list(con), timeout = 0))) {
      return(NULL)
    }
    l$running[r] <- FALSE
    v <- tryCatch(recv(cl[[r]]), error = function(e) e)
    if (inherits(v, "error")) sprintf("its R process ended: %s", conditionMessage(v))
    else if (inherits(v, "try-error")) sub("^Error in [^:]*: ", "", as.character(v))
    else "its call ended"
  }
  l$finish <- function() {
    for (r in which(l$running)) tryCatch(recv(cl[[r]]), error = function(e) NULL)
    l$running[] <- FALSE
  }
  l
}

.dp_future_workers <- function(n, call) {
  if (!requireNamespace("future", quietly = TRUE)) {
    .abort("`cluster = \"future\"` needs the future package; install it (Debian: r-cran-future)",
           class = "ggmlR_dp_error", call = call)
  }
  if (inherits(future::plan(), c("sequential", "uniprocess"))) {
    .abort(paste("the current future plan runs futures in this R process, so there are no workers;",
                 "set one with workers, e.g. future::plan(future::multisession, workers = 2)"),
           class = "ggmlR_dp_error", call = call)
  }
  w <- future::nbrOfWorkers()
  if (is.null(n)) {
    if (!is.finite(w)) {
      .abort("the current future plan has no fixed number of workers; give `n_gpu`, the number of replicas",
             class = "ggmlR_dp_error", call = call)
    }
    return(as.integer(w))
  }
  if (n > w) {
    .abort(sprintf("`n_gpu` is %d but the current future plan has %d workers; use at most %d", n, w, w),
           class = "ggmlR_dp_error", call = call)
  }
  n
}
