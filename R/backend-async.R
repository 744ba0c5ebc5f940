# Events, graph plans, and the asynchronous forms of computing and moving
# data. Every engine call finishes its work before it returns, so the
# asynchronous forms are the synchronous ones and synchronizing is immediate.

#' Asynchronous compute and transfers
#'
#' The engine finishes every computation and transfer before the call
#' returns: the `_async` functions do their work at once, and
#' `ggml_backend_synchronize()` only checks that the backend is usable.
#' Offsets and sizes are in bytes of the tensor's data, except `size` of
#' `ggml_backend_tensor_set_async()`, which counts bytes of `data` (8 per
#' double, 4 per integer; `NULL`: all of it).
#'
#' @param backend,backend_src,backend_dst A `ggml_backend`.
#' @param graph A `ggml_cgraph`.
#' @param tensor,src,dst A `ggml_tensor` with memory.
#' @param data Numbers to write.
#' @param offset Byte offset into the tensor (a multiple of its element size).
#' @param size Bytes (see above).
#' @param n_elements Values to read (`NULL`: all from `offset`).
#' @return `ggml_backend_graph_compute_async()`: `0L` on success.
#'   `ggml_backend_tensor_get_async()`, `ggml_backend_tensor_get_and_sync()`:
#'   the values. `ggml_backend_tensor_get_f32_first()`: the first value. The
#'   others: `NULL`, invisibly.
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' s <- ggml_add(ctx, a, b)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_backend_tensor_set_async(cpu, a, c(1, 2, 3, 4))
#' ggml_backend_tensor_copy_async(cpu, cpu, a, b)
#' ggml_backend_graph_compute_async(cpu, ggml_build_forward_expand(ctx, s))
#' ggml_backend_synchronize(cpu)
#' ggml_backend_tensor_get_async(cpu, s, 0, 16)
#' ggml_backend_tensor_get_and_sync(cpu, s)
#' ggml_backend_tensor_get_f32_first(s)
#' ggml_backend_buffer_free(buf)
#' ggml_free(ctx)
#' ggml_backend_free(cpu)
ggml_backend_graph_compute_async <- function(backend, graph) ggml_backend_graph_compute(backend, graph)

#' @rdname ggml_backend_graph_compute_async
#' @export
ggml_backend_synchronize <- function(backend) {
  .check_backend(backend)
  .rs(rs_backend_name(backend))
  invisible(NULL)
}

#' @rdname ggml_backend_graph_compute_async
#' @export
ggml_backend_tensor_set_async <- function(backend, tensor, data, offset = 0, size = NULL) {
  .check_backend(backend)
  if (!is.numeric(data) && !is.logical(data)) {
    .abort(sprintf("`data` must be numeric, not %s.", .describe_value(data)))
  }
  if (!is.null(size)) {
    per <- if (is.integer(data)) 4 else 8
    if (!is.numeric(size) || length(size) != 1L || is.na(size) || size < 0 || size %% per != 0) {
      .abort(sprintf("`size` must be a number of bytes of `data`, a multiple of %d.", per))
    }
    data <- data[seq_len(min(length(data), size %/% per))]
  }
  ggml_backend_tensor_set_data(tensor, data, offset)
  invisible(NULL)
}

#' @rdname ggml_backend_graph_compute_async
#' @export
ggml_backend_tensor_get_async <- function(backend, tensor, offset = 0, size) {
  .check_backend(backend)
  es <- ggml_element_size(tensor)
  if (!is.numeric(size) || length(size) != 1L || is.na(size) || size < 0 || size %% es != 0) {
    .abort(sprintf("`size` must be a number of bytes, a multiple of the element size (%d).", as.integer(es)))
  }
  ggml_backend_tensor_get_data(tensor, offset, size %/% es)
}

#' @rdname ggml_backend_graph_compute_async
#' @export
ggml_backend_tensor_get_and_sync <- function(backend, tensor, offset = 0, n_elements = NULL) {
  .check_backend(backend)
  ggml_backend_tensor_get_data(tensor, offset, n_elements)
}

#' @rdname ggml_backend_graph_compute_async
#' @export
ggml_backend_tensor_copy_async <- function(backend_src, backend_dst, src, dst) {
  .check_backend(backend_src)
  .check_backend(backend_dst)
  invisible(.rs(rs_tensor_copy(dst, src)))
}

#' @rdname ggml_backend_graph_compute_async
#' @export
ggml_backend_tensor_get_f32_first <- function(tensor) {
  as.numeric(ggml_backend_tensor_get_data(tensor, 0, 1))
}

#' Events
#'
#' An event marks a point in a backend's work that other work can wait for.
#' Here every call finishes its work before returning, so a recorded event
#' is always reached: `ggml_backend_event_synchronize()` and
#' `ggml_backend_event_wait()` return at once (after checking that the event
#' and backend are usable).
#'
#' @param device A `ggml_backend_device`.
#' @param event A `ggml_backend_event`.
#' @param backend A `ggml_backend` on the event's device.
#' @return `ggml_backend_event_new()`: a `ggml_backend_event`. The others:
#'   `NULL`, invisibly.
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' e <- ggml_backend_event_new(ggml_backend_get_device(cpu))
#' ggml_backend_event_record(e, cpu)
#' ggml_backend_event_synchronize(e)
#' ggml_backend_event_wait(cpu, e)
#' ggml_backend_event_free(e)
#' ggml_backend_free(cpu)
ggml_backend_event_new <- function(device) {
  .check_device(device)
  e <- .rs(rs_event_new(device))
  class(e) <- "ggml_backend_event"
  e
}

.check_event <- function(event, call = sys.call(-1L)) {
  .check_handle(event, "ggml_backend_event", "event", "ggml_backend_event_new()", call)
}

#' @rdname ggml_backend_event_new
#' @export
ggml_backend_event_free <- function(event) {
  .check_event(event)
  invisible(NULL)
}

#' @rdname ggml_backend_event_new
#' @export
ggml_backend_event_record <- function(event, backend) {
  .check_event(event)
  .check_backend(backend)
  invisible(.rs(rs_event(event, "record", backend)))
}

#' @rdname ggml_backend_event_new
#' @export
ggml_backend_event_synchronize <- function(event) {
  .check_event(event)
  invisible(.rs(rs_event(event, "synchronize", NULL)))
}

#' @rdname ggml_backend_event_new
#' @export
ggml_backend_event_wait <- function(backend, event) {
  .check_backend(backend)
  .check_event(event)
  invisible(.rs(rs_event(event, "wait", backend)))
}

#' Graph plans
#'
#' A plan is a graph resolved once for one backend (every tensor's memory
#' looked up), to compute again and again; freeing memory the plan uses is
#' still detected when it is computed.
#'
#' @param backend A `ggml_backend`.
#' @param graph A `ggml_cgraph`.
#' @param plan A `ggml_backend_graph_plan`.
#' @return `ggml_backend_graph_plan_create()`: a plan.
#'   `ggml_backend_graph_plan_compute()`: `0L` on success.
#'   `ggml_backend_graph_plan_free()`: `NULL`, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), 1:3)
#' y <- ggml_scale(ctx, a, 2)
#' cpu <- ggml_backend_cpu_init()
#' p <- ggml_backend_graph_plan_create(cpu, ggml_build_forward_expand(ctx, y))
#' ggml_backend_graph_plan_compute(cpu, p)
#' ggml_get_f32(y)
#' ggml_backend_graph_plan_free(cpu, p)
#' ggml_backend_free(cpu)
#' ggml_free(ctx)
ggml_backend_graph_plan_create <- function(backend, graph) {
  .check_backend(backend)
  p <- .rs(rs_graph_plan_create(backend, graph))
  class(p) <- "ggml_backend_graph_plan"
  p
}

#' @rdname ggml_backend_graph_plan_create
#' @export
ggml_backend_graph_plan_free <- function(backend, plan) {
  .check_backend(backend)
  invisible(NULL)
}

#' @rdname ggml_backend_graph_plan_create
#' @export
ggml_backend_graph_plan_compute <- function(backend, plan) {
  .check_backend(backend)
  .rs(rs_graph_plan_compute(backend, plan))
}
