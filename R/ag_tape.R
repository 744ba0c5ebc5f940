# Recording and the backward pass.

#' Record operations for differentiation
#'
#' Evaluates `expr` with the tape on: the `ag_*` operations it runs are
#' recorded (in the engine) for [backward()]. Each call starts a fresh tape.
#' On device `"gpu"` it first frees the pass pool of the residency layer
#' (activations of the previous step); weights stay resident. If `expr`
#' fails, the error propagates and the tape, the parameters and the pools are
#' left usable for the next step.
#'
#' @param expr Code to run.
#' @return The value of `expr`, invisibly.
#' @export
#' @examples
#' w <- ag_param(matrix(c(1, 0, 0, 1), 2, 2))
#' x <- ag_tensor(matrix(c(1, 2), 2, 1))
#' with_grad_tape({
#'   loss <- ag_mse_loss(ag_matmul(w, x), matrix(0, 2, 1))
#' })
#' backward(loss)
#' w$grad
with_grad_tape <- function(expr) {
  .ag_pass_reset()
  .rs(rs_ag_tape("begin"))
  on.exit(rs_ag_tape("end"), add = TRUE)
  invisible(eval.parent(substitute(expr)))
}

# Frees the residency layer's pass pool before a pass on `device` (the
# default device for a tape; a compiled model's own device for its batches).
# On the host there is nothing to free.
.ag_pass_reset <- function(device = .ag_device_state$device) {
  if (identical(device, "gpu")) {
    reset <- get0(".ag_residency_reset", envir = topenv(), inherits = FALSE)
    if (is.function(reset)) reset(scope = "pass")
  }
  invisible(NULL)
}

#' Backward pass
#'
#' Computes, in the engine, the gradient of `loss` with respect to every
#' tensor that requires one and was used on the tape (leaves such as
#' [ag_param()]s), adds it to their `$grad` and returns the gradients. The
#' tape is consumed: record a new one for the next step. On device `"gpu"`
#' the whole pass runs as one graph on the device and the gradients stay
#' there (in the pass pool) until R reads one; gradients still referenced
#' when the next [with_grad_tape()] frees the pass pool are copied to the
#' host first.
#'
#' @param loss The `ag_tensor` result of a loss (usually `[1, 1]`; for a
#'   larger tensor the gradient of its sum is computed).
#' @return Invisibly, an environment of class `ag_grads` mapping
#'   `as.character(tensor$id)` to gradient matrices, for `optimizer$step()`
#'   and [clip_grad_norm()].
#' @export
#' @examples
#' w <- ag_param(matrix(1:4, 2, 2))
#' with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
#' grads <- backward(loss)
#' grads[[as.character(w$id)]]
backward <- function(loss) {
  if (!is_ag_tensor(loss)) {
    .abort(sprintf("`loss` must be an ag_tensor (the result of a loss function), not %s",
                   paste(class(loss), collapse = "/")))
  }
  invisible(.rs(rs_ag_backward(loss$.h)))
}

# The gradients stay in the engine. The engine builds the ag_grads
# environment: `.store` and, per gradient, an active binding named by the
# tensor id whose function is this template with `store` and `id` bound:
# reading `grads[[key]]` copies the gradient to R, assigning replaces it
# there (NULL removes it).
.ag_grads_fn <- function(v) {
  if (missing(v)) .rs(rs_ag_store_get(store, id))
  else .rs(rs_ag_store_set(store, id, .ag_num(v, "gradient", null_ok = TRUE)))
}

#' @export
print.ag_grads <- function(x, ...) {
  keys <- ls(x)
  cat(sprintf("<ag_grads: %d tensor%s>\n", length(keys), if (length(keys) == 1L) "" else "s"))
  for (k in keys) {
    g <- get(k, envir = x)
    if (is.null(g)) next
    cat(sprintf("  id %s: %dx%d, norm %.4g\n", k, nrow(g), ncol(g), sqrt(sum(g^2))))
  }
  invisible(x)
}

#' Check gradients against finite differences
#'
#' Compares the gradients from [backward()] with central differences
#' `(f(x + eps) - f(x - eps)) / (2 eps)`, element by element, for every
#' input that requires a gradient.
#'
#' @param fn A function taking the list `inputs` and returning a scalar
#'   `ag_tensor` loss.
#' @param inputs A named list of `ag_tensor`s; those with
#'   `requires_grad = TRUE` are checked.
#' @param eps Finite-difference step.
#' @param atol Largest absolute difference accepted.
#' @param verbose Print both gradients of each input.
#' @param quiet Print nothing.
#' @return Invisibly `TRUE` when every gradient matches, else `FALSE`.
#' @export
#' @examples
#' W <- ag_param(matrix(runif(6), 2, 3))
#' x <- ag_tensor(matrix(runif(3), 3, 1))
#' ag_gradcheck(function(ins) ag_mse_loss(ag_tanh(ag_matmul(ins$W, ins$x)),
#'                                          matrix(0, 2, 1)),
#'              list(W = W, x = x))
ag_gradcheck <- function(fn, inputs, eps = 1e-05, atol = 1e-04, verbose = FALSE,
                         quiet = FALSE) {
  if (!is.function(fn)) .abort("`fn` must be a function of the list of inputs")
  if (!is.list(inputs) || !all(vapply(inputs, is_ag_tensor, logical(1L)))) {
    .abort("`inputs` must be a list of ag_tensors")
  }
  if (is.null(names(inputs))) names(inputs) <- paste0("input", seq_along(inputs))
  with_grad_tape(loss <- fn(inputs))
  grads <- backward(loss)
  value <- function() sum(.ag_data(fn(inputs)))
  ok <- TRUE
  for (nm in names(inputs)) {
    inp <- inputs[[nm]]
    if (!isTRUE(inp$requires_grad)) next
    ana <- get0(as.character(inp$id), envir = grads, inherits = FALSE)
    x0 <- .ag_data(inp)
    if (is.null(ana)) ana <- x0 * 0
    num <- x0
    x <- x0
    for (k in seq_along(x0)) {
      x[k] <- x0[k] + eps
      .ag_data_set(inp, x)
      fp <- value()
      x[k] <- x0[k] - eps
      .ag_data_set(inp, x)
      fm <- value()
      x[k] <- x0[k]
      num[k] <- (fp - fm) / (2 * eps)
    }
    .ag_data_set(inp, x0)
    err <- max(abs(ana - num), 0)
    pass <- is.finite(err) && err <= atol
    ok <- ok && pass
    if (!quiet) cat(sprintf("gradcheck %-12s max |analytical - numerical| = %.3e  %s\n",
                            nm, err, if (pass) "ok" else "FAILED"))
    if (verbose) {
      cat("analytical:\n"); print(ana)
      cat("numerical:\n"); print(num)
    }
  }
  if (!quiet) cat(if (ok) "gradcheck: all gradients match\n" else "gradcheck: some gradients differ\n")
  invisible(ok)
}
