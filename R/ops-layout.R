#' Views: transpose, permute, reshape, view
#'
#' These describe the same memory differently; no data is copied (use
#' [ggml_cont()] for a contiguous copy). `ggml_permute()` moves dimension `i`
#' of `a` to position `axis_i`. `ggml_reshape_*()` need a contiguous `a` with
#' the same number of elements (`ggml_reshape_5d()` gives a tensor of five
#' dimensions; `ggml_permute()` leaves a fifth dimension where it is).
#' `ggml_view_*()` take sizes, byte strides
#' `nb1..nb3` and a byte offset into `a`; the view must lie inside `a`'s data.
#'
#' @param a A `ggml_tensor`.
#' @inheritParams ggml_add
#' @param axis0,axis1,axis2,axis3 New positions of dimensions 0 to 3.
#' @param ne0,ne1,ne2,ne3,ne4 Sizes.
#' @param nb1,nb2,nb3 Byte strides of dimensions 1 to 3.
#' @param offset Byte offset into `a`.
#' @return A `ggml_tensor` sharing `a`'s memory.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), 1:6)
#' t <- ggml_cont(ctx, ggml_transpose(ctx, a))
#' v <- ggml_view_1d(ctx, a, 2, offset = 4)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, t))
#' matrix(ggml_get_f32(t), 2)
#' ggml_get_f32(v)
#' ggml_tensor_shape(ggml_reshape_3d(ctx, a, 1, 3, 2))
#' p <- ggml_permute(ctx, a, 1, 0, 2, 3)         # the same as a transpose
#' ggml_tensor_shape(p)
#' ggml_tensor_shape(ggml_reshape_1d(ctx, a, 6))
#' ggml_tensor_shape(ggml_reshape_2d(ctx, a, 2, 3))
#' ggml_tensor_shape(ggml_reshape_4d(ctx, a, 1, 3, 1, 2))
#' ggml_tensor_shape(ggml_reshape_5d(ctx, a, 3, 1, 1, 1, 2))
#' row_bytes <- 3 * ggml_type_size(GGML_TYPE_F32)
#' ggml_get_f32(ggml_view_2d(ctx, a, 2, 2, row_bytes, offset = 4))
#' ggml_tensor_shape(ggml_view_3d(ctx, a, 3, 1, 2, row_bytes, row_bytes))
#' ggml_tensor_shape(ggml_view_4d(ctx, a, 3, 2, 1, 1, row_bytes, 2 * row_bytes, 2 * row_bytes))
#' ggml_free(ctx)
ggml_transpose <- function(ctx, a) .new_tensor(.rs(rs_transpose(ctx, a)))

#' @rdname ggml_transpose
#' @export
ggml_permute <- function(ctx, a, axis0, axis1, axis2, axis3) {
  .new_tensor(.rs(rs_permute(ctx, a, c(axis0, axis1, axis2, axis3))))
}

#' @rdname ggml_transpose
#' @export
ggml_reshape_1d <- function(ctx, a, ne0) .new_tensor(.rs(rs_reshape(ctx, a, ne0)))

#' @rdname ggml_transpose
#' @export
ggml_reshape_2d <- function(ctx, a, ne0, ne1) .new_tensor(.rs(rs_reshape(ctx, a, c(ne0, ne1))))

#' @rdname ggml_transpose
#' @export
ggml_reshape_3d <- function(ctx, a, ne0, ne1, ne2) {
  .new_tensor(.rs(rs_reshape(ctx, a, c(ne0, ne1, ne2))))
}

#' @rdname ggml_transpose
#' @export
ggml_reshape_4d <- function(ctx, a, ne0, ne1, ne2, ne3) {
  .new_tensor(.rs(rs_reshape(ctx, a, c(ne0, ne1, ne2, ne3))))
}

#' @rdname ggml_transpose
#' @export
ggml_reshape_5d <- function(ctx, a, ne0, ne1, ne2, ne3, ne4) {
  .new_tensor(.rs(rs_reshape(ctx, a, c(ne0, ne1, ne2, ne3, ne4))))
}

#' @rdname ggml_transpose
#' @export
ggml_view_1d <- function(ctx, a, ne0, offset = 0) {
  .new_tensor(.rs(rs_view(ctx, a, ne0, numeric(), offset)))
}

#' @rdname ggml_transpose
#' @export
ggml_view_2d <- function(ctx, a, ne0, ne1, nb1, offset = 0) {
  .new_tensor(.rs(rs_view(ctx, a, c(ne0, ne1), nb1, offset)))
}

#' @rdname ggml_transpose
#' @export
ggml_view_3d <- function(ctx, a, ne0, ne1, ne2, nb1, nb2, offset = 0) {
  .new_tensor(.rs(rs_view(ctx, a, c(ne0, ne1, ne2), c(nb1, nb2), offset)))
}

#' @rdname ggml_transpose
#' @export
ggml_view_4d <- function(ctx, a, ne0, ne1, ne2, ne3, nb1, nb2, nb3, offset = 0) {
  .new_tensor(.rs(rs_view(ctx, a, c(ne0, ne1, ne2, ne3), c(nb1, nb2, nb3), offset)))
}

#' Copies, repetition and concatenation
#'
#' `ggml_cont()`: a contiguous copy (of a transposed or permuted view, say).
#' `ggml_dup()`: a copy. `ggml_cpy(a, b)`: copies `a`'s values into `b`'s
#' memory, converting to `b`'s type (same number of elements); the result is
#' `b`. `ggml_repeat(a, b)`: `a` tiled to `b`'s shape. `ggml_concat(a, b, dim)`:
#' joined along dimension `dim` (0-based).
#'
#' @inheritParams ggml_add
#' @param dim Dimension, 0 to 4 (4: the fifth, which [ggml_new_tensor_5d()] makes).
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), 1:2)
#' b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3)
#' r <- ggml_repeat(ctx, a, b)
#' h <- ggml_cpy(ctx, r, ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 2, 3))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, h))
#' ggml_get_f32(h)
#' d <- ggml_dup(ctx, a)
#' tc <- ggml_cont(ctx, ggml_transpose(ctx, b))
#' ggml_is_contiguous(tc)
#' cc <- ggml_concat(ctx, d, a, 0)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, cc))
#' ggml_get_f32(cc)
#' ggml_free(ctx)
ggml_cont <- function(ctx, a) .op(ctx, "cont", list(a))

#' @rdname ggml_cont
#' @export
ggml_dup <- function(ctx, a) .op(ctx, "dup", list(a))

#' @rdname ggml_cont
#' @export
ggml_cpy <- function(ctx, a, b) .new_tensor(.rs(rs_cpy(ctx, a, b)))

#' @rdname ggml_cont
#' @export
ggml_repeat <- function(ctx, a, b) .op(ctx, "repeat", list(a, b))

#' @rdname ggml_cont
#' @export
ggml_concat <- function(ctx, a, b, dim = 0) .op(ctx, "concat", list(a, b), dim)
