#' In-place ops
#'
#' Each `ggml_<op>_inplace()` computes `ggml_<op>()` into the memory of its
#' first argument and returns a view of it, saving the result's memory (as
#' ggml). Computing the graph overwrites `a`: other nodes that read `a` see
#' the new values once the in-place node has run. The result must have
#' `a`'s type and shape.
#'
#' @param a The tensor computed in place.
#' @param b The second operand of a binary op.
#' @inheritParams ggml_add
#' @param s A number.
#' @param eps,n_groups,n_past,mask,scale,max_bias As the op without `_inplace`.
#' @return A view of `a` (a `ggml_tensor`).
#' @seealso [ggml_rope_inplace()], [ggml_set_inplace()] and the other
#'   `_inplace` functions documented beside their ops.
#' @export
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), c(-1, 2, -3, 4))
#' r <- ggml_abs_inplace(ctx, a)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' ggml_get_f32(a) # a itself now holds the result
#'
#' # Each in-place op, on a fresh 2 x 3 input, gives what its plain form gives.
#' x <- function() ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2),
#'                              c(0.5, 1.5, 2.5, 3, 4, 5))
#' run <- function(r) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#'   ggml_get_f32(r)
#' }
#' unary <- list(
#'   ggml_neg_inplace, ggml_sqr_inplace, ggml_sqrt_inplace, ggml_exp_inplace,
#'   ggml_log_inplace, ggml_sin_inplace, ggml_cos_inplace, ggml_sgn_inplace,
#'   ggml_step_inplace, ggml_ceil_inplace, ggml_floor_inplace,
#'   ggml_round_inplace, ggml_relu_inplace, ggml_gelu_inplace,
#'   ggml_gelu_quick_inplace, ggml_gelu_erf_inplace, ggml_silu_inplace,
#'   ggml_sigmoid_inplace, ggml_tanh_inplace, ggml_softplus_inplace,
#'   ggml_elu_inplace, ggml_hardswish_inplace, ggml_hardsigmoid_inplace,
#'   ggml_dup_inplace, ggml_norm_inplace, ggml_rms_norm_inplace,
#'   ggml_l2_norm_inplace, ggml_soft_max_inplace, ggml_soft_max_ext_inplace
#' )
#' sapply(unary, function(f) run(f(ctx, x())))
#' binary <- list(ggml_add_inplace, ggml_sub_inplace, ggml_mul_inplace,
#'                ggml_div_inplace)
#' sapply(binary, function(f) run(f(ctx, x(), x())))
#' one <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1), 10)
#' run(ggml_add1_inplace(ctx, x(), one))
#' run(ggml_scale_inplace(ctx, x(), 2))
#' run(ggml_group_norm_inplace(ctx, x(), n_groups = 1))
#' run(ggml_diag_mask_inf_inplace(ctx, x(), n_past = 0))
#' # the backward pass of soft_max: gradient a, soft_max output b
#' run(ggml_soft_max_ext_back_inplace(ctx, x(), ggml_soft_max(ctx, x())))
#' ggml_free(ctx)
ggml_abs_inplace <- function(ctx, a) .op(ctx, "abs", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_neg_inplace <- function(ctx, a) .op(ctx, "neg", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_sqr_inplace <- function(ctx, a) .op(ctx, "sqr", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_sqrt_inplace <- function(ctx, a) .op(ctx, "sqrt", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_exp_inplace <- function(ctx, a) .op(ctx, "exp", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_log_inplace <- function(ctx, a) .op(ctx, "log", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_sin_inplace <- function(ctx, a) .op(ctx, "sin", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_cos_inplace <- function(ctx, a) .op(ctx, "cos", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_sgn_inplace <- function(ctx, a) .op(ctx, "sgn", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_step_inplace <- function(ctx, a) .op(ctx, "step", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_ceil_inplace <- function(ctx, a) .op(ctx, "ceil", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_floor_inplace <- function(ctx, a) .op(ctx, "floor", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_round_inplace <- function(ctx, a) .op(ctx, "round", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_relu_inplace <- function(ctx, a) .op(ctx, "relu", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_gelu_inplace <- function(ctx, a) .op(ctx, "gelu", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_gelu_quick_inplace <- function(ctx, a) .op(ctx, "gelu_quick", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_gelu_erf_inplace <- function(ctx, a) .op(ctx, "gelu_erf", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_silu_inplace <- function(ctx, a) .op(ctx, "silu", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_sigmoid_inplace <- function(ctx, a) .op(ctx, "sigmoid", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_tanh_inplace <- function(ctx, a) .op(ctx, "tanh", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_softplus_inplace <- function(ctx, a) .op(ctx, "softplus", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_elu_inplace <- function(ctx, a) .op(ctx, "elu", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_hardswish_inplace <- function(ctx, a) .op(ctx, "hardswish", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_hardsigmoid_inplace <- function(ctx, a) .op(ctx, "hardsigmoid", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_add_inplace <- function(ctx, a, b) .op(ctx, "add", list(a, b), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_sub_inplace <- function(ctx, a, b) .op(ctx, "sub", list(a, b), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_mul_inplace <- function(ctx, a, b) .op(ctx, "mul", list(a, b), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_div_inplace <- function(ctx, a, b) .op(ctx, "div", list(a, b), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_add1_inplace <- function(ctx, a, b) .op(ctx, "add1", list(a, b), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_scale_inplace <- function(ctx, a, s) .op(ctx, "scale", list(a), s, inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_dup_inplace <- function(ctx, a) .op(ctx, "dup", list(a), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_norm_inplace <- function(ctx, a, eps = 1e-5) .op(ctx, "norm", list(a), eps, inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_rms_norm_inplace <- function(ctx, a, eps = 1e-5) .op(ctx, "rms_norm", list(a), eps, inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_l2_norm_inplace <- function(ctx, a, eps = 1e-5) .op(ctx, "l2_norm", list(a), eps, inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_group_norm_inplace <- function(ctx, a, n_groups, eps = 1e-5) {
  .op(ctx, "group_norm", list(a), c(n_groups, eps), inplace = TRUE)
}

#' @rdname ggml_abs_inplace
#' @export
ggml_soft_max_inplace <- function(ctx, a) .op(ctx, "soft_max", list(a), c(1, 0), inplace = TRUE)

#' @rdname ggml_abs_inplace
#' @export
ggml_soft_max_ext_inplace <- function(ctx, a, mask = NULL, scale = 1.0, max_bias = 0.0) {
  srcs <- if (is.null(mask)) list(a) else list(a, mask)
  .op(ctx, "soft_max", srcs, c(scale, max_bias), inplace = TRUE)
}

#' @rdname ggml_abs_inplace
#' @export
ggml_soft_max_ext_back_inplace <- function(ctx, a, b, scale = 1.0, max_bias = 0.0) {
  .op(ctx, "soft_max_ext_back", list(a, b), c(scale, max_bias), inplace = TRUE)
}

#' @rdname ggml_abs_inplace
#' @export
ggml_diag_mask_inf_inplace <- function(ctx, a, n_past) {
  .op(ctx, "diag_mask_inf", list(a), n_past, inplace = TRUE)
}
