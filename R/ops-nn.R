#' Softmax and normalisation
#'
#' `ggml_soft_max()`: softmax of each row (along the first dimension).
#' `ggml_soft_max_ext()`: softmax of `a * scale + mask` (the mask, f32 or f16,
#' has `a`'s first size and at least as many rows, and is broadcast over
#' dimensions 3 and 4; with `max_bias > 0` it is multiplied by ALiBi slopes
#' per head, dimension 3). `ggml_norm()`: `(x - mean) / sqrt(var + eps)` of
#' each row; `ggml_rms_norm()`: `x / sqrt(mean(x^2) + eps)`.
#' `ggml_diag_mask_inf()`: entries with column index greater than
#' `n_past + row index` become `-Inf` (a causal mask).
#'
#' @param a A `ggml_tensor`.
#' @inheritParams ggml_add
#' @param mask A `ggml_tensor` or `NULL`.
#' @param scale Multiplier of `a`.
#' @param max_bias ALiBi maximum bias (0: none).
#' @param eps Added to the variance.
#' @param n_past Number of leading columns left unmasked beyond the diagonal.
#' @return A `ggml_tensor` of `a`'s shape.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), 1:6)
#' p <- ggml_soft_max(ctx, a)
#' n <- ggml_norm(ctx, a, 1e-5)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, p))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, n))
#' matrix(ggml_get_f32(p), 3)
#' matrix(ggml_get_f32(n), 3)
#' mask <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), c(0, 0, -Inf, 0, -Inf, -Inf))
#' pe <- ggml_soft_max_ext(ctx, a, mask, scale = 0.5)
#' rn <- ggml_rms_norm(ctx, a)
#' dm <- ggml_diag_mask_inf(ctx, a, 0)
#' for (o in list(pe, rn, dm)) ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, o))
#' matrix(ggml_get_f32(pe), 3)
#' matrix(ggml_get_f32(rn), 3)
#' matrix(ggml_get_f32(dm), 3)
#' ggml_free(ctx)
ggml_soft_max <- function(ctx, a) .op(ctx, "soft_max", list(a), c(1, 0))

#' @rdname ggml_soft_max
#' @export
ggml_soft_max_ext <- function(ctx, a, mask = NULL, scale = 1.0, max_bias = 0.0) {
  srcs <- if (is.null(mask)) list(a) else list(a, mask)
  .op(ctx, "soft_max", srcs, c(scale, max_bias))
}

#' @rdname ggml_soft_max
#' @export
ggml_norm <- function(ctx, a, eps = 1e-5) .op(ctx, "norm", list(a), eps)

#' @rdname ggml_soft_max
#' @export
ggml_rms_norm <- function(ctx, a, eps = 1e-5) .op(ctx, "rms_norm", list(a), eps)

#' @rdname ggml_soft_max
#' @export
ggml_diag_mask_inf <- function(ctx, a, n_past) .op(ctx, "diag_mask_inf", list(a), n_past)

#' Row lookup
#'
#' `ggml_get_rows(a, b)`: the rows (along dimension 2) of `a` picked by the
#' 0-based i32 indices `b`; for `a` `[n, rows]` and `b` `[k]` the result is
#' `[n, k]` (f32, or i32 for an i32 `a`). Indices out of range are an error
#' at compute time.
#'
#' @inheritParams ggml_add
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' emb <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3), 1:6)
#' idx <- ggml_set_i32(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2), c(2, 0))
#' r <- ggml_get_rows(ctx, emb, idx)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' ggml_get_f32(r)
#' ggml_free(ctx)
ggml_get_rows <- function(ctx, a, b) .op(ctx, "get_rows", list(a, b))

#' Convolution, im2col and pooling
#'
#' `ggml_conv_2d(a, b)`: kernel `a` `[KW, KH, C, OC]` over input `b`
#' `[W, H, C, N]`, giving `[OW, OH, OC, N]` with
#' `OW = (W + 2 p0 - d0 (KW - 1) - 1) %/% s0 + 1` (likewise OH). It is built
#' from `ggml_im2col()` and `ggml_mul_mat()` nodes, as in ggml. The CPU
#' backend computes those nodes as one blocked convolution that does not
#' store the unfolded patches (nine values per input value for a 3x3
#' kernel) when no other node reads them; flag the im2col node with
#' [ggml_set_output()] to keep them.
#' `ggml_im2col()` unfolds the input patches: `[C KH KW, OW, OH, N]` (2-D).
#' `ggml_pool_2d()`: max (`GGML_OP_POOL_MAX`) or average (`GGML_OP_POOL_AVG`,
#' dividing by the full window size) over `k0 x k1` windows of each plane.
#'
#' @inheritParams ggml_add
#' @param s0,s1 Strides.
#' @param p0,p1 Paddings.
#' @param d0,d1 Dilations.
#' @param is_2D `FALSE` for 1-D im2col (`b` `[W, C, N]`).
#' @param dst_type Type of the im2col result.
#' @param op Pooling kind.
#' @param k0,k1 Window sizes.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' x <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 5, 1, 1), 1:25)
#' k <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 1, 1), 1)
#' y <- ggml_conv_2d(ctx, k, x, p0 = 1, p1 = 1)
#' m <- ggml_pool_2d(ctx, x, GGML_OP_POOL_MAX, 2, 2)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, y))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, m))
#' matrix(ggml_get_f32(y), 5)
#' matrix(ggml_get_f32(m), 2)
#' cols <- ggml_im2col(ctx, k, x, 1, 1, 1, 1, 1, 1, dst_type = GGML_TYPE_F32)
#' avg <- ggml_pool_2d(ctx, x, GGML_OP_POOL_AVG, 2, 2)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, cols))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, avg))
#' ggml_tensor_shape(cols)
#' matrix(ggml_get_f32(avg), 2)
#' ggml_free(ctx)
ggml_conv_2d <- function(ctx, a, b, s0 = 1L, s1 = 1L, p0 = 0L, p1 = 0L, d0 = 1L, d1 = 1L) {
  p <- c(s0, s1, p0, p1, d0, d1)
  .check_ints(p, "ggml_conv_2d")
  .new_tensor(.rs(rs_conv_2d(ctx, a, b, p)))
}

#' @rdname ggml_conv_2d
#' @export
ggml_im2col <- function(ctx, a, b, s0, s1, p0, p1, d0, d1, is_2D = TRUE, dst_type = GGML_TYPE_F16) {
  p <- c(s0, s1, p0, p1, d0, d1)
  .check_ints(p, "ggml_im2col")
  .new_tensor(.rs(rs_im2col(ctx, a, b, c(p, isTRUE(is_2D)), dst_type)))
}

#' @rdname ggml_conv_2d
#' @export
ggml_pool_2d <- function(ctx, a, op, k0, k1, s0 = k0, s1 = k1, p0 = 0, p1 = 0) {
  .op(ctx, "pool_2d", list(a), c(op, k0, k1, s0, s1, p0, p1))
}

#' @rdname ggml_conv_2d
#' @export
GGML_OP_POOL_MAX <- 0L

#' @rdname ggml_conv_2d
#' @export
GGML_OP_POOL_AVG <- 1L

.check_ints <- function(p, fn, call = sys.call(-1L)) {
  if (!is.numeric(p) || anyNA(p) || any(p != round(p))) {
    .abort(sprintf("the strides, paddings and dilations of %s must be whole numbers.", fn), call = call)
  }
}

#' Padding and upscaling
#'
#' `ggml_pad()` appends `p0..p3` zeros at the end of each dimension.
#' `ggml_upscale()` scales the first two dimensions by `scale_factor`:
#' `GGML_SCALE_MODE_NEAREST` repeats each element, `GGML_SCALE_MODE_BILINEAR`
#' and `GGML_SCALE_MODE_BICUBIC` interpolate at pixel centres (cubic
#' convolution with a = -0.75), clamping at the edges, as ggml.
#'
#' @param a A `ggml_tensor`.
#' @inheritParams ggml_add
#' @param p0,p1,p2,p3 Zeros to append per dimension.
#' @param scale_factor A whole number >= 1.
#' @param mode Interpolation mode.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2), 1:4)
#' p <- ggml_pad(ctx, a, 1, 1)
#' u <- ggml_upscale(ctx, a, 2)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, p))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, u))
#' matrix(ggml_get_f32(p), 3)
#' matrix(ggml_get_f32(u), 4)
#' n <- ggml_upscale(ctx, a, 2, mode = GGML_SCALE_MODE_NEAREST)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, n))
#' identical(ggml_get_f32(n), ggml_get_f32(u))
#' for (m in c(GGML_SCALE_MODE_BILINEAR, GGML_SCALE_MODE_BICUBIC)) {
#'   s <- ggml_upscale(ctx, a, 2, mode = m)
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, s))
#'   print(matrix(ggml_get_f32(s), 4))
#' }
#' ggml_free(ctx)
ggml_pad <- function(ctx, a, p0 = 0L, p1 = 0L, p2 = 0L, p3 = 0L) {
  .op(ctx, "pad", list(a), c(p0, p1, p2, p3))
}

#' @rdname ggml_pad
#' @export
ggml_upscale <- function(ctx, a, scale_factor, mode = 0L) {
  key <- if (is.numeric(mode) && length(mode) == 1L && !is.na(mode)) as.character(mode) else ""
  name <- switch(key, "0" = "upscale", "1" = "upscale_bilinear", "2" = "upscale_bicubic",
    .abort(sprintf("`mode` must be GGML_SCALE_MODE_NEAREST (0), BILINEAR (1) or BICUBIC (2), not %s.",
      if (nzchar(key)) key else .describe_value(mode))))
  .op(ctx, name, list(a), scale_factor)
}

#' @rdname ggml_pad
#' @export
GGML_SCALE_MODE_NEAREST <- 0L

#' @rdname ggml_pad
#' @export
GGML_SCALE_MODE_BILINEAR <- 1L

#' @rdname ggml_pad
#' @export
GGML_SCALE_MODE_BICUBIC <- 2L
