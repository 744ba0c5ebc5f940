# Backend schedulers: the backends a computation may use, the first one
# preferred. Graphs run on the first backend (ggml's scheduler also splits a
# graph between backends by the ops each supports; here every op runs on both
# CPU and Vulkan, so the first backend takes the whole graph).

#' Backend schedulers
#'
#' `ggml_backend_sched_new()` makes a scheduler over `backends` (the first is
#' preferred; a CPU backend is added last when none is given, as ggml does).
#' `ggml_backend_sched_graph_compute()` allocates the graph's tensors that
#' have no memory yet on the first backend and computes the graph there.
#' Freeing a scheduler does not free its backends.
#'
#' @param backends A list of `ggml_backend` objects.
#' @param parallel,graph_size,op_offload Accepted for compatibility.
#' @param sched A `ggml_backend_sched`.
#' @param i 0-based index of a backend.
#' @param graph A `ggml_cgraph`.
#' @return `ggml_backend_sched_new()`: a `ggml_backend_sched`.
#'   `ggml_backend_sched_get_n_backends()`: an integer.
#'   `ggml_backend_sched_get_backend()`: a `ggml_backend`.
#'   `ggml_backend_sched_graph_compute()`: 0 (success), invisibly.
#'   `ggml_backend_sched_alloc_graph()`: `TRUE`. The others: `NULL`, invisibly.
#' @family backends
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' sched <- ggml_backend_sched_new(list(cpu))
#' ggml_backend_sched_get_n_backends(sched)
#' ggml_backend_sched_get_backend(sched, 0)
#' ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' b <- ggml_add(ctx, a, a)
#' g <- ggml_build_forward_expand(ctx, b)
#' ggml_backend_sched_alloc_graph(sched, g)
#' ggml_backend_tensor_set_data(a, 1:4)
#' ggml_backend_sched_graph_compute(sched, g)
#' ggml_backend_tensor_get_data(b)
#' ggml_backend_sched_reset(sched)
#' ggml_backend_sched_free(sched)
#' ggml_backend_free(cpu)
ggml_backend_sched_new <- function(backends, parallel = FALSE, graph_size = 2048L, op_offload = TRUE) {
  if (inherits(backends, "ggml_backend")) backends <- list(backends)
  if (!is.list(backends) || !length(backends) || !all(vapply(backends, inherits, logical(1L), "ggml_backend"))) {
    .abort("`backends` must be a non-empty list of ggml_backend objects")
  }
  for (b in backends) .rs(rs_backend_name(b))
  if (!any(vapply(backends, function(b) identical(.rs(rs_backend_name(b)), "CPU"), logical(1L)))) {
    backends <- c(backends, list(ggml_backend_cpu_init()))
  }
  env <- new.env(parent = emptyenv())
  env$backends <- backends
  env$freed <- FALSE
  env$buffers <- list()
  class(env) <- "ggml_backend_sched"
  env
}

.check_sched <- function(sched, call = sys.call(-1L)) {
  if (!inherits(sched, "ggml_backend_sched")) {
    .abort(sprintf("`sched` must be a ggml_backend_sched (from ggml_backend_sched_new()), not %s",
                   paste(class(sched), collapse = "/")), call = call)
  }
  if (isTRUE(sched$freed)) .abort("this scheduler was freed (ggml_backend_sched_free())", call = call)
  sched
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_free <- function(sched) {
  if (!inherits(sched, "ggml_backend_sched")) .abort("`sched` must be a ggml_backend_sched")
  for (b in sched$buffers) try(ggml_backend_buffer_free(b), silent = TRUE)
  sched$buffers <- list()
  sched$freed <- TRUE
  invisible(NULL)
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_n_backends <- function(sched) length(.check_sched(sched)$backends)

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_backend <- function(sched, i = 0L) {
  .check_sched(sched)
  n <- length(sched$backends)
  if (!is.numeric(i) || length(i) != 1L || is.na(i) || i < 0 || i >= n) {
    .abort(sprintf("`i` must be a 0-based backend index below %d", n))
  }
  sched$backends[[i + 1L]]
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_reset <- function(sched) {
  .check_sched(sched)
  invisible(NULL)
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_alloc_graph <- function(sched, graph) {
  .check_sched(sched)
  buf <- .rs(rs_graph_alloc(graph, sched$backends[[1L]]))
  if (!is.null(buf)) {
    class(buf) <- "ggml_backend_buffer"
    sched$buffers[[length(sched$buffers) + 1L]] <- buf
  }
  TRUE
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_graph_compute <- function(sched, graph) {
  ggml_backend_sched_alloc_graph(sched, graph)
  ggml_backend_graph_compute(sched$backends[[1L]], graph)
  invisible(0L)
}

#' @export
print.ggml_backend_sched <- function(x, ...) {
  if (isTRUE(x$freed)) {
    cat("<ggml_backend_sched> (freed)\n")
  } else {
    cat(sprintf("<ggml_backend_sched> %s\n",
                paste(vapply(x$backends, function(b) tryCatch(.rs(rs_backend_name(b)), error = function(e) "(freed)"), ""),
                      collapse = ", ")))
  }
  invisible(x)
}
