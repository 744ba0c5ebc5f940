# Differentiable operations. Each one hands its inputs' engine handles to the
# engine (`.ag_op`), which computes the result and, inside with_grad_tape(),
# records what the backward rule needs.

# Runs engine op `name` on `inputs` (tensors or numbers) and wraps the result.
# With aux = TRUE, returns list(tensor, aux). Host ops on tensors and plain
# doubles run in one engine call; the rest (a tensor on "gpu", a number that
# needs converting) take the general path.
.ag_op <- function(name, inputs, params = NULL, idx = NULL, aux = FALSE,
                   call = sys.call(-1L)) {
  r <- rs_ag_op_host(name, inputs, params, idx, aux)
  if (is.null(r)) .ag_op_general(name, inputs, params, idx, aux, call) else .ag_s4(.rs(r, call = call), aux)
}

.ag_op_general <- function(name, inputs, params, idx, aux, call) {
  n <- length(inputs)
  hs <- vector("list", n)
  rg <- logical(n)
  device <- NULL
  dtype <- NULL
  # Fields are read with .subset2(): `$` on a classed environment first looks
  # for a method, which costs more than the read (this loop runs per op).
  for (i in seq_len(n)) {
    x <- inputs[[i]]
    if (inherits(x, "ag_tensor")) {
      hs[[i]] <- .subset2(x, ".h")
      rg[i] <- isTRUE(.subset2(x, "requires_grad"))
      dev <- .subset2(x, "device")
      if (is.null(device) || identical(dev, "gpu")) device <- dev
      if (is.null(dtype)) dtype <- .subset2(x, "dtype")
    } else {
      hs[[i]] <- .ag_num(x, paste("input", i), call = call)
    }
  }
  if (!is.null(params)) params <- as.double(params)
  on_device <- identical(device, "gpu")
  if (on_device) {
    .ag_device_ready(call = call)
    for (i in seq_len(n)) {
      x <- inputs[[i]]
      # parameters (leaves that want a gradient) become resident once
      if (rg[i] && inherits(x, "ag_tensor") && identical(.subset2(x, "device"), "gpu") &&
          is.null(.subset2(x, "grad_fn")) && !.ag_ptr_is_live(x)) .ag_make_resident(x)
    }
  }
  r <- .rs(rs_ag_op(name, hs, rg, params, idx, on_device), call = call)
  out <- .ag_make(r[[1L]], as.integer(r[[2L]]), r[[3L]], r[[4L]], r[[5L]],
                  device %||% .ag_device_state$device,
                  dtype %||% .ag_device_state$dtype,
                  if (r[[3L]]) paste0("ag_", name) else NULL)
  if (aux) list(out, r[[6L]]) else out
}

`%||%` <- function(a, b) if (is.null(a)) b else a

.ag_scalar <- function(x, what, call = sys.call(-1L)) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x)) {
    .abort(sprintf("`%s` must be a single number", what), call = call)
  }
  as.double(x)
}

#' Matrix product
#'
#' `A %*% B` for `A` `[m, k]` and `B` `[k, n]`, recorded on the tape.
#' @param A,B `ag_tensor`s or numeric matrices.
#' @return An `ag_tensor` `[m, n]`.
#' @export
#' @examples
#' ag_matmul(ag_tensor(diag(2)), matrix(1:4, 2, 2))
ag_matmul <- function(A, B) .ag_op("matmul", list(A, B))

#' Element-wise arithmetic with recycling
#'
#' `A + B`, `A - B`, `A * B`, `A / B`. Shapes must match in each dimension or
#' be 1 there: a `[m, 1]` column (a bias) or a `[1, n]` row is recycled, and a
#' number is a `[1, 1]` value. Gradients are summed back to each input's shape.
#' @param A,B `ag_tensor`s, numeric matrices or numbers.
#' @return An `ag_tensor`.
#' @name ag_arith
#' @examples
#' x <- ag_tensor(matrix(1:6, 2, 3))
#' b <- ag_tensor(matrix(c(10, 20), 2, 1))
#' ag_add(x, b)$data
#' ag_sub(x, b)$data
#' ag_mul(x, b)$data
#' ag_div(x, 2)$data
NULL

#' @rdname ag_arith
#' @export
ag_add <- function(A, B) .ag_op("add", list(A, B))
#' @rdname ag_arith
#' @export
ag_sub <- function(A, B) .ag_op("sub", list(A, B))
#' @rdname ag_arith
#' @export
ag_mul <- function(A, B) .ag_op("mul", list(A, B))
#' @rdname ag_arith
#' @export
ag_div <- function(A, B) .ag_op("div", list(A, B))

#' Multiply by a constant
#' @param x An `ag_tensor`.
#' @param scalar A number (not differentiated).
#' @return An `ag_tensor`.
#' @export
#' @examples
#' ag_scale(ag_tensor(1:3), 2)$data
ag_scale <- function(x, scalar) .ag_op("scale", list(x), .ag_scalar(scalar, "scalar"))

#' Element-wise functions
#'
#' `ag_relu` (`max(x, 0)`), `ag_sigmoid`, `ag_tanh`, `ag_log`, `ag_exp`,
#' `ag_pow` (`x^p` for a number `p`) and `ag_clamp` (limits to
#' `[lo, hi]`; the gradient is 1 strictly inside and 0 elsewhere).
#' @param x An `ag_tensor`.
#' @param p Exponent (a number, not differentiated).
#' @param lo,hi Bounds.
#' @return An `ag_tensor` of the shape of `x`.
#' @name ag_elementwise
#' @examples
#' x <- ag_tensor(c(-1, 0.5, 2))
#' ag_relu(x)$data
#' ag_clamp(x, 0, 1)$data
#' ag_sigmoid(x)$data
#' ag_tanh(x)$data
#' ag_exp(x)$data
#' ag_log(ag_exp(x))$data
#' ag_pow(x, 2)$data
NULL

#' @rdname ag_elementwise
#' @export
ag_relu <- function(x) .ag_op("relu", list(x))
#' @rdname ag_elementwise
#' @export
ag_sigmoid <- function(x) .ag_op("sigmoid", list(x))
#' @rdname ag_elementwise
#' @export
ag_tanh <- function(x) .ag_op("tanh", list(x))
#' @rdname ag_elementwise
#' @export
ag_log <- function(x) .ag_op("log", list(x))
#' @rdname ag_elementwise
#' @export
ag_exp <- function(x) .ag_op("exp", list(x))
#' @rdname ag_elementwise
#' @export
ag_pow <- function(x, p) .ag_op("pow", list(x), .ag_scalar(p, "p"))
#' @rdname ag_elementwise
#' @export
ag_clamp <- function(x, lo = -Inf, hi = Inf) {
  .ag_op("clamp", list(x), c(.ag_scalar(lo, "lo"), .ag_scalar(hi, "hi")))
}

#' Softmax over each column
#'
#' Every column (one sample) of the result sums to 1.
#' @param x An `ag_tensor` `[classes, batch]`.
#' @return An `ag_tensor` of the same shape.
#' @export
#' @examples
#' colSums(ag_softmax(ag_tensor(matrix(rnorm(6), 3, 2)))$data)
ag_softmax <- function(x) .ag_op("softmax", list(x))

.ag_dim <- function(dim, call = sys.call(-1L)) {
  if (is.null(dim)) return(0)
  if (!is.numeric(dim) || length(dim) != 1L || !dim %in% c(1, 2)) {
    .abort("`dim` must be NULL (all), 1 (one value per row) or 2 (one value per column)", call = call)
  }
  as.double(dim)
}

#' Sums and means
#'
#' With `dim = NULL` over all elements (a `[1, 1]` result); with `dim = 1`
#' one value per row (`rowSums`, `[nrow, 1]`); with `dim = 2` one value per
#' column (`colSums`, `[1, ncol]`). Results are always matrices, so
#' `keepdim` makes no difference.
#' @param x An `ag_tensor`.
#' @param dim `NULL`, 1 or 2.
#' @param keepdim Kept for compatibility; results keep both dimensions.
#' @return An `ag_tensor`.
#' @name ag_reductions
#' @examples
#' x <- ag_tensor(matrix(1:6, 2, 3))
#' ag_sum(x)$data
#' ag_mean(x, dim = 1)$data
NULL

#' @rdname ag_reductions
#' @export
ag_sum <- function(x, dim = NULL, keepdim = FALSE) .ag_op("sum", list(x), .ag_dim(dim))
#' @rdname ag_reductions
#' @export
ag_mean <- function(x, dim = NULL, keepdim = FALSE) .ag_op("mean", list(x), .ag_dim(dim))

#' Reshape and transpose
#'
#' `ag_reshape` keeps the values in column-major order (as `matrix(x, nrow,
#' ncol)`); one of `nrow`, `ncol` may be `-1` to be inferred.
#' @param x An `ag_tensor`.
#' @param nrow,ncol The new shape.
#' @return An `ag_tensor`.
#' @name ag_shape_ops
#' @examples
#' x <- ag_tensor(matrix(1:6, 2, 3))
#' ag_reshape(x, 3, -1)$data
#' ag_transpose(x)$data
NULL

#' @rdname ag_shape_ops
#' @export
ag_reshape <- function(x, nrow, ncol) {
  n <- if (is_ag_tensor(x)) prod(x$shape) else length(x)
  nrow <- .ag_scalar(nrow, "nrow")
  ncol <- .ag_scalar(ncol, "ncol")
  if (nrow == -1 && ncol == -1) .abort("only one of `nrow` and `ncol` can be -1")
  if (nrow == -1) nrow <- n / ncol
  if (ncol == -1) ncol <- n / nrow
  .ag_op("reshape", list(x), c(nrow, ncol))
}
#' @rdname ag_shape_ops
#' @export
ag_transpose <- function(x) .ag_op("transpose", list(x))

#' Loss functions
#'
#' * `ag_mse_loss`: `mean((pred - target)^2)` over all elements.
#' * `ag_cross_entropy_loss`: `-sum(target * log(pred)) / ncol(pred)` for
#'   probabilities `pred` (clamped to `[1e-7, 1 - 1e-7]`).
#' * `ag_softmax_cross_entropy_loss`: the same on `softmax(logits)`, computed
#'   stably in one op. `target` is a one-hot (or soft) matrix `[classes,
#'   batch]`, or 0-based class indices (an integer vector, or a `[1, batch]`
#'   matrix).
#' @param pred,logits `ag_tensor` `[units, batch]`.
#' @param target A matrix (or `ag_tensor`) of the same shape, or class indices.
#' @return A `[1, 1]` `ag_tensor`.
#' @name ag_losses
#' @examples
#' logits <- ag_param(matrix(rnorm(6), 3, 2))
#' with_grad_tape(loss <- ag_softmax_cross_entropy_loss(logits, c(0L, 2L)))
#' loss$data
#' ag_cross_entropy_loss(ag_softmax(logits), diag(3)[, c(1, 3)])$data
#' ag_mse_loss(logits, matrix(0, 3, 2))$data
NULL

#' @rdname ag_losses
#' @export
ag_mse_loss <- function(pred, target) .ag_op("mse_loss", list(pred, target))
#' @rdname ag_losses
#' @export
ag_cross_entropy_loss <- function(pred, target) .ag_op("cross_entropy_loss", list(pred, target))
#' @rdname ag_losses
#' @export
ag_softmax_cross_entropy_loss <- function(logits, target) {
  .ag_op("softmax_cross_entropy_loss", list(logits, .ag_onehot(target, logits)))
}

# 0-based class indices (integer vector, numeric vector, or a [1, n] matrix
# against more than one class) become a one-hot [classes, n] matrix.
.ag_onehot <- function(target, logits, call = sys.call(-1L)) {
  if (is_ag_tensor(target)) return(target)
  k <- if (is_ag_tensor(logits)) logits$shape[1L] else NROW(logits)
  d <- dim(target)
  is_idx <- is.integer(target) || is.null(d) ||
    (length(d) == 2L && d[1L] == 1L && k > 1L)
  if (!is_idx) return(target)
  idx <- as.integer(target)
  if (anyNA(idx) || any(idx < 0L) || any(idx >= k)) {
    .abort(sprintf("class indices must be 0-based integers in 0..%d (there are %d classes)",
                   k - 1L, k), call = call)
  }
  oh <- matrix(0, k, length(idx))
  oh[idx + 1L + k * (seq_along(idx) - 1L)] <- 1
  oh
}
