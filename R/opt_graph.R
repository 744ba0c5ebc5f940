# ggml's optimisation API, part 2: a graph of ggml ops run on the autograd
# engine. Each node of the user's graph becomes the equivalent ag_* op on
# [ne0, ne1 * ne2 * ne3] matrices, so the engine records it and computes its
# gradient; parameters (ggml_set_param()) are mirrored by ag_param tensors.

#' Tensor flags: inputs, outputs and parameters
#'
#' Marks a tensor as a graph input, a graph output, or a trainable parameter
#' of ggml's optimisation API ([ggml_opt_fit()] and friends update
#' parameters).
#'
#' @param tensor A `ggml_tensor`.
#' @return `tensor`, invisibly.
#' @family optimization
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4)
#' w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' ggml_set_input(x)
#' ggml_set_param(w)
#' y <- ggml_set_output(ggml_mul_mat(ctx, w, x))
#' ggml_tensor_shape(y)
#' ggml_free(ctx)
ggml_set_param <- function(tensor) {
  .rs(rs_tensor_set_flag(tensor, "param"))
  invisible(tensor)
}

#' @rdname ggml_set_param
#' @export
ggml_set_input <- function(tensor) {
  .rs(rs_tensor_set_flag(tensor, "input"))
  invisible(tensor)
}

#' @rdname ggml_set_param
#' @export
ggml_set_output <- function(tensor) {
  .rs(rs_tensor_set_flag(tensor, "output"))
  invisible(tensor)
}

#' A context sized for its use
#'
#' [ggml_init()] under upstream's other name: a context of `mem_size`
#' bytes (at least 1 MiB).
#'
#' @inheritParams ggml_init
#' @return A `ggml_context`.
#' @export
#' @examples
#' ctx <- ggml_init_auto(1024 * 1024, no_alloc = TRUE)
#' ggml_free(ctx)
ggml_init_auto <- function(mem_size = 16 * 1024 * 1024, no_alloc = FALSE) {
  ggml_init(max(mem_size, 1024 * 1024), no_alloc = no_alloc)
}

.opt_flag <- function(node, flag) bitwAnd(node$flags, flag) != 0L

# The value of a node's tensor as an R matrix [ne0, rest].
.opt_tensor_matrix <- function(node) {
  v <- ggml_backend_tensor_get_data(node$tensor)
  matrix(as.double(v), node$ne[1L], length(v) / node$ne[1L])
}

.opt_unsupported <- function(node, why) {
  .abort(sprintf("ggml's optimisation API cannot differentiate op %s (%s) of this graph here: %s",
                 node$op, paste(node$ne, collapse = " x "), why), call = NULL)
}

# Runs the graph's nodes as ag_* ops. `vals`: an environment already holding
# the values of the input and the parameters, by id (character).
.opt_run_nodes <- function(oc, vals) {
  for (nd in oc$nodes) {
    key <- format(nd$id, scientific = FALSE)
    if (!is.null(vals[[key]])) next
    src <- lapply(nd$srcs, function(i) vals[[format(i, scientific = FALSE)]])
    vals[[key]] <- if (identical(nd$op, "NONE")) {
      ag_tensor(.opt_tensor_matrix(nd), device = oc$device)
    } else {
      .opt_node_value(nd, src, oc)
    }
  }
  vals
}

.opt_2d <- function(nd) {
  if (nd$ne[3L] * nd$ne[4L] != 1) .opt_unsupported(nd, "only 1-d and 2-d tensors are differentiated")
}

.opt_node_value <- function(nd, src, oc) {
  a <- src[[1L]]
  ne <- nd$ne
  switch(nd$op,
    MUL_MAT = {
      .opt_2d(nd)
      ag_matmul(ag_transpose(a), src[[2L]])
    },
    ADD = , SUB = , MUL = , DIV = {
      b <- src[[2L]]
      if (!all(b$shape == a$shape | b$shape == 1L)) {
        .opt_unsupported(nd, "the second operand must match the first or be 1 along each dimension")
      }
      switch(nd$op, ADD = ag_add(a, b), SUB = ag_sub(a, b), MUL = ag_mul(a, b), DIV = ag_div(a, b))
    },
    ADD1 = ag_add(a, src[[2L]]),
    SCALE = ag_scale(a, nd$params[1L]),
    neg = ag_scale(a, -1),
    abs = ag_add(ag_relu(a), ag_relu(ag_scale(a, -1))),
    sqr = ag_mul(a, a),
    sqrt = ag_pow(a, 0.5),
    exp = ag_exp(a), log = ag_log(a), relu = ag_relu(a), sigmoid = ag_sigmoid(a), tanh = ag_tanh(a),
    gelu = , silu = , elu = , hardswish = , hardsigmoid = .nn_activate(a, nd$op, ne[1L], nd$op),
    LEAKY_RELU = ag_sub(ag_relu(a), ag_scale(ag_relu(ag_scale(a, -1)), nd$params[1L])),
    CLAMP = ag_clamp(a, nd$params[1L], nd$params[2L]),
    SUM = ag_sum(a),
    SUM_ROWS = ag_sum(a, dim = 2),
    MEAN = ag_mean(a, dim = 2),
    SOFT_MAX = {
      if (nd$params[2L] != 0) .opt_unsupported(nd, "ALiBi (max_bias) is not differentiated")
      z <- if (nd$params[1L] != 1) ag_scale(a, nd$params[1L]) else a
      if (length(src) > 1L) z <- ag_add(z, src[[2L]])
      ag_softmax(z)
    },
    NORM = , RMS_NORM = {
      eps <- nd$params[1L]
      x <- a
      if (nd$op == "NORM") x <- ag_sub(x, ag_mean(x, dim = 2))
      ag_div(x, ag_pow(ag_add(ag_mean(ag_mul(x, x), dim = 2), eps), 0.5))
    },
    RESHAPE = , CONT = , DUP = , CPY = ag_reshape(a, ne[1L], prod(ne[-1L])),
    TRANSPOSE = {
      .opt_2d(nd)
      ag_transpose(a)
    },
    PERMUTE = {
      .opt_2d(nd)
      if (identical(as.integer(nd$params[1:2]), c(1L, 0L))) ag_transpose(a) else a
    },
    VIEW = {
      # A view of whole columns' leading rows (same column stride): a row slice.
      s <- src[[1L]]$shape
      es <- 4
      off <- nd$offset / es
      if (ne[3L] * ne[4L] == 1 && (ne[2L] == 1 || nd$nb[2L] / es == s[1L]) && off %% s[1L] + ne[1L] <= s[1L] &&
          off %/% s[1L] + ne[2L] <= s[2L]) {
        r0 <- off %% s[1L]
        c0 <- off %/% s[1L]
        v <- .ag_op("slice_rows", list(a), c(r0, r0 + ne[1L]))
        if (c0 == 0 && ne[2L] == s[2L]) v else {
          ag_transpose(.ag_op("slice_rows", list(ag_transpose(v)), c(c0, c0 + ne[2L])))
        }
      } else {
        .opt_unsupported(nd, "only views of whole rows or columns are differentiated")
      }
    },
    REPEAT = ag_add(ag_tensor(matrix(0, ne[1L], prod(ne[-1L])), device = oc$device), a),
    CONCAT = {
      .opt_2d(nd)
      d <- nd$params[1L]
      if (d == 0) .ag_op("concat_rows", src) else
        ag_transpose(.ag_op("concat_rows", lapply(src, ag_transpose)))
    },
    GET_ROWS = {
      idx <- as.integer(ggml_backend_tensor_get_data(oc$node_of[[format(nd$srcs[2L], scientific = FALSE)]]$tensor))
      .ag_op("gather", list(a), idx = idx)
    },
    .opt_unsupported(nd, "no backward rule for it yet")
  )
}

# The loss of the outputs against the labels (a [1, 1] tensor).
.opt_loss <- function(loss_type, out, labels) {
  switch(loss_type + 1L,
    ag_mean(out),
    ag_sum(out),
    ag_softmax_cross_entropy_loss(out, labels),
    ag_mse_loss(out, labels))
}
