#' Backend buffers
#'
#' `ggml_backend_alloc_ctx_tensors()` gives every tensor of `ctx` that has no
#' memory yet a place in ONE new buffer on `backend` (`NULL` when there is
#' nothing to allocate). Freeing the buffer makes its tensors unusable: reading,
#' writing or computing them afterwards is an error.
#'
#' @param ctx A `ggml_context` (usually made with `no_alloc = TRUE`).
#' @param backend A `ggml_backend`.
#' @param buffer A `ggml_backend_buffer`.
#' @return `ggml_backend_alloc_ctx_tensors()`: a `ggml_backend_buffer` or
#'   `NULL`. `ggml_backend_buffer_get_size()`: bytes. `ggml_backend_buffer_free()`:
#'   `NULL`, invisibly.
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_backend_buffer_get_size(buf)
#' ggml_backend_tensor_set_data(a, c(1, 2, 3, 4))
#' ggml_backend_tensor_get_data(a)
#' ggml_backend_buffer_free(buf)
#' ggml_free(ctx)
#' ggml_backend_free(cpu)
ggml_backend_alloc_ctx_tensors <- function(ctx, backend) {
  .check_backend(backend)
  b <- .rs(rs_backend_alloc_ctx_tensors(ctx, backend, "user"))
  if (is.null(b)) return(NULL)
  class(b) <- "ggml_backend_buffer"
  b
}

#' @rdname ggml_backend_alloc_ctx_tensors
#' @export
ggml_backend_buffer_get_size <- function(buffer) .rs(rs_buffer_info(buffer))$size

#' @rdname ggml_backend_alloc_ctx_tensors
#' @export
ggml_backend_buffer_free <- function(buffer) invisible(.rs(rs_buffer_free(buffer)))

#' Tensor data through the backend
#'
#' Copy values into or out of a tensor wherever its memory is, in ggml element
#' order; f16 and bf16 values are converted on the way, i32 tensors read back
#' as integers.
#'
#' @param tensor A `ggml_tensor` with memory (`ggml_backend_tensor_get_data()`
#'   also reads an `ag_tensor`, such as a weight of a Keras-style model, as
#'   f32 elements in column-major order).
#' @param data Numbers to write, starting at `offset`.
#' @param offset Byte offset into the tensor (a multiple of its element size).
#' @param n_elements How many values to read (`NULL`: all from `offset`).
#' @return `ggml_backend_tensor_get_data()`: a numeric (or integer) vector.
#'   `ggml_backend_tensor_set_data()`: the tensor, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 4)
#' ggml_backend_tensor_set_data(a, c(0.1, 0.2, 0.3, 0.4))
#' ggml_backend_tensor_get_data(a)
#' ggml_backend_tensor_get_data(a, offset = 4, n_elements = 2)
#' ggml_free(ctx)
ggml_backend_tensor_set_data <- function(tensor, data, offset = 0) {
  if (!is.numeric(data) && !is.logical(data)) {
    .abort(sprintf("`data` must be numeric, not %s.", class(data)[1L]))
  }
  .rs(rs_tensor_set(tensor, data, .elem_offset(tensor, offset)))
  invisible(tensor)
}

#' @rdname ggml_backend_tensor_set_data
#' @export
ggml_backend_tensor_get_data <- function(tensor, offset = 0, n_elements = NULL) {
  # An autograd tensor (e.g. a weight of a Keras-style model) reads as its
  # values in column-major order, wherever they live.
  if (inherits(tensor, "ag_tensor")) {
    v <- as.vector(.ag_data(tensor))
    from <- offset %/% 4 + 1
    return(v[from:(if (is.null(n_elements)) length(v) else from + n_elements - 1)])
  }
  .rs(rs_tensor_get(tensor, .elem_offset(tensor, offset), n_elements))
}

.elem_offset <- function(tensor, offset, call = sys.call(-1L)) {
  size <- ggml_type_size(.rs(rs_tensor_info(tensor), call = call)$type_code)
  if (!is.numeric(offset) || length(offset) != 1L || is.na(offset) || offset < 0 || offset %% size != 0) {
    .abort(sprintf("`offset` must be a byte offset that is a multiple of the element size (%d).", size),
      call = call)
  }
  offset %/% size
}

#' @export
print.ggml_backend_buffer <- function(x, ...) {
  i <- .rs(rs_buffer_info(x))
  cat(sprintf("<ggml_backend_buffer> #%d %s, %s (%s)%s\n", as.integer(i$id), i$backend,
    .fmt_bytes(i$size), i$tag, if (i$freed) ", freed" else ""))
  invisible(x)
}
