#' Fused attention
#'
#' `ggml_flash_attn_ext()` computes scaled dot-product attention in one node,
#' without storing the score matrix: for queries `q` `[D, N, H, B]` (N
#' queries, H heads), keys `k` `[D, M, Hk, B]` and values `v` `[Dv, M, Hk,
#' B]` (H a multiple of Hk: grouped-query attention) the result is
#' `softmax(scale * q.k + slope * mask) . v`, laid out `[Dv, H, N, B]` (heads
#' before queries, as ggml). With `logit_softcap > 0` the scaled scores are
#' capped to `logit_softcap * tanh(s / logit_softcap)`; with `max_bias > 0`
#' the mask is multiplied by per-head ALiBi slopes. The mask (f32 or f16,
#' `[M, >= N]`, broadcast over heads and batches) is added to the scores;
#' `-Inf` entries drop keys.
#'
#' `ggml_flash_attn_back()` returns the gradients of `q`, `k` and `v` of
#' attention with scale `1 / sqrt(D)` (and, with `masked`, a causal mask:
#' query `i` sees keys up to `i + M - N`), given the gradient `d` of the
#' result (`[Dv, H, N, B]`): one f32 vector holding the gradient of `q`, then
#' of `k`, then of `v`, each in its tensor's layout and starting at a
#' multiple of 4 values (ggml's 16-byte alignment).
#'
#' @param q,k,v Queries, keys and values (floating-point `ggml_tensor`s).
#' @param mask A `ggml_tensor` or `NULL`.
#' @inheritParams ggml_add
#' @param scale Multiplier of the scores, usually `1 / sqrt(D)`.
#' @param max_bias ALiBi maximum bias (0: none).
#' @param logit_softcap Soft cap of the scores (0: none).
#' @param d The gradient of the attention result.
#' @param masked Whether the forward pass used a causal mask.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(4 * 1024 * 1024)
#' q <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 3, 2), rnorm(24))
#' k <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 5, 2), rnorm(40))
#' v <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 5, 2), rnorm(40))
#' o <- ggml_flash_attn_ext(ctx, q, k, v, NULL, 1 / sqrt(4))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, o))
#' ggml_tensor_shape(o) # 4 values, 2 heads, 3 queries
#' # the gradients of q, k and v for a gradient of ones on the result
#' d <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 2, 3), 1)
#' g <- ggml_flash_attn_back(ctx, q, k, v, d, masked = FALSE)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, g))
#' length(ggml_get_f32(g)) # 24 + 40 + 40 values
#' ggml_free(ctx)
ggml_flash_attn_ext <- function(ctx, q, k, v, mask = NULL, scale, max_bias = 0.0,
                                logit_softcap = 0.0) {
  srcs <- if (is.null(mask)) list(q, k, v) else list(q, k, v, mask)
  .op(ctx, "flash_attn_ext", srcs, c(scale, max_bias, logit_softcap))
}

#' @rdname ggml_flash_attn_ext
#' @export
ggml_flash_attn_back <- function(ctx, q, k, v, d, masked = TRUE) {
  .op(ctx, "flash_attn_back", list(q, k, v, d), isTRUE(masked))
}
