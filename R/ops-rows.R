#' More norms, gradients, sorting and counting
#'
#' `ggml_l2_norm()`: each row divided by `max(sqrt(sum(x^2)), eps)`.
#' `ggml_group_norm()`: `(x - mean) / sqrt(var + eps)` over groups of
#' `ceiling(ne2 / n_groups)` planes (dimension 3, the channels of an image)
#' of each batch. `ggml_rms_norm_back(a, b)`, `ggml_soft_max_ext_back(a, b)`
#' and `ggml_silu_back(a, b)` are the gradients of [ggml_rms_norm()],
#' [ggml_soft_max_ext()] (the mask has none) and [ggml_silu()]: `a` is the
#' gradient of the result and `b` the forward input (for the softmax: its
#' result), as in ggml. `ggml_argsort()`: the 0-based indices that sort each
#' row (stable; an i32 tensor). `ggml_top_k()`: the indices of the `k` largest
#' values of each row, largest first. `ggml_count_equal()`: the number of
#' equal elements of `a` and `b`, an i32 tensor of one element (ggml: i64).
#'
#' @param a,b `ggml_tensor`s.
#' @inheritParams ggml_add
#' @param eps Added for stability.
#' @param n_groups Number of groups.
#' @param scale,max_bias The forward op's parameters.
#' @param order `GGML_SORT_ORDER_ASC` or `GGML_SORT_ORDER_DESC`.
#' @param k Number of indices per row.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5), c(3, 1, 4, 1, 5))
#' i <- ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC)
#' n <- ggml_l2_norm(ctx, a)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, i))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, n))
#' ggml_get_i32(i)
#' sum(ggml_get_f32(n)^2)
#' run <- function(r) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#'   if (ggml_tensor_type(r) == GGML_TYPE_I32) ggml_get_i32(r) else ggml_get_f32(r)
#' }
#' run(ggml_argsort(ctx, a, GGML_SORT_ORDER_ASC))
#' run(ggml_top_k(ctx, a, 2)) # the positions of 5 and 4
#' run(ggml_count_equal(ctx, a, ggml_sqr(ctx, a))) # only 1 == 1^2, twice
#' # two channels of 2 values in one group, then in two groups
#' x <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 1, 2), c(1, 2, 3, 5))
#' run(ggml_group_norm(ctx, x, 1))
#' run(ggml_group_norm(ctx, x, 2))
#' # gradients, given the gradient g of each result
#' g <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5), c(1, 0, 0, 0, 0))
#' run(ggml_rms_norm_back(ctx, g, a))
#' run(ggml_silu_back(ctx, g, a))
#' run(ggml_soft_max_ext_back(ctx, g, ggml_soft_max(ctx, a)))
#' ggml_free(ctx)
ggml_l2_norm <- function(ctx, a, eps = 1e-5) .op(ctx, "l2_norm", list(a), eps)

#' @rdname ggml_l2_norm
#' @export
ggml_group_norm <- function(ctx, a, n_groups, eps = 1e-5) {
  .op(ctx, "group_norm", list(a), c(n_groups, eps))
}

#' @rdname ggml_l2_norm
#' @export
ggml_rms_norm_back <- function(ctx, a, b, eps = 1e-5) {
  .op(ctx, "rms_norm_back", list(a, b), eps)
}

#' @rdname ggml_l2_norm
#' @export
ggml_soft_max_ext_back <- function(ctx, a, b, scale = 1.0, max_bias = 0.0) {
  .op(ctx, "soft_max_ext_back", list(a, b), c(scale, max_bias))
}

#' @rdname ggml_l2_norm
#' @export
ggml_silu_back <- function(ctx, a, b) .op(ctx, "silu_back", list(a, b))

#' @rdname ggml_l2_norm
#' @export
ggml_argsort <- function(ctx, a, order = GGML_SORT_ORDER_ASC) {
  .op(ctx, "argsort", list(a), order)
}

#' @rdname ggml_l2_norm
#' @export
ggml_top_k <- function(ctx, a, k) .op(ctx, "top_k", list(a), k)

#' @rdname ggml_l2_norm
#' @export
ggml_count_equal <- function(ctx, a, b) .op(ctx, "count_equal", list(a, b))

#' @rdname ggml_l2_norm
#' @export
GGML_SORT_ORDER_ASC <- 0L

#' @rdname ggml_l2_norm
#' @export
GGML_SORT_ORDER_DESC <- 1L
