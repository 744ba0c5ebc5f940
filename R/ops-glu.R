#' Gated linear units
#'
#' A GLU multiplies an activation of values `x` by gates `g`: `act(x) * g`.
#' `ggml_glu()` and the named forms (`ggml_reglu()`, `ggml_geglu()`,
#' `ggml_swiglu()`, `ggml_geglu_erf()`, `ggml_geglu_quick()`) split each row
#' of `a` in two halves, values first (gates first with `swapped = TRUE`), so
#' the result's rows are half as long. The `_split` forms take values `a` and
#' gates `b` of one shape. The activations are ReLU, GELU (tanh
#' approximation), SiLU, the exact GELU and the quick GELU
#' ([ggml_gelu_quick()]); `ggml_swiglu_oai()` is gpt-oss's clamped SwiGLU,
#' `x * sigmoid(alpha x) * (g + 1)` with `x` limited above by `limit` and
#' `g` to `[-limit, limit]`.
#'
#' @param a Values (or, without `b`, values and gates), a floating-point
#'   `ggml_tensor`.
#' @param b Gates of `a`'s shape (`NULL`: the halves of `a`).
#' @inheritParams ggml_add
#' @param op One of the `GGML_GLU_OP_*` codes.
#' @param swapped Take the gates from the first half of each row.
#' @param alpha,limit The slope of the sigmoid and the clamp of
#'   `ggml_swiglu_oai()`.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), c(-2, 3, 1, 2))
#' r <- ggml_reglu(ctx, a)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' ggml_get_f32(r) # relu(c(-2, 3)) * c(1, 2)
#'
#' # The generic form with each op code, beside the named forms.
#' run <- function(r) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#'   ggml_get_f32(r)
#' }
#' codes <- c(reglu = GGML_GLU_OP_REGLU, geglu = GGML_GLU_OP_GEGLU,
#'            swiglu = GGML_GLU_OP_SWIGLU, swiglu_oai = GGML_GLU_OP_SWIGLU_OAI,
#'            geglu_erf = GGML_GLU_OP_GEGLU_ERF,
#'            geglu_quick = GGML_GLU_OP_GEGLU_QUICK)
#' sapply(codes, function(op) run(ggml_glu(ctx, a, op)))
#' named <- list(ggml_geglu, ggml_swiglu, ggml_geglu_erf, ggml_geglu_quick,
#'               ggml_swiglu_oai)
#' sapply(named, function(f) run(f(ctx, a)))
#' # values and gates as two tensors
#' x <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), c(-2, 3))
#' g <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), c(1, 2))
#' run(ggml_glu_split(ctx, x, g, GGML_GLU_OP_SWIGLU))
#' split <- list(ggml_reglu_split, ggml_geglu_split, ggml_swiglu_split,
#'               ggml_geglu_erf_split, ggml_geglu_quick_split)
#' sapply(split, function(f) run(f(ctx, x, g)))
#' ggml_free(ctx)
ggml_glu <- function(ctx, a, op, swapped = FALSE) {
  .glu(ctx, op, list(a), swapped)
}

#' @rdname ggml_glu
#' @export
ggml_glu_split <- function(ctx, a, b, op) .glu(ctx, op, list(a, b))

#' @rdname ggml_glu
#' @export
ggml_reglu <- function(ctx, a) .glu(ctx, GGML_GLU_OP_REGLU, list(a))

#' @rdname ggml_glu
#' @export
ggml_geglu <- function(ctx, a) .glu(ctx, GGML_GLU_OP_GEGLU, list(a))

#' @rdname ggml_glu
#' @export
ggml_swiglu <- function(ctx, a) .glu(ctx, GGML_GLU_OP_SWIGLU, list(a))

#' @rdname ggml_glu
#' @export
ggml_geglu_erf <- function(ctx, a) .glu(ctx, GGML_GLU_OP_GEGLU_ERF, list(a))

#' @rdname ggml_glu
#' @export
ggml_geglu_quick <- function(ctx, a) .glu(ctx, GGML_GLU_OP_GEGLU_QUICK, list(a))

#' @rdname ggml_glu
#' @export
ggml_reglu_split <- function(ctx, a, b) .glu(ctx, GGML_GLU_OP_REGLU, list(a, b))

#' @rdname ggml_glu
#' @export
ggml_geglu_split <- function(ctx, a, b) .glu(ctx, GGML_GLU_OP_GEGLU, list(a, b))

#' @rdname ggml_glu
#' @export
ggml_swiglu_split <- function(ctx, a, b) .glu(ctx, GGML_GLU_OP_SWIGLU, list(a, b))

#' @rdname ggml_glu
#' @export
ggml_geglu_erf_split <- function(ctx, a, b) .glu(ctx, GGML_GLU_OP_GEGLU_ERF, list(a, b))

#' @rdname ggml_glu
#' @export
ggml_geglu_quick_split <- function(ctx, a, b) .glu(ctx, GGML_GLU_OP_GEGLU_QUICK, list(a, b))

#' @rdname ggml_glu
#' @export
ggml_swiglu_oai <- function(ctx, a, b = NULL, alpha = 1.702, limit = 7.0) {
  srcs <- if (is.null(b)) list(a) else list(a, b)
  .glu(ctx, GGML_GLU_OP_SWIGLU_OAI, srcs, FALSE, alpha, limit)
}

.glu <- function(ctx, op, srcs, swapped = FALSE, alpha = 1.702, limit = 7.0, call = sys.call(-1L)) {
  if (!is.numeric(op) || length(op) != 1L || is.na(op)) {
    .abort("`op` must be one of the GGML_GLU_OP_* codes.", call = call)
  }
  .op(ctx, "glu", srcs, c(op, isTRUE(swapped), alpha, limit), call = call)
}

#' @rdname ggml_glu
#' @export
GGML_GLU_OP_REGLU <- 0L

#' @rdname ggml_glu
#' @export
GGML_GLU_OP_GEGLU <- 1L

#' @rdname ggml_glu
#' @export
GGML_GLU_OP_SWIGLU <- 2L

#' @rdname ggml_glu
#' @export
GGML_GLU_OP_SWIGLU_OAI <- 3L

#' @rdname ggml_glu
#' @export
GGML_GLU_OP_GEGLU_ERF <- 4L

#' @rdname ggml_glu
#' @export
GGML_GLU_OP_GEGLU_QUICK <- 5L
