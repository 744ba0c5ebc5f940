# Looking into graphs and ops: nodes, names, views, printing, DOT; ggml's
# op codes, names and symbols.

.new_graph <- function(ptr) {
  class(ptr) <- "ggml_cgraph"
  ptr
}

#' Graph nodes, lookups and views
#'
#' `ggml_graph_node()` is node `i` (0-based; negative counts from the end,
#' -1 is the last). `ggml_graph_get_tensor()` finds a node or leaf by name
#' (`NULL` when there is none). `ggml_graph_view()` is a graph of nodes `i0`
#' to `i1 - 1`, whose leaves are the tensors those nodes read from outside
#' the range; computing it computes only those nodes.
#'
#' @param graph A `ggml_cgraph`.
#' @param i Node index.
#' @param name A tensor name.
#' @param i0,i1 First node and one past the last (0-based).
#' @return A `ggml_tensor` (or `NULL`); `ggml_graph_view()`: a `ggml_cgraph`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), "a")
#' y <- ggml_sqrt(ctx, ggml_mul(ctx, ggml_add(ctx, a, a), a))
#' g <- ggml_build_forward_expand(ctx, y)
#' ggml_graph_node(g, -1)
#' ggml_graph_get_tensor(g, "a")
#' ggml_graph_n_nodes(ggml_graph_view(g, 0, 2))
#' ggml_free(ctx)
ggml_graph_node <- function(graph, i) .new_tensor(.rs(rs_graph_node(graph, .index_arg(i, "i"))))

#' @rdname ggml_graph_node
#' @export
ggml_graph_get_tensor <- function(graph, name) {
  t <- .rs(rs_graph_get_tensor(graph, name))
  if (is.null(t)) NULL else .new_tensor(t)
}

#' @rdname ggml_graph_node
#' @export
ggml_graph_view <- function(graph, i0, i1) {
  .new_graph(.rs(rs_graph_view(graph, .index_arg(i0, "i0"), .index_arg(i1, "i1"))))
}

#' Print or export a graph
#'
#' `ggml_graph_print()` prints every node (sizes, op, name; `x` marks
#' parameters) and leaf. `ggml_graph_dump_dot()` writes the graph in
#' Graphviz's DOT language (parameters yellow, outputs green, leaves pink,
#' an edge from each source), for `dot -Tpng`.
#'
#' @param graph A `ggml_cgraph`.
#' @param leafs Unused (ggml passes the forward graph of a backward graph
#'   here); must be `NULL` or a `ggml_cgraph`.
#' @param filename The file to write.
#' @return `ggml_graph_print()`: the text, invisibly.
#'   `ggml_graph_dump_dot()`: the file name, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' g <- ggml_build_forward_expand(ctx, ggml_relu(ctx, a))
#' ggml_graph_print(g)
#' f <- ggml_graph_dump_dot(g, NULL, tempfile(fileext = ".dot"))
#' readLines(f)[1:3]
#' ggml_free(ctx)
ggml_graph_print <- function(graph) {
  s <- .rs(rs_graph_text(graph, "print"))
  cat(s)
  invisible(s)
}

#' @rdname ggml_graph_print
#' @export
ggml_graph_dump_dot <- function(graph, leafs = NULL, filename) {
  if (!is.null(leafs) && !inherits(leafs, "ggml_cgraph")) .abort("`leafs` must be NULL or a ggml_cgraph.")
  if (!is.character(filename) || length(filename) != 1L || is.na(filename)) {
    .abort("`filename` must be a single file name.")
  }
  s <- .rs(rs_graph_text(graph, "dot"))
  res <- tryCatch(writeLines(s, filename, sep = ""), error = function(e) e, warning = function(w) w)
  if (inherits(res, "condition")) {
    .abort(sprintf("could not write '%s': %s", filename, conditionMessage(res)))
  }
  invisible(filename)
}

#' Reset a graph's gradients
#'
#' ggml zeroes the gradients of a backward graph here. Graphs of
#' `ggml_build_forward_expand()` carry no gradients (backward passes are the
#' autograd API's, see [backward()]), so this is an error that says so, as
#' upstream's is for forward-only graphs.
#'
#' @param graph A `ggml_cgraph`.
#' @return Does not return.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' g <- ggml_build_forward_expand(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2))
#' try(ggml_graph_reset(g))
#' ggml_free(ctx)
ggml_graph_reset <- function(graph) {
  if (!inherits(graph, "ggml_cgraph")) .abort("`graph` must be a ggml_cgraph.")
  .abort("this graph has no gradients to reset: forward graphs carry none; compute gradients with the autograd API (with_grad_tape(), backward()).")
}

#' Compute a graph with a number of threads
#'
#' As [ggml_graph_compute()], with `n_threads` CPU threads (0: the default
#' of [ggml_set_n_threads()]).
#'
#' @param ctx A `ggml_context`.
#' @param graph A `ggml_cgraph`.
#' @param n_threads Threads, 0 for the default.
#' @return `NULL`, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), c(-1, 0, 1))
#' y <- ggml_relu(ctx, a)
#' ggml_graph_compute_with_ctx(ctx, ggml_build_forward_expand(ctx, y), 2)
#' ggml_get_f32(y)
#' ggml_free(ctx)
ggml_graph_compute_with_ctx <- function(ctx, graph, n_threads = 0L) {
  if (!inherits(ctx, "ggml_context")) .abort("`ctx` must be a ggml_context.")
  invisible(.rs(rs_graph_compute_threads(graph, n_threads)))
}

#' Op names, symbols and descriptions
#'
#' ggml's numeric op codes: `ggml_op_name()` and `ggml_op_symbol()` name an
#' op code, `ggml_op_can_inplace()` says whether ggml's allocator may compute
#' it in its source's memory. For a tensor, `ggml_op_desc()` is its op's name
#' (the unary op's for unary ops), `ggml_get_unary_op()` its unary op code
#' (`NA` for other ops), and `ggml_unary_op_name()` names a unary op code.
#'
#' @param op An op code (0 = NONE, 2 = ADD, 29 = MUL_MAT, ...); for
#'   `ggml_unary_op_name()` a unary op code.
#' @param tensor A `ggml_tensor`.
#' @return A string, a logical or an integer.
#' @export
#' @examples
#' ggml_op_name(2)
#' ggml_op_symbol(29)
#' ggml_op_can_inplace(2)
#' ctx <- ggml_init(1024 * 1024)
#' r <- ggml_relu(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2))
#' ggml_op_desc(r)
#' ggml_unary_op_name(ggml_get_unary_op(r))
#' ggml_free(ctx)
ggml_op_name <- function(op) .rs(rs_op_info(op))$name

#' @rdname ggml_op_name
#' @export
ggml_op_symbol <- function(op) .rs(rs_op_info(op))$symbol

#' @rdname ggml_op_name
#' @export
ggml_op_can_inplace <- function(op) .rs(rs_op_info(op))$can_inplace

#' @rdname ggml_op_name
#' @export
ggml_op_desc <- function(tensor) .rs(rs_tensor_layout(tensor))$op_desc

#' @rdname ggml_op_name
#' @export
ggml_get_unary_op <- function(tensor) {
  u <- .rs(rs_tensor_layout(tensor))$unary_code
  if (is.null(u)) NA_integer_ else u
}

#' @rdname ggml_op_name
#' @export
ggml_unary_op_name <- function(op) .rs(rs_unary_op_name(op))
