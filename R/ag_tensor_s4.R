# `%*%` on tensors through R's own dispatch; base's `%*%` is left alone, so
# attaching the package masks nothing.
#
# `%*%` is a primitive. From R 4.4 it dispatches S3 methods of the group
# matrixOps (registered in .onLoad, with crossprod() and tcrossprod()), and
# tensors stay plain S3 objects. Before R 4.4 it dispatches only to S4
# methods, and only for objects that carry the S4 bit: "ag_tensor" is
# registered as an old (S3) class, the methods below cover every pairing with
# a tensor, and every tensor gets the bit (see .ag_s4()); its class attribute
# stays "ag_tensor", so S3 methods and inherits() work as before.

#' @importFrom methods setOldClass setMethod signature
NULL

setOldClass("ag_tensor")

.ag_dispatch <- new.env(parent = emptyenv())
.ag_dispatch$s4_bit <- TRUE

.ag_dispatch_on_load <- function(ns) {
  .ag_dispatch$s4_bit <- getRversion() < "4.4.0"
  if (!.ag_dispatch$s4_bit) registerS3method("matrixOps", "ag_tensor", .ag_matrixOps, envir = ns)
}

# Marks a new tensor environment (or the tensor of list(tensor, aux)) with
# the S4 bit where R needs it; asS4() marks the environment itself.
.ag_s4 <- function(r, aux = FALSE) {
  if (.ag_dispatch$s4_bit) {
    if (aux) asS4(r[[1L]]) else asS4(r)
  }
  r
}

.ag_matrixOps <- function(x, y) {
  switch(.Generic,
    "%*%" = ag_matmul(x, y),
    crossprod = ag_matmul(ag_transpose(x), if (missing(y) || is.null(y)) x else y),
    tcrossprod = ag_matmul(x, ag_transpose(if (missing(y) || is.null(y)) x else y)),
    .abort(sprintf("`%s` is not defined for ag_tensor", .Generic))
  )
}

#' @rdname ag_tensor_ops
#' @aliases ag_tensor-class
#' @export
setMethod("%*%", signature(x = "ag_tensor", y = "ag_tensor"), function(x, y) ag_matmul(x, y))

#' @rdname ag_tensor_ops
#' @export
setMethod("%*%", signature(x = "ag_tensor", y = "ANY"), function(x, y) ag_matmul(x, y))

#' @rdname ag_tensor_ops
#' @export
setMethod("%*%", signature(x = "ANY", y = "ag_tensor"), function(x, y) ag_matmul(x, y))

# Auto-printing shows an S4 object with show(); a tensor prints as print() does.
# The method is registered with methods' own show() when the namespace loads;
# exporting it would put a second `show` on the search path.
#' @rdname print.ag_tensor
setMethod("show", "ag_tensor", function(object) print.ag_tensor(object))
