# Autograd tensors. An ag_tensor is an environment (reference semantics): the
# value and the gradient live in the Rust engine and are read through the
# active bindings `data` and `grad`, so ops pass handles, not matrices. The
# remaining fields are plain: id, requires_grad, grad_fn, device, dtype, and
# the residency fields ptr, shape, ctx_gen and ctx_scope.

# A tensor environment around an engine handle, built in the engine
# (src/rust/ggmlr/src/ag_env.rs) with the fields above and the active
# bindings `data` and `grad`, whose functions are the two templates below
# with the tensor as `e`.
.ag_make <- function(h, id, rg, nr, nc, device, dtype, grad_fn = NULL) {
  .ag_s4(.rs(rs_ag_make_env(h, id, rg, nr, nc, device, dtype, grad_fn)))
}

.ag_tensor_data_fn <- function(v) {
  if (missing(v)) .ag_data(e) else .ag_data_set(e, v)
}

.ag_tensor_grad_fn <- function(v) {
  if (missing(v)) .rs(rs_ag_grad(e$.h)) else .rs(rs_ag_set_grad(e$.h, .ag_num(v, "grad", null_ok = TRUE)))
}

# A numeric matrix (double storage) from a matrix or vector; a vector becomes
# one column.
.ag_num <- function(x, what = "data", null_ok = FALSE, call = sys.call(-1L)) {
  if (is.null(x) && null_ok) return(NULL)
  if (inherits(x, "ag_tensor")) return(.ag_data(x))
  if (!(is.numeric(x) || is.logical(x)) || is.object(x) && !is.matrix(x)) {
    .abort(sprintf("`%s` must be a numeric matrix or vector (or an ag_tensor), not %s",
                   what, paste(class(x), collapse = "/")), call = call)
  }
  d <- dim(x)
  if (is.null(d) || length(d) == 1L) {
    x <- matrix(as.double(x), ncol = 1L)
  } else if (length(d) != 2L) {
    .abort(sprintf("`%s` must be a matrix or a vector, not an array with %d dimensions",
                   what, length(d)), call = call)
  } else if (!is.double(x)) {
    storage.mode(x) <- "double"
  }
  x
}

#' Create a tensor for automatic differentiation
#'
#' An `ag_tensor` holds a numeric matrix in the `[features, batch]` layout
#' (a vector becomes one column). It is an environment, so every reference
#' sees updates. Its value is `t$data` and, after [backward()], its gradient
#' is `t$grad`; both live in the engine and are copied to R only when read.
#' Other fields: `id`, `requires_grad`, `grad_fn` (the name of the op that
#' made it, or `NULL`), `device`, `dtype`, and the residency fields `ptr`,
#' `shape`, `ctx_gen`, `ctx_scope`.
#'
#' @param data A numeric matrix or vector.
#' @param device `"cpu"` or `"gpu"`; defaults to [ag_default_device()].
#' @param dtype `"f32"`, `"f16"` or `"bf16"` (the precision on a device);
#'   defaults to [ag_default_dtype()].
#' @return An `ag_tensor` that does not require gradients ([ag_param()] makes
#'   one that does).
#' @export
#' @examples
#' x <- ag_tensor(matrix(1:6, 2, 3))
#' x
#' dim(x)
#' x$data * 2
ag_tensor <- function(data, device = .ag_device_state$device,
                      dtype = .ag_device_state$dtype) {
  m <- .ag_num(data, "data")
  r <- .rs(rs_ag_new(m))
  .ag_make(r[[1L]], as.integer(r[[2L]]), FALSE, nrow(m), ncol(m),
           .ag_check_device(device), .ag_check_dtype(dtype))
}

#' Create a trainable parameter
#'
#' An [ag_tensor()] with `requires_grad = TRUE`: [backward()] computes its
#' gradient and optimizers update it in place.
#'
#' @inheritParams ag_tensor
#' @return An `ag_tensor` with `requires_grad = TRUE`.
#' @export
#' @examples
#' w <- ag_param(matrix(rnorm(6), 2, 3))
#' w$requires_grad
ag_param <- function(data, device = .ag_device_state$device,
                     dtype = .ag_device_state$dtype) {
  t <- ag_tensor(data, device = device, dtype = dtype)
  t$requires_grad <- TRUE
  t
}

#' Is this an ag_tensor?
#' @param x Any R object.
#' @return `TRUE` or `FALSE`.
#' @export
#' @examples
#' is_ag_tensor(ag_tensor(1:3))
is_ag_tensor <- function(x) inherits(x, "ag_tensor")

# The value of a tensor as an R matrix (a non-tensor is returned unchanged).
# The residency layer extends this for values held on a device; it must not
# read `t$data`, which is an active binding that calls this function.
.ag_data <- function(t) {
  if (!inherits(t, "ag_tensor")) return(t)
  if (!is.null(t$ptr)) return(.ag_resident_value(t))
  .rs(rs_ag_value(t$.h))
}

# Installs a host value in a tensor, dropping any device residency.
.ag_data_set <- function(t, value) {
  m <- .ag_num(value, "value")
  .rs(rs_ag_set_value(t$.h, m))
  t$shape <- dim(m)
  t$ptr <- NULL
  invisible(t)
}

#' Arithmetic on tensors
#'
#' `+`, `-`, `*`, `/` between tensors and numbers, `x ^ p` with a number
#' `p`, unary minus and `%*%` run the corresponding `ag_*` op, so they are
#' recorded on the tape. Comparisons return a logical matrix (not recorded).
#' `%*%` is base R's own operator: it reaches [ag_matmul()] through S4
#' methods for the class `ag_tensor` (a tensor on either side), so attaching
#' the package masks nothing.
#'
#' @param e1,e2 Tensors or numbers.
#' @param x,y Tensors or numeric matrices (for `%*%`).
#' @return An `ag_tensor` (a logical matrix for comparisons).
#' @name ag_tensor_ops
#' @examples
#' a <- ag_param(matrix(1:4, 2, 2))
#' b <- ag_tensor(matrix(1, 2, 2))
#' with_grad_tape(loss <- ag_sum((a * 2 + b) %*% a))
#' backward(loss)
#' a$grad
NULL

#' @rdname ag_tensor_ops
#' @export
Ops.ag_tensor <- function(e1, e2) {
  if (missing(e2)) {
    return(switch(.Generic,
      "-" = ag_scale(e1, -1),
      "+" = e1,
      .abort(sprintf("unary `%s` is not defined for ag_tensor", .Generic))
    ))
  }
  switch(.Generic,
    "+" = ag_add(e1, e2),
    "-" = ag_sub(e1, e2),
    "*" = ag_mul(e1, e2),
    "/" = ag_div(e1, e2),
    "^" = {
      if (is_ag_tensor(e2) || length(e2) != 1L) {
        .abort("`x ^ p` needs a single number `p` (the exponent is not differentiated)")
      }
      ag_pow(e1, e2)
    },
    "==" = , "!=" = , "<" = , ">" = , "<=" = , ">=" =
      get(.Generic, envir = baseenv())(.ag_data(e1), .ag_data(e2)),
    .abort(sprintf("`%s` is not defined for ag_tensor", .Generic))
  )
}
