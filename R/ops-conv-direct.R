#' More convolutions and 1-D pooling
#'
#' Layouts are ggml's, width fastest. With `O = (I + 2 p - d (K - 1) - 1) %/% s + 1`:
#'
#' - `ggml_conv_1d()`: kernel `a` `[K, Cin, Cout]` over input `b` `[L, Cin,
#'   N]` gives `[OL, Cout, N]` (built from im2col and a product, as
#'   `ggml_conv_2d()`); `ggml_conv_1d_ph()` pads by half the kernel.
#' - `ggml_conv_1d_dw()`: one kernel per channel, `a` `[K, 1, C]`, `b` `[L,
#'   C, N]` gives `[OL, C, N]`; `ggml_conv_1d_dw_ph()` pads by half the kernel.
#' - `ggml_conv_2d_dw()`, `ggml_conv_2d_dw_direct()`: depthwise, `a` `[KW, KH,
#'   1, C]`, `b` `[W, H, C, N]` gives `[OW, OH, C, N]` (both computed by the
#'   direct kernel, in f32: ggml's im2col form rounds through f16).
#' - `ggml_conv_2d_direct()`: `a` `[KW, KH, Cin, Cout]`, `b` `[W, H, Cin, N]`
#'   gives `[OW, OH, Cout, N]`, in one node.
#' - `ggml_conv_transpose_1d()`: `a` `[K, Cout, Cin]`, `b` `[L, Cin, N]` gives
#'   `[(L - 1) s0 - 2 p0 + d0 (K - 1) + 1, Cout, N]`.
#' - `ggml_conv_transpose_2d_p0()`: `a` `[KW, KH, Cout, Cin]`, `b` `[W, H, Cin,
#'   N]` gives `[(W - 1) stride + KW, (H - 1) stride + KH, Cout, N]`.
#' - `ggml_pool_1d()`: max or average over windows of `k0` values of each row
#'   (padded positions are skipped; the average divides by `k0`).
#'
#' @param a The kernel (`ggml_pool_1d()`: the input).
#' @param b The input.
#' @inheritParams ggml_add
#' @param s0,s1,p0,p1,d0,d1 Strides, paddings and dilations.
#' @param s,d Stride and dilation of the `_ph` forms.
#' @param stride Stride of `ggml_conv_transpose_2d_p0()`.
#' @param op `GGML_OP_POOL_MAX` or `GGML_OP_POOL_AVG`.
#' @param k0 Window size.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' x <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 6, 1), 1:6)
#' k <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 1, 1), c(1, 0, -1))
#' y <- ggml_conv_1d(ctx, k, x)
#' p <- ggml_pool_1d(ctx, x, GGML_OP_POOL_MAX, 2)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, y))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, p))
#' ggml_get_f32(y)
#' ggml_get_f32(p)
#' run <- function(r) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#'   ggml_get_f32(r)
#' }
#' run(ggml_conv_1d_ph(ctx, k, x)) # padded: 6 outputs
#' # depthwise: one kernel per channel of a 2-channel input
#' x2 <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 6, 2), 1:12)
#' kd <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 1, 2), c(1, 0, -1, 0, 1, 0))
#' run(ggml_conv_1d_dw(ctx, kd, x2))
#' run(ggml_conv_1d_dw_ph(ctx, kd, x2))
#' run(ggml_conv_transpose_1d(ctx, k, x)) # 8 outputs
#' # 2-D: a 4 x 4 image, 3 x 3 kernels
#' img <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 4, 1, 1), 1:16)
#' k2 <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 1, 1), 1 / 9)
#' matrix(run(ggml_conv_2d_direct(ctx, k2, img)), 2) # 3 x 3 means
#' matrix(run(ggml_conv_2d_dw(ctx, k2, img, p0 = 1, p1 = 1)), 4)
#' matrix(run(ggml_conv_2d_dw_direct(ctx, k2, img)), 2)
#' up <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 1, 1), 1)
#' matrix(run(ggml_conv_transpose_2d_p0(ctx, up, img, 2)), 8) # each pixel to 2 x 2
#' ggml_free(ctx)
ggml_conv_1d <- function(ctx, a, b, s0 = 1L, p0 = 0L, d0 = 1L) {
  .conv_1d(ctx, a, b, c(s0, p0, d0), FALSE)
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_1d_ph <- function(ctx, a, b, s = 1L, d = 1L) {
  .conv_1d(ctx, a, b, c(s, ggml_tensor_shape(a)[1] %/% 2, d), FALSE)
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_1d_dw <- function(ctx, a, b, s0 = 1L, p0 = 0L, d0 = 1L) {
  .conv_1d(ctx, a, b, c(s0, p0, d0), TRUE)
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_1d_dw_ph <- function(ctx, a, b, s0 = 1L, d0 = 1L) {
  .conv_1d(ctx, a, b, c(s0, ggml_tensor_shape(a)[1] %/% 2, d0), TRUE)
}

.conv_1d <- function(ctx, a, b, p, depthwise, call = sys.call(-1L)) {
  .check_ints(p, if (depthwise) "ggml_conv_1d_dw" else "ggml_conv_1d", call = call)
  .new_tensor(.rs(rs_conv_1d(ctx, a, b, as.numeric(p), depthwise), call = call))
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_2d_dw <- function(ctx, a, b, s0 = 1L, s1 = 1L, p0 = 0L, p1 = 0L, d0 = 1L, d1 = 1L) {
  .op(ctx, "conv_2d_dw_direct", list(a, b), c(s0, s1, p0, p1, d0, d1))
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_2d_dw_direct <- function(ctx, a, b, s0 = 1L, s1 = 1L, p0 = 0L, p1 = 0L, d0 = 1L, d1 = 1L) {
  .op(ctx, "conv_2d_dw_direct", list(a, b), c(s0, s1, p0, p1, d0, d1))
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_2d_direct <- function(ctx, a, b, s0 = 1L, s1 = 1L, p0 = 0L, p1 = 0L, d0 = 1L, d1 = 1L) {
  .op(ctx, "conv_2d_direct", list(a, b), c(s0, s1, p0, p1, d0, d1))
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_transpose_1d <- function(ctx, a, b, s0 = 1L, p0 = 0L, d0 = 1L) {
  .op(ctx, "conv_transpose_1d", list(a, b), c(s0, p0, d0))
}

#' @rdname ggml_conv_1d
#' @export
ggml_conv_transpose_2d_p0 <- function(ctx, a, b, stride) {
  .op(ctx, "conv_transpose_2d_p0", list(a, b), stride)
}

#' @rdname ggml_conv_1d
#' @export
ggml_pool_1d <- function(ctx, a, op, k0, s0 = k0, p0 = 0L) {
  .op(ctx, "pool_1d", list(a), c(op, k0, s0, p0))
}
