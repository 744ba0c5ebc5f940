# Learning-rate handles: what callbacks and schedules read and change
# (`state$lr_ud` in ggml_fit()). A handle holds the rates of both optimizer
# kinds, as ggml's optimisation API does, and pushes a change to the
# optimizer it is bound to.

.nn_lr_new <- function(adamw = 0.001, sgd = 0.001, active = "adamw", bind = NULL) {
  env <- new.env(parent = emptyenv())
  env$adamw <- adamw
  env$sgd <- sgd
  env$active <- active
  env$bind <- bind
  class(env) <- "ggml_opt_lr"
  env
}

# The handle of an autograd optimizer (used by the Keras-style ggml_fit()).
.nn_lr_handle <- function(opt) {
  if (is.null(opt)) return(.nn_lr_new())
  kind <- if (inherits(opt, "ag_optimizer_sgd")) "sgd" else "adamw"
  .nn_lr_new(adamw = opt$lr, sgd = opt$lr, active = kind,
             bind = function(lr) opt$lr <- lr)
}

#' Learning rate of a training run
#'
#' `ggml_opt_get_lr()` reads and `ggml_opt_set_lr()` changes the learning
#' rates held by `lr_ud`: the `lr_ud` element of [ggml_opt_init_for_fit()], or
#' `state$lr_ud` inside a callback of [ggml_fit()]. A change takes effect at
#' the next step.
#'
#' @param lr_ud A learning-rate handle.
#' @param adamw_lr,sgd_lr New rates for AdamW and SGD (`NA`: unchanged).
#' @return `ggml_opt_get_lr()`: a named numeric vector `c(adamw = , sgd = )`.
#'   `ggml_opt_set_lr()`: `lr_ud`, invisibly.
#' @family optimization
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' sched <- ggml_backend_sched_new(list(cpu))
#' ctx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
#' x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 8)
#' w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 1)
#' ggml_set_param(w)
#' out <- ggml_mul_mat(ctx, w, x)
#' fit <- ggml_opt_init_for_fit(sched, ggml_opt_loss_type_mse(),
#'                              ggml_opt_optimizer_type_adamw(), 1L, ctx, x, out)
#' ggml_opt_set_lr(fit$lr_ud, adamw_lr = 0.01)
#' ggml_opt_get_lr(fit$lr_ud)
#' ggml_opt_free(fit$opt_ctx)
ggml_opt_get_lr <- function(lr_ud) {
  .nn_check_lr(lr_ud)
  c(adamw = lr_ud$adamw, sgd = lr_ud$sgd)
}

#' @rdname ggml_opt_get_lr
#' @export
ggml_opt_set_lr <- function(lr_ud, adamw_lr = NA, sgd_lr = NA) {
  .nn_check_lr(lr_ud)
  chk <- function(v, what) {
    if (length(v) != 1L || (!is.na(v) && (!is.numeric(v) || v < 0 || !is.finite(v)))) {
      .abort(sprintf("`%s` must be a non-negative number or NA", what), call = sys.call(-2L))
    }
  }
  chk(adamw_lr, "adamw_lr")
  chk(sgd_lr, "sgd_lr")
  if (!is.na(adamw_lr)) lr_ud$adamw <- as.double(adamw_lr)
  if (!is.na(sgd_lr)) lr_ud$sgd <- as.double(sgd_lr)
  if (is.function(lr_ud$bind)) lr_ud$bind(lr_ud[[lr_ud$active]])
  invisible(lr_ud)
}

.nn_check_lr <- function(lr_ud, call = sys.call(-1L)) {
  if (!inherits(lr_ud, "ggml_opt_lr")) {
    .abort("`lr_ud` must be a learning-rate handle (ggml_opt_init_for_fit()$lr_ud, or state$lr_ud in a callback)",
           call = call)
  }
}

# The rate of the optimizer in use, and a change of it (schedules).
.nn_lr_get <- function(lr_ud) lr_ud[[lr_ud$active]]

.nn_lr_set <- function(lr_ud, lr) {
  ggml_opt_set_lr(lr_ud, adamw_lr = lr, sgd_lr = lr)
}

#' @export
print.ggml_opt_lr <- function(x, ...) {
  cat(sprintf("<ggml_opt_lr> adamw %g, sgd %g (in use: %s)\n", x$adamw, x$sgd, x$active))
  invisible(x)
}
