# The scheduler: one graph split between several backends.

#' Backend scheduler
#'
#' A scheduler computes one graph on several backends. Backends are given by
#' priority; a CPU backend is added last when there is none. Every node runs
#' on the first backend that supports it (its op, element types and sizes),
#' so an op a Vulkan device lacks runs on the CPU; tensors that already have
#' memory stay where it is, and the backend using that memory computes them;
#' a leaf without memory goes where its first consumer runs;
#' `ggml_backend_sched_set_tensor_backend()` pins a tensor to a backend.
#' Consecutive nodes on one backend form a split. A node that reads a tensor
#' living on another backend reads a copy made just before its split; the
#' copies are counted by `ggml_backend_sched_get_n_copies()` and in the
#' ledger (`copy_bytes`, `copy_calls` of [ag_memory_stats()]).
#'
#' `ggml_backend_sched_alloc_graph()` places the graph and gives every
#' tensor without memory its place, each backend's tensors in one buffer
#' whose memory is reused between tensors whose lifetimes do not overlap
#' (see [ggml_gallocr_new()]; leaves, inputs and outputs keep theirs);
#' `ggml_backend_sched_reserve()` only sizes those buffers.
#' `ggml_backend_sched_graph_compute()` allocates first when needed, then
#' runs the splits in order. `ggml_backend_sched_reset()` frees the
#' scheduler's buffers: their tensors lose their memory until the next
#' allocation. `ggml_backend_sched_free()` does the same and makes the
#' scheduler unusable (its backends stay usable). Work finishes before a call returns, so the `_async` form and
#' `ggml_backend_sched_synchronize()` need no waiting.
#'
#' @param backends A list of `ggml_backend`s, highest priority first.
#' @param parallel Kept for compatibility: splits run one after the other.
#' @param graph_size Kept for compatibility: graphs have no fixed capacity.
#' @param op_offload Kept for compatibility: nodes go to the first backend
#'   that supports them whether or not their weights are in host memory.
#' @param sched A `ggml_backend_sched`.
#' @param graph A `ggml_cgraph`.
#' @param index Backend index, 0-based.
#' @param tensor A `ggml_tensor`.
#' @param backend One of the scheduler's backends.
#' @return `ggml_backend_sched_new()`: a `ggml_backend_sched`.
#'   `ggml_backend_sched_reserve()`, `ggml_backend_sched_alloc_graph()`:
#'   `TRUE`. `ggml_backend_sched_graph_compute()` (and `_async`): `0L`.
#'   `ggml_backend_sched_get_n_backends()`, `_get_n_splits()`,
#'   `_get_n_copies()`: integers. `ggml_backend_sched_get_backend()`,
#'   `_get_tensor_backend()`: a `ggml_backend` or `NULL`. The others: `NULL`,
#'   invisibly.
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' sched <- ggml_backend_sched_new(list(cpu))
#' ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' y <- ggml_relu(ctx, ggml_scale(ctx, a, -2))
#' g <- ggml_build_forward_expand(ctx, y)
#' ggml_backend_sched_get_n_backends(sched)
#' ggml_backend_sched_get_backend(sched, 0)
#' ggml_backend_sched_reserve(sched, g)
#' ggml_backend_sched_alloc_graph(sched, g)
#' ggml_backend_tensor_set_data(a, c(-1, 0, 1, 2))
#' ggml_backend_sched_graph_compute(sched, g)
#' ggml_backend_tensor_get_data(y)
#' ggml_backend_sched_get_n_splits(sched)
#' ggml_backend_sched_get_n_copies(sched)
#' ggml_backend_sched_get_tensor_backend(sched, y)
#' # pin a node to a backend, from the next allocation on
#' ggml_backend_sched_reset(sched)
#' ggml_backend_sched_set_tensor_backend(sched, y, cpu)
#' ggml_backend_sched_alloc_graph(sched, g)
#' ggml_backend_tensor_set_data(a, c(-1, 0, 1, 2))
#' ggml_backend_sched_graph_compute_async(sched, g)
#' ggml_backend_sched_synchronize(sched)
#' ggml_backend_tensor_get_data(y)
#' ggml_backend_sched_free(sched)
#' ggml_free(ctx)
#' ggml_backend_free(cpu)
ggml_backend_sched_new <- function(backends, parallel = TRUE, graph_size = 2048, op_offload = TRUE) {
  if (inherits(backends, "ggml_backend")) backends <- list(backends)
  if (!is.list(backends) || length(backends) == 0L) {
    .abort("`backends` must be a non-empty list of ggml_backend objects.")
  }
  for (i in seq_along(backends)) {
    if (!inherits(backends[[i]], "ggml_backend")) {
      .abort(sprintf("`backends[[%d]]` must be a ggml_backend, not %s.", i, .describe_value(backends[[i]])))
    }
  }
  s <- .rs(rs_sched_new(backends, parallel, graph_size))
  class(s) <- "ggml_backend_sched"
  s
}

.check_sched <- function(sched, call = sys.call(-1L)) {
  .check_handle(sched, "ggml_backend_sched", "sched", "ggml_backend_sched_new()", call)
}

# Whether `sched` was freed with ggml_backend_sched_free().
.sched_freed <- function(sched) isTRUE(.rs(rs_sched_stats(sched))$freed)

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_free <- function(sched) {
  .check_sched(sched)
  invisible(.rs(rs_sched_free(sched)))
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_reserve <- function(sched, graph) {
  .check_sched(sched)
  .rs(rs_sched_graph(sched, graph, "reserve"))
  TRUE
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_alloc_graph <- function(sched, graph) {
  .check_sched(sched)
  .rs(rs_sched_graph(sched, graph, "alloc"))
  TRUE
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_graph_compute <- function(sched, graph) {
  .check_sched(sched)
  .rs(rs_sched_graph(sched, graph, "compute"))
  0L
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_graph_compute_async <- function(sched, graph) ggml_backend_sched_graph_compute(sched, graph)

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_synchronize <- function(sched) {
  .check_sched(sched)
  invisible(NULL)
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_reset <- function(sched) {
  .check_sched(sched)
  invisible(.rs(rs_sched_reset(sched)))
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_n_backends <- function(sched) {
  .check_sched(sched)
  .rs(rs_sched_n_backends(sched))
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_backend <- function(sched, index = 0L) {
  .check_sched(sched)
  b <- .rs(rs_sched_backend(sched, .index_arg(index)))
  if (is.null(b)) NULL else .new_backend(b)
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_n_splits <- function(sched) {
  .check_sched(sched)
  .rs(rs_sched_stats(sched))$n_splits
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_n_copies <- function(sched) {
  .check_sched(sched)
  .rs(rs_sched_stats(sched))$n_copies
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_set_tensor_backend <- function(sched, tensor, backend) {
  .check_sched(sched)
  .check_backend(backend)
  invisible(.rs(rs_sched_set_tensor_backend(sched, tensor, backend)))
}

#' @rdname ggml_backend_sched_new
#' @export
ggml_backend_sched_get_tensor_backend <- function(sched, tensor) {
  .check_sched(sched)
  b <- .rs(rs_sched_tensor_backend(sched, tensor))
  if (is.null(b)) NULL else .new_backend(b)
}

#' @export
print.ggml_backend_sched <- function(x, ...) {
  if (.sched_freed(x)) {
    cat("<ggml_backend_sched> (freed)\n")
    return(invisible(x))
  }
  n <- .rs(rs_sched_n_backends(x))
  names <- vapply(seq_len(n) - 1L, function(i) .rs(rs_backend_name(.rs(rs_sched_backend(x, i)))), "")
  st <- .rs(rs_sched_stats(x))
  cat(sprintf("<ggml_backend_sched> %s; last graph: %d split(s), %d cop%s between backends\n",
              paste(names, collapse = ", "), st$n_splits, st$n_copies, if (st$n_copies == 1L) "y" else "ies"))
  invisible(x)
}
