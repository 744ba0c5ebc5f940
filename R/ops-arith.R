# Every computing op goes through .op(): the engine checks shapes and types
# and names the tensors involved in its errors.
# With `inplace = TRUE` the result is written into the first source's memory
# and is a view of it (ggml's *_inplace functions).
.op <- function(ctx, name, srcs, params = numeric(), call = sys.call(-1L), inplace = FALSE) {
  if (!(is.numeric(params) || is.logical(params)) || anyNA(params)) {
    .abort(sprintf("the parameters of ggml_%s must be numbers, not %s.", name,
      paste(format(params), collapse = ", ")), call = call)
  }
  f <- if (isTRUE(inplace)) rs_op_inplace else rs_op
  .new_tensor(.rs(f(ctx, name, srcs, as.numeric(params)), call = call))
}

#' Arithmetic
#'
#' Element-wise `a + b`, `a - b`, `a * b`, `a / b`, where `b` is broadcast to
#' the shape of `a` when each size of `a` is a multiple of `b`'s (ggml's
#' rule). `ggml_add1()` adds a one-element tensor, `ggml_scale()` multiplies
#' by a number.
#'
#' @param ctx A `ggml_context`.
#' @param a,b `ggml_tensor`s.
#' @param s A number.
#' @return A `ggml_tensor` (a graph node; compute it to get values).
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3), 1:6)
#' b <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), c(10, 20))
#' r <- ggml_scale(ctx, ggml_add(ctx, a, b), 0.5)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' ggml_get_f32(r)
#' d <- ggml_div(ctx, ggml_mul(ctx, a, a), ggml_sub(ctx, a, ggml_scale(ctx, a, 2)))
#' e <- ggml_add1(ctx, d, ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1), 100))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, e))
#' matrix(ggml_get_f32(e), 2)  # 100 - a
#' ggml_free(ctx)
ggml_add <- function(ctx, a, b) .op(ctx, "add", list(a, b))

#' @rdname ggml_add
#' @export
ggml_sub <- function(ctx, a, b) .op(ctx, "sub", list(a, b))

#' @rdname ggml_add
#' @export
ggml_mul <- function(ctx, a, b) .op(ctx, "mul", list(a, b))

#' @rdname ggml_add
#' @export
ggml_div <- function(ctx, a, b) .op(ctx, "div", list(a, b))

#' @rdname ggml_add
#' @export
ggml_add1 <- function(ctx, a, b) .op(ctx, "add1", list(a, b))

#' @rdname ggml_add
#' @export
ggml_scale <- function(ctx, a, s) .op(ctx, "scale", list(a), s)

#' Matrix products
#'
#' `ggml_mul_mat(a, b)` follows ggml: for `a` with sizes `[K, M]` and `b`
#' with `[K, N]` the result is `[M, N]` with `r[m, n] = sum_k a[k, m] b[k, n]`;
#' in R terms, `t(A) %*% B` for matrices `A` (K x M) and `B` (K x N).
#' Dimensions 3 and 4 are batches (`a`'s broadcast over `b`'s).
#' `ggml_out_prod(a[M, K], b[N, K])` is `[M, N]` with
#' `r[m, n] = sum_k a[m, k] b[n, k]`, i.e. `A %*% t(B)`. Results are f32;
#' f16 and bf16 inputs are accepted.
#'
#' @inheritParams ggml_add
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' A <- matrix(1:6, 3, 2); B <- matrix(1:12, 3, 4)
#' a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), A)
#' b <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4), B)
#' r <- ggml_mul_mat(ctx, a, b)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' matrix(ggml_get_f32(r), 2, 4)
#' t(A) %*% B
#' at <- ggml_cont(ctx, ggml_transpose(ctx, a))   # t(A), [2, 3]
#' bt <- ggml_cont(ctx, ggml_transpose(ctx, b))   # t(B), [4, 3]
#' o <- ggml_out_prod(ctx, at, bt)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, o))
#' matrix(ggml_get_f32(o), 2, 4)                 # t(A) %*% B again
#' ggml_free(ctx)
ggml_mul_mat <- function(ctx, a, b) .op(ctx, "mul_mat", list(a, b))

#' @rdname ggml_mul_mat
#' @export
ggml_out_prod <- function(ctx, a, b) .op(ctx, "out_prod", list(a, b))

#' Reductions
#'
#' `ggml_sum()`: the sum of all elements (one element). `ggml_sum_rows()`,
#' `ggml_mean()`: sums and means along the first dimension (`[1, ne1, ne2, ne3]`).
#' `ggml_argmax()`: for a matrix, the 0-based index of the largest value of
#' each column of the R matrix (each ggml row), an i32 tensor.
#'
#' @param a A `ggml_tensor`.
#' @inheritParams ggml_add
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), c(1, 5, 2, 9, 0, 4))
#' s <- ggml_sum_rows(ctx, a)
#' m <- ggml_argmax(ctx, a)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, s))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, m))
#' ggml_get_f32(s)
#' ggml_get_i32(m)
#' tot <- ggml_sum(ctx, a)
#' avg <- ggml_mean(ctx, a)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, tot))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, avg))
#' c(ggml_get_f32(tot), ggml_get_f32(avg))
#' ggml_free(ctx)
ggml_sum <- function(ctx, a) .op(ctx, "sum", list(a))

#' @rdname ggml_sum
#' @export
ggml_sum_rows <- function(ctx, a) .op(ctx, "sum_rows", list(a))

#' @rdname ggml_sum
#' @export
ggml_mean <- function(ctx, a) .op(ctx, "mean", list(a))

#' @rdname ggml_sum
#' @export
ggml_argmax <- function(ctx, a) .op(ctx, "argmax", list(a))
