#' Element-wise functions
#'
#' `neg`, `abs`, `sqr`, `sqrt`, `exp`, `log`, `sin`, `cos`, `relu`, `gelu`
#' (tanh approximation, as ggml), `silu` (`x * sigmoid(x)`), `sigmoid`,
#' `tanh`, `elu` (`exp(x) - 1` below 0), `step` (1 above 0, else 0),
#' `hardswish` (`x * min(max(x + 3, 0), 6) / 6`), `hardsigmoid`
#' (`min(max((x + 3) / 6, 0), 1)`), `sgn` (-1, 0 or 1), `ceil`, `floor`,
#' `round` (halves away from zero, as C's `round()`: 2.5 gives 3), `softplus`
#' (`log(1 + exp(x))`, computed without overflow), `gelu_erf` (the exact
#' GELU, `0.5 x (1 + erf(x / sqrt(2)))`), `gelu_quick` (`x * sigmoid(1.702 x)`),
#' `leaky_relu` (`negative_slope * x` below 0) and `clamp` (to
#' `[min_val, max_val]`; `min` and `max` are accepted as names too).
#'
#' @param a A `ggml_tensor`.
#' @inheritParams ggml_add
#' @param negative_slope Slope below 0.
#' @param inplace Compute into `a`'s memory (the result is a view of `a`).
#' @param min_val,max_val Bounds.
#' @param min,max The bounds by their older names.
#' @return A `ggml_tensor` of the same shape and type.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5), c(-2, -1, 0, 1, 2))
#' r <- ggml_leaky_relu(ctx, ggml_tanh(ctx, a), 0.1)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' ggml_get_f32(r)
#' fns <- list(neg = ggml_neg, abs = ggml_abs, sqr = ggml_sqr, exp = ggml_exp, sin = ggml_sin,
#'             cos = ggml_cos, relu = ggml_relu, gelu = ggml_gelu, silu = ggml_silu,
#'             sigmoid = ggml_sigmoid, elu = ggml_elu, step = ggml_step,
#'             hardswish = ggml_hardswish, hardsigmoid = ggml_hardsigmoid,
#'             ceil = ggml_ceil, floor = ggml_floor, round = ggml_round,
#'             sgn = ggml_sgn, softplus = ggml_softplus, gelu_erf = ggml_gelu_erf,
#'             gelu_quick = ggml_gelu_quick)
#' outs <- lapply(fns, function(f) f(ctx, a))
#' outs$sqrt_abs <- ggml_sqrt(ctx, ggml_abs(ctx, a))
#' outs$log_exp <- ggml_log(ctx, ggml_exp(ctx, a))
#' outs$clamp <- ggml_clamp(ctx, a, -1, 1)
#' for (o in outs) ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, o))
#' round(sapply(outs, ggml_get_f32), 3)
#' ggml_free(ctx)
ggml_neg <- function(ctx, a) .op(ctx, "neg", list(a))

#' @rdname ggml_neg
#' @export
ggml_abs <- function(ctx, a) .op(ctx, "abs", list(a))

#' @rdname ggml_neg
#' @export
ggml_sqr <- function(ctx, a) .op(ctx, "sqr", list(a))

#' @rdname ggml_neg
#' @export
ggml_sqrt <- function(ctx, a) .op(ctx, "sqrt", list(a))

#' @rdname ggml_neg
#' @export
ggml_exp <- function(ctx, a) .op(ctx, "exp", list(a))

#' @rdname ggml_neg
#' @export
ggml_log <- function(ctx, a) .op(ctx, "log", list(a))

#' @rdname ggml_neg
#' @export
ggml_sin <- function(ctx, a) .op(ctx, "sin", list(a))

#' @rdname ggml_neg
#' @export
ggml_cos <- function(ctx, a) .op(ctx, "cos", list(a))

#' @rdname ggml_neg
#' @export
ggml_relu <- function(ctx, a) .op(ctx, "relu", list(a))

#' @rdname ggml_neg
#' @export
ggml_gelu <- function(ctx, a) .op(ctx, "gelu", list(a))

#' @rdname ggml_neg
#' @export
ggml_silu <- function(ctx, a) .op(ctx, "silu", list(a))

#' @rdname ggml_neg
#' @export
ggml_sigmoid <- function(ctx, a) .op(ctx, "sigmoid", list(a))

#' @rdname ggml_neg
#' @export
ggml_tanh <- function(ctx, a) .op(ctx, "tanh", list(a))

#' @rdname ggml_neg
#' @export
ggml_elu <- function(ctx, a) .op(ctx, "elu", list(a))

#' @rdname ggml_neg
#' @export
ggml_step <- function(ctx, a) .op(ctx, "step", list(a))

#' @rdname ggml_neg
#' @export
ggml_hardswish <- function(ctx, a) .op(ctx, "hardswish", list(a))

#' @rdname ggml_neg
#' @export
ggml_hardsigmoid <- function(ctx, a) .op(ctx, "hardsigmoid", list(a))

#' @rdname ggml_neg
#' @export
ggml_leaky_relu <- function(ctx, a, negative_slope = 0.01, inplace = FALSE) {
  .op(ctx, "leaky_relu", list(a), negative_slope, inplace = isTRUE(inplace))
}

#' @rdname ggml_neg
#' @export
ggml_clamp <- function(ctx, a, min_val, max_val, min, max) {
  if (missing(min_val)) {
    if (missing(min)) .abort("ggml_clamp needs the lower bound `min_val`.")
    min_val <- min
  }
  if (missing(max_val)) {
    if (missing(max)) .abort("ggml_clamp needs the upper bound `max_val`.")
    max_val <- max
  }
  .op(ctx, "clamp", list(a), c(min_val, max_val))
}

#' @rdname ggml_neg
#' @export
ggml_sgn <- function(ctx, a) .op(ctx, "sgn", list(a))

#' @rdname ggml_neg
#' @export
ggml_ceil <- function(ctx, a) .op(ctx, "ceil", list(a))

#' @rdname ggml_neg
#' @export
ggml_floor <- function(ctx, a) .op(ctx, "floor", list(a))

#' @rdname ggml_neg
#' @export
ggml_round <- function(ctx, a) .op(ctx, "round", list(a))

#' @rdname ggml_neg
#' @export
ggml_softplus <- function(ctx, a) .op(ctx, "softplus", list(a))

#' @rdname ggml_neg
#' @export
ggml_gelu_erf <- function(ctx, a) .op(ctx, "gelu_erf", list(a))

#' @rdname ggml_neg
#' @export
ggml_gelu_quick <- function(ctx, a) .op(ctx, "gelu_quick", list(a))
