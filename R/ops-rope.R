#' Rotary position embedding
#'
#' RoPE rotates pairs of values of each row of `a` (`[head_dim, heads,
#' tokens, batch]`) by angles `p * freq_base^(-2 k / n_dims)` for token
#' position `p` (from the i32 vector `b`, one per token) and pair `k`. Mode
#' `GGML_ROPE_TYPE_NORM` pairs neighbours `(2k, 2k + 1)`, `GGML_ROPE_TYPE_NEOX`
#' the two halves `(k, k + n_dims / 2)`; values past `n_dims` are copied.
#' `ggml_rope_ext()` adds YaRN context extension (`freq_scale` interpolates
#' the angles, `ext_factor` blends interpolation and extrapolation between
#' the correction dimensions given by `n_ctx_orig`, `beta_fast` and
#' `beta_slow`, and scales the magnitude), `attn_factor` (a magnitude
#' factor) and optional frequency factors `c` (f32, one per pair, dividing
#' the angles). `ggml_rope_multi()` is M-RoPE (mode `GGML_ROPE_TYPE_MROPE`):
#' `b` holds four positions per token (time, height, width, extra: all
#' times, then all heights, ...) and `sections` says how many pairs of each
#' run of pairs use each; `GGML_ROPE_TYPE_VISION` rotates `(k, k + n_dims)`
#' over whole rows (`n_dims` half the row length) with the sections' angles
#' starting again in each section. The `_back` functions apply the inverse
#' rotation: the gradient of the forward op.
#'
#' @param a A floating-point `ggml_tensor`.
#' @param b Positions: an i32 vector with one entry per token (`a`'s third
#'   size), four per token for M-RoPE.
#' @param c Frequency factors (an f32 tensor of at least `n_dims / 2`
#'   values, `n_dims` in the vision mode) or `NULL`.
#' @inheritParams ggml_add
#' @param n_dims Number of values of each row that rotate (even).
#' @param mode One of the `GGML_ROPE_TYPE_*` codes.
#' @param n_ctx_orig,freq_base,freq_scale,ext_factor,attn_factor,beta_fast,beta_slow
#'   RoPE and YaRN parameters, as in ggml.
#' @param sections M-RoPE: pairs per position component, four whole numbers.
#' @return A `ggml_tensor` of `a`'s shape (a view of `a` for the `_inplace`
#'   forms).
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' q <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 1, 2), 1)
#' pos <- ggml_set_i32(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2), 0:1)
#' r <- ggml_rope(ctx, q, pos, 4, GGML_ROPE_TYPE_NORM)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' matrix(ggml_get_f32(r), 4) # token 0 unchanged, token 1 rotated
#'
#' run <- function(r) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#'   matrix(ggml_get_f32(r), 4)
#' }
#' x <- function() ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 1, 2), 1:8)
#' # NeoX pairing and YaRN-style parameters; the back pass undoes the rotation
#' e <- ggml_rope_ext(ctx, x(), pos, NULL, 4, GGML_ROPE_TYPE_NEOX, freq_base = 100)
#' run(ggml_rope_ext_back(ctx, e, pos, NULL, 4, GGML_ROPE_TYPE_NEOX, freq_base = 100))
#' run(ggml_rope_inplace(ctx, x(), pos, 4))
#' run(ggml_rope_ext_inplace(ctx, x(), pos, NULL, 4, freq_scale = 0.5))
#' # M-RoPE: four positions per token (time, height, width, extra)
#' pos4 <- ggml_set_i32(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 8), c(0, 1, 2, 3, 0, 0, 0, 0))
#' m <- ggml_rope_multi(ctx, x(), pos4, NULL, 4, c(1, 1, 0, 0), GGML_ROPE_TYPE_MROPE)
#' run(m)
#' run(ggml_rope_multi_back(ctx, m, pos4, NULL, 4, c(1, 1, 0, 0), GGML_ROPE_TYPE_MROPE))
#' run(ggml_rope_multi_inplace(ctx, x(), pos4, NULL, 2, c(1, 1, 0, 0), GGML_ROPE_TYPE_VISION))
#' ggml_free(ctx)
ggml_rope <- function(ctx, a, b, n_dims, mode = 0L) {
  .rope(ctx, a, b, NULL, n_dims, mode)
}

#' @rdname ggml_rope
#' @export
ggml_rope_inplace <- function(ctx, a, b, n_dims, mode = 0L) {
  .rope(ctx, a, b, NULL, n_dims, mode, inplace = TRUE)
}

#' @rdname ggml_rope
#' @export
ggml_rope_ext <- function(ctx, a, b, c = NULL, n_dims, mode = 0L, n_ctx_orig = 0L,
                          freq_base = 10000.0, freq_scale = 1.0, ext_factor = 0.0,
                          attn_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0) {
  .rope(ctx, a, b, c, n_dims, mode, c(n_ctx_orig, freq_base, freq_scale, ext_factor,
    attn_factor, beta_fast, beta_slow))
}

#' @rdname ggml_rope
#' @export
ggml_rope_ext_inplace <- function(ctx, a, b, c = NULL, n_dims, mode = 0L, n_ctx_orig = 0L,
                                  freq_base = 10000.0, freq_scale = 1.0, ext_factor = 0.0,
                                  attn_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0) {
  .rope(ctx, a, b, c, n_dims, mode, c(n_ctx_orig, freq_base, freq_scale, ext_factor,
    attn_factor, beta_fast, beta_slow), inplace = TRUE)
}

#' @rdname ggml_rope
#' @export
ggml_rope_ext_back <- function(ctx, a, b, c = NULL, n_dims, mode = 0L, n_ctx_orig = 0L,
                               freq_base = 10000.0, freq_scale = 1.0, ext_factor = 0.0,
                               attn_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0) {
  .rope(ctx, a, b, c, n_dims, mode, c(n_ctx_orig, freq_base, freq_scale, ext_factor,
    attn_factor, beta_fast, beta_slow), back = TRUE)
}

#' @rdname ggml_rope
#' @export
ggml_rope_multi <- function(ctx, a, b, c = NULL, n_dims, sections = c(0L, 0L, 0L, 0L),
                            mode = 0L, n_ctx_orig = 0L, freq_base = 10000.0,
                            freq_scale = 1.0, ext_factor = 0.0, attn_factor = 1.0,
                            beta_fast = 32.0, beta_slow = 1.0) {
  .rope(ctx, a, b, c, n_dims, mode, c(n_ctx_orig, freq_base, freq_scale, ext_factor,
    attn_factor, beta_fast, beta_slow), sections)
}

#' @rdname ggml_rope
#' @export
ggml_rope_multi_inplace <- function(ctx, a, b, c = NULL, n_dims, sections = c(0L, 0L, 0L, 0L),
                                    mode = 0L, n_ctx_orig = 0L, freq_base = 10000.0,
                                    freq_scale = 1.0, ext_factor = 0.0, attn_factor = 1.0,
                                    beta_fast = 32.0, beta_slow = 1.0) {
  .rope(ctx, a, b, c, n_dims, mode, c(n_ctx_orig, freq_base, freq_scale, ext_factor,
    attn_factor, beta_fast, beta_slow), sections, inplace = TRUE)
}

#' @rdname ggml_rope
#' @export
ggml_rope_multi_back <- function(ctx, a, b, c = NULL, n_dims, sections = c(0L, 0L, 0L, 0L),
                                 mode = 0L, n_ctx_orig = 0L, freq_base = 10000.0,
                                 freq_scale = 1.0, ext_factor = 0.0, attn_factor = 1.0,
                                 beta_fast = 32.0, beta_slow = 1.0) {
  .rope(ctx, a, b, c, n_dims, mode, c(n_ctx_orig, freq_base, freq_scale, ext_factor,
    attn_factor, beta_fast, beta_slow), sections, back = TRUE)
}

.rope <- function(ctx, a, b, c, n_dims, mode, ext = c(0, 10000, 1, 0, 1, 32, 1),
                  sections = NULL, inplace = FALSE, back = FALSE, call = sys.call(-1L)) {
  if (!is.null(sections) && (!is.numeric(sections) || length(sections) != 4L)) {
    .abort("`sections` must be four whole numbers (pairs per time, height, width and extra position).",
      call = call)
  }
  for (x in list(n_dims, mode)) {
    if (!is.numeric(x) || length(x) != 1L) {
      .abort("`n_dims` and `mode` must be single whole numbers.", call = call)
    }
  }
  srcs <- if (is.null(c)) list(a, b) else list(a, b, c)
  .op(ctx, if (back) "rope_back" else "rope", srcs, c(n_dims, mode, ext, sections),
    call = call, inplace = inplace)
}

#' @rdname ggml_rope
#' @export
GGML_ROPE_TYPE_NORM <- 0L

#' @rdname ggml_rope
#' @export
GGML_ROPE_TYPE_NEOX <- 2L

#' @rdname ggml_rope
#' @export
GGML_ROPE_TYPE_MROPE <- 8L

#' @rdname ggml_rope
#' @export
GGML_ROPE_TYPE_VISION <- 24L
