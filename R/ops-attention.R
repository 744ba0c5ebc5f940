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
#' @param q,k,v Queries, keys and values (floating-point `ggml_tensor`s; for
#'   `ggml_flash_attn_ext()` `k` and `v` may also be quantized, as a quantized
#'   KV cache is: their rows are dequantized as they are read, on the CPU backend).
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
  call <- sys.call()
  if (missing(scale)) {
    .abort("`scale` is missing: give the multiplier of the scores, usually 1 / sqrt(head size).", call = call)
  }
  srcs <- .attn_tensors(list(q = q, k = k, v = v, mask = mask), call)
  for (a in c("scale", "max_bias", "logit_softcap")) .attn_number(get(a), a, call)
  .op(ctx, "flash_attn_ext", srcs, c(scale, max_bias, logit_softcap), call = call)
}

#' @rdname ggml_flash_attn_ext
#' @export
ggml_flash_attn_back <- function(ctx, q, k, v, d, masked = TRUE) {
  call <- sys.call()
  srcs <- .attn_tensors(list(q = q, k = k, v = v, d = d), call)
  if (!is.logical(masked) || length(masked) != 1L || is.na(masked)) {
    .abort(sprintf("`masked` must be TRUE or FALSE, not %s.", .attn_show(masked)), call = call)
  }
  .op(ctx, "flash_attn_back", srcs, masked, call = call)
}

# The tensors of an attention call, each checked under its own argument
# name (NULL entries, an absent mask, dropped).
.attn_tensors <- function(args, call) {
  args <- Filter(Negate(is.null), args)
  for (a in names(args)) {
    if (!inherits(args[[a]], "ggml_tensor")) {
      .abort(sprintf("`%s` must be a ggml_tensor, not %s.", a, .attn_show(args[[a]])), call = call)
    }
  }
  unname(args)
}

.attn_number <- function(x, what, call) {
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x)) {
    .abort(sprintf("`%s` must be one finite number, not %s.", what, .attn_show(x)), call = call)
  }
}

.attn_show <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.atomic(x) && length(x) == 1L) return(format(x))
  sprintf("a %s of length %d", class(x)[1L], length(x))
}
