# The graph allocator: one buffer for a graph's tensors, reused between
# tensors whose lifetimes do not overlap.

#' Graph allocator
#'
#' `ggml_gallocr_alloc_graph()` gives every tensor of a graph that has no
#' memory yet (built in a context with `no_alloc = TRUE`) a place in ONE
#' buffer. A tensor's bytes are reused as soon as the last node reading it
#' has run, so tensors whose lifetimes do not overlap share memory, and an
#' element-wise node may compute in the memory of its first source when that
#' source dies there. Leaves (inputs and weights: set them after allocating),
#' tensors flagged with [ggml_set_input()] or [ggml_set_output()], and
#' results nothing else reads keep their memory for the whole graph; read
#' intermediate results only when they are flagged as outputs.
#'
#' `ggml_gallocr_reserve()` sizes the buffer for a graph without giving
#' tensors memory. Allocating the same graph again keeps the memory (and the
#' values set in it); allocating another graph takes a new buffer and leaves
#' the previous one to the tensors that use it. `ggml_gallocr_free()` frees
#' the buffer: its tensors have no memory any more.
#' `ggml_gallocr_get_buffer_size()` is the buffer's size, the peak of the
#' plan; `ggml_gallocr_stats()` compares it with the memory every tensor
#' would take on its own (`naive`).
#'
#' @param backend The backend whose memory is used (`NULL`: the CPU).
#' @param galloc A `ggml_gallocr`.
#' @param graph A `ggml_cgraph`.
#' @param buffer_id Buffer index: 0 (one buffer per allocator).
#' @return `ggml_gallocr_new()`: a `ggml_gallocr`.
#'   `ggml_gallocr_reserve()`, `ggml_gallocr_alloc_graph()`: `TRUE`.
#'   `ggml_gallocr_get_buffer_size()`: bytes. `ggml_gallocr_stats()`: a list
#'   with `buffer_size`, `peak`, `naive` (bytes), `n_tensors` (tensors
#'   placed), `reused` (placed in memory another tensor had freed) and
#'   `in_place` (nodes computed in their source's memory).
#'   `ggml_gallocr_free()`: `NULL`, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(16 * ggml_tensor_overhead(), no_alloc = TRUE)
#' x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 8)
#' w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 64)
#' h <- ggml_relu(ctx, ggml_mul_mat(ctx, w, x))
#' y <- ggml_soft_max(ctx, ggml_mul_mat(ctx, w, h))
#' g <- ggml_build_forward_expand(ctx, y)
#' ga <- ggml_gallocr_new()
#' ggml_gallocr_reserve(ga, g)
#' ggml_gallocr_get_buffer_size(ga)
#' ggml_gallocr_alloc_graph(ga, g)
#' ggml_backend_tensor_set_data(x, rnorm(64 * 8))
#' ggml_backend_tensor_set_data(w, rnorm(64 * 64, sd = 0.1))
#' ggml_graph_compute(ctx, g)
#' str(ggml_gallocr_stats(ga))
#' ggml_gallocr_free(ga)
#' ggml_free(ctx)
ggml_gallocr_new <- function(backend = NULL) {
  if (!is.null(backend)) .check_backend(backend)
  a <- .rs(rs_gallocr_new(backend))
  class(a) <- "ggml_gallocr"
  a
}

.check_gallocr <- function(galloc, call = sys.call(-1L)) {
  .check_handle(galloc, "ggml_gallocr", "galloc", "ggml_gallocr_new()", call)
}

#' @rdname ggml_gallocr_new
#' @export
ggml_gallocr_free <- function(galloc) {
  .check_gallocr(galloc)
  invisible(.rs(rs_gallocr_free(galloc)))
}

#' @rdname ggml_gallocr_new
#' @export
ggml_gallocr_reserve <- function(galloc, graph) {
  .check_gallocr(galloc)
  .rs(rs_gallocr_graph(galloc, graph, "reserve"))
  TRUE
}

#' @rdname ggml_gallocr_new
#' @export
ggml_gallocr_alloc_graph <- function(galloc, graph) {
  .check_gallocr(galloc)
  .rs(rs_gallocr_graph(galloc, graph, "alloc"))
  TRUE
}

#' @rdname ggml_gallocr_new
#' @export
ggml_gallocr_get_buffer_size <- function(galloc, buffer_id = 0L) {
  .check_gallocr(galloc)
  .index_arg(buffer_id, "buffer_id")
  if (buffer_id != 0) {
    .abort(sprintf("`buffer_id` must be 0: a graph allocator has one buffer, not %s.", format(buffer_id)))
  }
  .rs(rs_gallocr_stats(galloc))$buffer_size
}

#' @rdname ggml_gallocr_new
#' @export
ggml_gallocr_stats <- function(galloc) {
  .check_gallocr(galloc)
  .rs(rs_gallocr_stats(galloc))
}

#' @export
print.ggml_gallocr <- function(x, ...) {
  s <- .rs(rs_gallocr_stats(x))
  cat(sprintf("<ggml_gallocr> buffer %s", .fmt_bytes(s$buffer_size)))
  if (!is.null(s$naive)) cat(sprintf(" (last graph: peak %s, %s without reuse)", .fmt_bytes(s$peak), .fmt_bytes(s$naive)))
  cat("\n")
  invisible(x)
}
