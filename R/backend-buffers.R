# Buffer properties (name, usage, host memory), clearing, and multi-buffers.

# An error unless `x` is of class `cls`; `from` names where such objects
# come from.
.check_handle <- function(x, cls, what, from, call) {
  if (!inherits(x, cls)) {
    .abort(sprintf("`%s` must be a %s (from %s), not %s.", what, cls, from, .describe_value(x)),
           call = call)
  }
  invisible(x)
}

.check_buffer <- function(buffer, what = "buffer", call = sys.call(-1L)) {
  .check_handle(buffer, "ggml_backend_buffer", what, "ggml_backend_alloc_ctx_tensors()", call)
}

.is_multi <- function(buffer) inherits(buffer, "ggml_backend_multi_buffer")

.buffer_props <- function(buffer, call = sys.call(-1L)) {
  .check_buffer(buffer, call = call)
  .rs(rs_buffer_props(buffer, .is_multi(buffer)), call = call)
}

#' Buffer properties and usage
#'
#' `ggml_backend_buffer_name()` is the name of the backend the buffer
#' belongs to (`"CPU"`, `"Vulkan0"`). `ggml_backend_buffer_is_host()` says
#' whether its memory is host memory. The usage is a hint of what the buffer
#' holds (see [ggml_backend_buffer_usage_any()]), kept with the buffer.
#' `ggml_backend_buffer_clear()` sets every byte to `value`;
#' `ggml_backend_buffer_reset()` checks that the buffer is usable (buffers
#' here keep no per-tensor state to reset).
#'
#' @param buffer A `ggml_backend_buffer` (or a multi-buffer).
#' @param usage A usage code.
#' @param value A byte value, 0 to 255.
#' @return `ggml_backend_buffer_name()`: a string;
#'   `ggml_backend_buffer_is_host()`, `ggml_backend_buffer_is_multi_buffer()`:
#'   a logical; `ggml_backend_buffer_get_usage()`: an integer; the others
#'   `NULL`, invisibly.
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_backend_buffer_name(buf)
#' ggml_backend_buffer_is_host(buf)
#' ggml_backend_buffer_is_multi_buffer(buf)
#' ggml_backend_buffer_set_usage(buf, ggml_backend_buffer_usage_weights())
#' ggml_backend_buffer_get_usage(buf)
#' ggml_backend_buffer_clear(buf, 0)
#' ggml_backend_tensor_get_data(a)
#' ggml_backend_buffer_reset(buf)
#' ggml_backend_buffer_free(buf)
#' ggml_free(ctx)
#' ggml_backend_free(cpu)
ggml_backend_buffer_name <- function(buffer) .buffer_props(buffer)$name

#' @rdname ggml_backend_buffer_name
#' @export
ggml_backend_buffer_is_host <- function(buffer) .buffer_props(buffer)$is_host

#' @rdname ggml_backend_buffer_name
#' @export
ggml_backend_buffer_get_usage <- function(buffer) .buffer_props(buffer)$usage

#' @rdname ggml_backend_buffer_name
#' @export
ggml_backend_buffer_set_usage <- function(buffer, usage) {
  .check_buffer(buffer)
  invisible(.rs(rs_buffer_control(buffer, .is_multi(buffer), "usage", usage)))
}

#' @rdname ggml_backend_buffer_name
#' @export
ggml_backend_buffer_clear <- function(buffer, value = 0L) {
  .check_buffer(buffer)
  invisible(.rs(rs_buffer_control(buffer, .is_multi(buffer), "clear", value)))
}

#' @rdname ggml_backend_buffer_name
#' @export
ggml_backend_buffer_reset <- function(buffer) {
  .check_buffer(buffer)
  invisible(.rs(rs_buffer_control(buffer, .is_multi(buffer), "reset", 0L)))
}

#' @rdname ggml_backend_buffer_name
#' @export
ggml_backend_buffer_is_multi_buffer <- function(buffer) {
  .check_buffer(buffer)
  .is_multi(buffer)
}

#' Multi-buffers
#'
#' A multi-buffer handles several buffers as one: its size is theirs
#' together, setting its usage sets theirs, freeing it frees them all.
#'
#' @param buffers A list of `ggml_backend_buffer`s (or one buffer).
#' @param buffer A multi-buffer.
#' @param usage A usage code, see [ggml_backend_buffer_usage_any()].
#' @return `ggml_backend_multi_buffer_alloc_buffer()`: a multi-buffer (a
#'   `ggml_backend_buffer`). `ggml_backend_multi_buffer_set_usage()`:
#'   `NULL`, invisibly.
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' c1 <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
#' c2 <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
#' ggml_new_tensor_1d(c1, GGML_TYPE_F32, 10)
#' ggml_new_tensor_1d(c2, GGML_TYPE_F32, 20)
#' m <- ggml_backend_multi_buffer_alloc_buffer(list(
#'   ggml_backend_alloc_ctx_tensors(c1, cpu), ggml_backend_alloc_ctx_tensors(c2, cpu)))
#' ggml_backend_buffer_is_multi_buffer(m)
#' ggml_backend_multi_buffer_set_usage(m, ggml_backend_buffer_usage_compute())
#' ggml_backend_buffer_get_size(m)
#' ggml_backend_buffer_free(m)
#' ggml_free(c1)
#' ggml_free(c2)
#' ggml_backend_free(cpu)
ggml_backend_multi_buffer_alloc_buffer <- function(buffers) {
  if (inherits(buffers, "ggml_backend_buffer")) buffers <- list(buffers)
  if (!is.list(buffers) || length(buffers) == 0L) {
    .abort("`buffers` must be a non-empty list of ggml_backend_buffer objects.")
  }
  for (i in seq_along(buffers)) .check_buffer(buffers[[i]], sprintf("buffers[[%d]]", i))
  if (any(vapply(buffers, .is_multi, logical(1)))) {
    .abort("`buffers` must hold plain buffers, not multi-buffers.")
  }
  m <- .rs(rs_multi_buffer(buffers))
  class(m) <- c("ggml_backend_multi_buffer", "ggml_backend_buffer")
  m
}

#' @rdname ggml_backend_multi_buffer_alloc_buffer
#' @export
ggml_backend_multi_buffer_set_usage <- function(buffer, usage) {
  if (!.is_multi(buffer)) {
    .abort(sprintf("`buffer` must be a multi-buffer (from ggml_backend_multi_buffer_alloc_buffer()), not %s.",
                   .describe_value(buffer)))
  }
  invisible(.rs(rs_buffer_control(buffer, TRUE, "usage", usage)))
}
