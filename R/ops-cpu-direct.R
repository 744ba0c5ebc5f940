#' Element-wise sum and product without a graph
#'
#' `ggml_cpu_add()` and `ggml_cpu_mul()` add or multiply the elements of two
#' f32 tensors of as many elements at once, without building or computing a
#' graph, and return the result as an R numeric vector (in ggml order,
#' rounded to f32 as the engine's own `add` and `mul` round it). Both
#' tensors must hold data (a context that allocates, or a backend buffer).
#'
#' @param a,b f32 `ggml_tensor`s with the same number of elements.
#' @return A numeric vector of `ggml_nelements(a)` values.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), 1:4)
#' b <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), c(2, 2, 2, 0.1))
#' ggml_cpu_add(a, b)
#' ggml_cpu_mul(a, b) # 0.4 rounded to f32
#' ggml_free(ctx)
ggml_cpu_add <- function(a, b) .cpu_direct(a, b, `+`)

#' @rdname ggml_cpu_add
#' @export
ggml_cpu_mul <- function(a, b) .cpu_direct(a, b, `*`)

.cpu_direct <- function(a, b, f, call = .user_call()) {
  force(call)
  ia <- .rs(rs_tensor_info(a), call = call)
  ib <- .rs(rs_tensor_info(b), call = call)
  if (ia$type_code != GGML_TYPE_F32 || ib$type_code != GGML_TYPE_F32) {
    .abort("both tensors must be f32 (GGML_TYPE_F32); convert others with ggml_cpy() into an f32 tensor first.",
      call = call)
  }
  if (ia$nelements != ib$nelements) {
    .abort(sprintf("a has %s elements and b %s: they must have as many.",
      format(ia$nelements), format(ib$nelements)), call = call)
  }
  x <- .rs(rs_tensor_get(a, 0, NULL), call = call)
  y <- .rs(rs_tensor_get(b, 0, NULL), call = call)
  # Each value and the exact double result of the f32 operands, rounded once
  # to f32 (a product of two f32 values is exact in double).
  r <- f(as.numeric(x), as.numeric(y))
  readBin(writeBin(r, raw(), size = 4L), "double", n = length(r), size = 4L)
}
