#' Build and compute graphs
#'
#' `ggml_build_forward_expand()` collects the nodes needed to compute
#' `tensor`, in order. `ggml_graph_compute()` runs them on the CPU, for
#' contexts whose tensors have data (`no_alloc = FALSE`);
#' `ggml_backend_graph_compute()` runs them on a backend, for tensors in
#' backend buffers (see [ggml_backend_alloc_ctx_tensors()]) or contexts.
#'
#' @param ctx A `ggml_context`.
#' @param tensor The result to compute, a `ggml_tensor`.
#' @param graph A `ggml_cgraph`.
#' @param backend A `ggml_backend`.
#' @return `ggml_build_forward_expand()`: a `ggml_cgraph`.
#'   `ggml_graph_compute()`: `NULL`, invisibly; `ggml_backend_graph_compute()`:
#'   `0L` (success), invisibly. `ggml_graph_n_nodes()`: an integer.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#' b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#' ggml_set_f32(a, 1:3)
#' ggml_set_f32(b, 4:6)
#' s <- ggml_add(ctx, a, b)
#' g <- ggml_build_forward_expand(ctx, s)
#' ggml_graph_compute(ctx, g)
#' ggml_get_f32(s)
#' ggml_graph_n_nodes(g)
#' cpu <- ggml_backend_cpu_init()
#' ggml_backend_graph_compute(cpu, g)
#' ggml_get_f32(s)
#' ggml_backend_free(cpu)
#' ggml_free(ctx)
ggml_build_forward_expand <- function(ctx, tensor) {
  g <- .rs(rs_build_forward_expand(ctx, tensor))
  class(g) <- "ggml_cgraph"
  g
}

#' @rdname ggml_build_forward_expand
#' @export
ggml_graph_compute <- function(ctx, graph) invisible(.rs(rs_graph_compute(ctx, graph)))

#' @rdname ggml_build_forward_expand
#' @export
ggml_backend_graph_compute <- function(backend, graph) {
  .check_backend(backend)
  invisible(.rs(rs_backend_graph_compute(backend, graph)))
}

#' @rdname ggml_build_forward_expand
#' @export
ggml_graph_n_nodes <- function(graph) .rs(rs_graph_info(graph))$n_nodes

#' @export
print.ggml_cgraph <- function(x, ...) {
  i <- .rs(rs_graph_info(x))
  cat(sprintf("<ggml_cgraph> %d node(s), %d leaf tensor(s)\n", i$n_nodes, i$n_leafs))
  invisible(x)
}
