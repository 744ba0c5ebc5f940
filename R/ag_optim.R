# Optimizers: R environments around engine state. step() hands the
# parameters' handles and their gradients to the engine, which updates the
# weights and the moments in place.

.ag_check_params <- function(params, call = sys.call(-1L)) {
  if (is_ag_tensor(params)) params <- list(params)
  if (!is.list(params) || length(params) == 0L ||
      !all(vapply(params, is_ag_tensor, logical(1L)))) {
    .abort("`params` must be a non-empty list of ag_param tensors (e.g. model$parameters())", call = call)
  }
  if (is.null(names(params))) names(params) <- paste0("param", seq_along(params))
  empty <- is.na(names(params)) | !nzchar(names(params))
  names(params)[empty] <- paste0("param", which(empty))
  ids <- vapply(params, function(p) as.character(p$id), character(1L))
  dup <- which(duplicated(ids))
  if (length(dup)) {
    first <- match(ids[dup[1L]], ids)
    .abort(sprintf(
      "`params` lists the same tensor twice ('%s' and '%s'), so it would be updated twice per step; list each parameter once",
      names(params)[first], names(params)[dup[1L]]), call = call)
  }
  params
}

# A hyperparameter: one finite number in [lo, hi] (an open end excluded).
.ag_hyper <- function(x, what, lo = -Inf, hi = Inf, lo_open = FALSE, hi_open = FALSE,
                      call = sys.call(-1L)) {
  ok <- is.numeric(x) && length(x) == 1L && !is.na(x) && is.finite(x) &&
    (if (lo_open) x > lo else x >= lo) && (if (hi_open) x < hi else x <= hi)
  if (!ok) {
    range <- sprintf("%s%s, %s%s", if (lo_open) "(" else "[", format(lo), format(hi), if (hi_open) ")" else "]")
    .abort(sprintf("`%s` must be a single finite number in %s, not %s", what, range,
                   if (is.numeric(x) && length(x) == 1L) format(x) else .describe_value(x)), call = call)
  }
  as.double(x)
}

# The gradients of `params` from `grads` (the environment returned by
# backward(), or a list named by id); NULL where there is none.
.ag_lookup_grads <- function(params, grads, call = sys.call(-1L)) {
  keys <- vapply(params, function(p) as.character(p$id), character(1L))
  if (is.environment(grads)) {
    out <- mget(keys, envir = grads, ifnotfound = list(NULL), inherits = FALSE)
  } else if (is.list(grads)) {
    out <- lapply(keys, function(k) grads[[k]])
  } else {
    .abort("`grads` must be the value of backward()", call = call)
  }
  for (i in seq_along(out)) {
    g <- out[[i]]
    if (!is.null(g) && !(is.double(g) && is.matrix(g))) out[[i]] <- .ag_num(g, "grad", call = call)
  }
  names(out) <- keys
  out
}

# The engine handles of the optimizer's parameters, computed again only
# when `env$params` was replaced.
.ag_opt_handles <- function(env) {
  if (!identical(env$.hparams, env$params)) {
    env$.handles <- lapply(env$params, function(p) p$.h)
    env$.hparams <- env$params
  }
  env$.handles
}

.ag_optimizer <- function(kind, params, lr, hyper, fields, cls, call = sys.call(-1L)) {
  params <- .ag_check_params(params, call = call)
  lr <- .ag_hyper(lr, "lr", 0, call = call)
  env <- new.env(parent = emptyenv())
  env$params <- params
  env$lr <- lr
  for (nm in names(fields)) env[[nm]] <- fields[[nm]]
  env$t <- 0L
  env$.state <- .rs(rs_ag_opt_new(kind, as.double(hyper), length(params)), call = sys.call(-1L))
  env$step <- function(grads) {
    .ag_hyper(env$lr, "lr", 0)
    handles <- .ag_opt_handles(env)
    if (inherits(grads, "ag_grads") && !is.null(grads$.store)) {
      .rs(rs_ag_opt_step_store(env$.state, handles, names(env$params), grads$.store, as.double(env$lr)))
      env$.stepped <- grads$.store
    } else {
      gl <- .ag_lookup_grads(env$params, grads)
      .rs(rs_ag_opt_step(env$.state, handles, names(env$params), unname(gl), as.double(env$lr)))
    }
    env$t <- env$t + 1L
    invisible(env)
  }
  env$zero_grad <- function() {
    handles <- .ag_opt_handles(env)
    .rs(rs_ag_zero_grad(handles))
    # The gradients of the last step are released too: freed now, not at
    # R's next garbage collection (and on "gpu" the next tape need not copy
    # them to the host before it frees the pass pool).
    if (!is.null(env$.stepped)) .rs(rs_ag_store_release(env$.stepped, handles))
    env$.stepped <- NULL
    rs_ag_tape("clear")
    invisible(env)
  }
  # Moments of parameter `name` (or index): list(t, m, v); SGD keeps its
  # velocity in m.
  env$state <- function(name) {
    n <- length(env$params)
    if (is.character(name) && length(name) == 1L && !is.na(name)) {
      i <- match(name, names(env$params))
      if (is.na(i)) {
        .abort(sprintf("no parameter called '%s'; the parameters are %s", name,
                       paste(sprintf("'%s'", names(env$params)), collapse = ", ")))
      }
    } else if (is.numeric(name) && length(name) == 1L && !is.na(name) && name == round(name)) {
      i <- as.integer(name)
      if (i < 1L || i > n) .abort(sprintf("`name` is %d, but the optimizer has %d parameters (1 to %d)", i, n, n))
    } else {
      .abort("`name` must be a parameter name or a 1-based index")
    }
    .rs(rs_ag_opt_state(env$.state, i))
  }
  class(env) <- c(cls, "ag_optimizer")
  env
}

#' Optimizers
#'
#' Objects with `$step(grads)` (one update from the value of [backward()]),
#' `$zero_grad()` (clears the parameters' `$grad`) and a modifiable `$lr`.
#' On device `"gpu"` the gradients stay on the device and `step()` reads them
#' there. `zero_grad()` also drops the parameters' gradients from the value of
#' [backward()] it last stepped with (reading them afterwards gives `NULL`):
#' their memory is freed at once instead of when R next collects garbage, and
#' on `"gpu"` the next [with_grad_tape()] has nothing to copy to the host.
#' Updates run in the engine, in place:
#' * SGD: `v = momentum * v + g; w = w - lr * v` (plain `w - lr * g` when
#'   `momentum = 0`).
#' * Adam: bias-corrected moments, `w = w - lr * m_hat / (sqrt(v_hat) + eps)`.
#' * AdamW: Adam with decoupled weight decay, `w = w * (1 - lr * weight_decay)`
#'   before the Adam update.
#'
#' @param params A named list of `ag_param` tensors (`model$parameters()`).
#' @param lr Learning rate.
#' @param momentum Momentum factor.
#' @param beta1,beta2 Decay rates of the first and second moments.
#' @param eps Added to the denominator.
#' @param weight_decay Decoupled weight decay factor.
#' @return An optimizer environment.
#' @name optimizers
#' @examples
#' w <- ag_param(matrix(c(1, -1), 2, 1))
#' opt <- optimizer_adam(list(w = w), lr = 0.1)
#' with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
#' opt$step(backward(loss))
#' opt$zero_grad()
#' w$data
#' sgd <- optimizer_sgd(list(w = w), lr = 0.1, momentum = 0.9)
#' adamw <- optimizer_adamw(list(w = w), lr = 0.1, weight_decay = 0.01)
#' with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
#' adamw$step(backward(loss))
#' w$data
NULL

#' @rdname optimizers
#' @export
optimizer_sgd <- function(params, lr = 0.01, momentum = 0) {
  momentum <- .ag_hyper(momentum, "momentum", 0, 1, hi_open = TRUE)
  .ag_optimizer("sgd", params, lr, c(momentum), list(momentum = momentum), "ag_optimizer_sgd")
}

#' @rdname optimizers
#' @export
optimizer_adam <- function(params, lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-08) {
  beta1 <- .ag_hyper(beta1, "beta1", 0, 1, hi_open = TRUE)
  beta2 <- .ag_hyper(beta2, "beta2", 0, 1, hi_open = TRUE)
  eps <- .ag_hyper(eps, "eps", 0, lo_open = TRUE)
  .ag_optimizer("adam", params, lr, c(beta1, beta2, eps),
                list(beta1 = beta1, beta2 = beta2, eps = eps), "ag_optimizer_adam")
}

#' @rdname optimizers
#' @export
optimizer_adamw <- function(params, lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-08,
                            weight_decay = 0.01) {
  beta1 <- .ag_hyper(beta1, "beta1", 0, 1, hi_open = TRUE)
  beta2 <- .ag_hyper(beta2, "beta2", 0, 1, hi_open = TRUE)
  eps <- .ag_hyper(eps, "eps", 0, lo_open = TRUE)
  weight_decay <- .ag_hyper(weight_decay, "weight_decay", 0)
  .ag_optimizer("adamw", params, lr, c(beta1, beta2, eps, weight_decay),
                list(beta1 = beta1, beta2 = beta2, eps = eps, weight_decay = weight_decay),
                "ag_optimizer_adamw")
}

#' @export
print.ag_optimizer <- function(x, ...) {
  kind <- sub("^ag_optimizer_", "", class(x)[1L])
  extra <- switch(kind,
    sgd = sprintf("momentum %g", x$momentum),
    sprintf("betas (%g, %g), eps %g%s", x$beta1, x$beta2, x$eps,
            if (kind == "adamw") sprintf(", weight decay %g", x$weight_decay) else ""))
  cat(sprintf("<%s optimizer> lr %g, %s; %d parameters, %d steps\n",
              toupper(kind), x$lr, extra, length(x$params), x$t))
  invisible(x)
}

#' Clip gradients by their global norm
#'
#' When the L2 norm of all the gradients of `params` together exceeds
#' `max_norm`, scales them (in `grads`, in place) so that it is `max_norm`.
#' Call it between [backward()] and `optimizer$step()`.
#'
#' @param params A named list of `ag_param` tensors.
#' @param grads The value of [backward()].
#' @param max_norm The largest norm allowed.
#' @return The norm before clipping, invisibly.
#' @export
#' @examples
#' w <- ag_param(matrix(c(3, 4), 2, 1))
#' with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
#' grads <- backward(loss)
#' clip_grad_norm(list(w = w), grads, max_norm = 1)
#' sqrt(sum(grads[[as.character(w$id)]]^2))
clip_grad_norm <- function(params, grads, max_norm) {
  params <- .ag_check_params(params)
  if (inherits(grads, "ag_grads") && !is.null(grads$.store)) {
    handles <- lapply(params, function(p) p$.h)
    return(invisible(.rs(rs_ag_clip_store(grads$.store, handles, .ag_scalar(max_norm, "max_norm")))))
  }
  gl <- .ag_lookup_grads(params, grads)
  gl <- gl[!vapply(gl, is.null, logical(1L))]
  if (length(gl) == 0L) return(invisible(0))
  r <- .rs(rs_ag_clip(unname(gl), .ag_scalar(max_norm, "max_norm")))
  if (r$factor < 1 && is.environment(grads)) {
    for (k in names(gl)) assign(k, gl[[k]] * r$factor, envir = grads)
  }
  invisible(r$norm)
}
