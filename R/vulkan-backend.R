#' A Vulkan backend
#'
#' Creates a compute backend on Vulkan device `device`. Every backend on the
#' same device shares one device context (created on first use, released when
#' the last backend and buffer using it are gone). Tensors computed on it must
#' live in buffers allocated on it with [ggml_backend_alloc_ctx_tensors()].
#'
#' @param device The device index (0-based), see [ggml_vulkan_list_devices()].
#' @return A `ggml_backend` object named `"Vulkan<device>"`.
#' @seealso [ggml_vulkan_free()], [ggml_backend_init_best()],
#'   [ggml_vulkan_submission_count()]
#' @export
#' @examples
#' if (ggml_vulkan_available()) {
#'   vk <- ggml_vulkan_init(0)
#'   print(vk)
#'   ggml_vulkan_free(vk)
#' }
ggml_vulkan_init <- function(device = 0L) {
  device <- .vulkan_device(device)
  if (device >= ggml_vulkan_device_count()) {
    .abort(sprintf(
      "Vulkan device %d does not exist: %d device(s) found (%s). Use ggml_backend_cpu_init() instead.",
      device, ggml_vulkan_device_count(), .rs(rs_vulkan_status())
    ), class = "ggmlR_vulkan_error")
  }
  .new_backend(.rs(rs_vulkan_init(device)))
}

#' Free a Vulkan backend
#'
#' @param backend A backend from [ggml_vulkan_init()].
#' @return `NULL`, invisibly.
#' @export
#' @examples
#' if (ggml_vulkan_available()) ggml_vulkan_free(ggml_vulkan_init())
ggml_vulkan_free <- function(backend) {
  .check_vulkan_backend(backend)
  ggml_backend_free(backend)
}

#' Is this a Vulkan backend?
#'
#' @param backend Any R object.
#' @return `TRUE` for a backend made by [ggml_vulkan_init()], else `FALSE`.
#' @export
#' @examples
#' ggml_vulkan_is_backend(ggml_backend_cpu_init())
ggml_vulkan_is_backend <- function(backend) {
  inherits(backend, "ggml_backend") && isTRUE(.rs(rs_vulkan_is_backend(backend)))
}

#' Name of a Vulkan backend
#'
#' @inheritParams ggml_vulkan_free
#' @return The backend's name, such as `"Vulkan0"`.
#' @export
#' @examples
#' if (ggml_vulkan_available()) ggml_vulkan_backend_name(ggml_vulkan_init())
ggml_vulkan_backend_name <- function(backend) {
  .check_vulkan_backend(backend)
  ggml_backend_name(backend)
}

#' Queue submissions of a Vulkan backend's device
#'
#' Counts the queue submissions made on the backend's device so far: one per
#' computed graph (the whole graph is one command buffer) when it is short,
#' one per slice of about 0.2 seconds of device work when it is long (so that
#' Ctrl-C can stop it between slices), plus one per staged upload or download
#' on devices whose memory the host cannot map. Useful to check that a graph
#' ran as a single submission.
#'
#' @inheritParams ggml_vulkan_free
#' @return A number.
#' @seealso [ggml_vulkan_backend_stats()]
#' @export
#' @examples
#' if (ggml_vulkan_available()) ggml_vulkan_submission_count(ggml_vulkan_init())
ggml_vulkan_submission_count <- function(backend) {
  ggml_vulkan_backend_stats(backend)$submissions
}

#' Statistics of a Vulkan backend's device
#'
#' @inheritParams ggml_vulkan_free
#' @return A list: `device` (index), `name`, `device_type`, `submissions`
#'   (queue submissions so far), `barriers` (pipeline barriers recorded),
#'   `pipelines` (compute pipelines created and cached), `memory_blocks`
#'   (device memory blocks held), `memory_free` and `memory_total` (bytes).
#' @export
#' @examples
#' if (ggml_vulkan_available()) str(ggml_vulkan_backend_stats(ggml_vulkan_init()))
ggml_vulkan_backend_stats <- function(backend) {
  .check_vulkan_backend(backend)
  .rs(rs_vulkan_backend_stats(backend))
}

#' The best available backend
#'
#' Returns a backend on the best Vulkan device (discrete GPU, then integrated,
#' virtual, then CPU-type devices such as lavapipe), or the CPU backend when
#' there is no Vulkan device or it cannot be started. A message says which.
#'
#' @return A `ggml_backend` object.
#' @export
#' @examples
#' b <- ggml_backend_init_best()
#' ggml_backend_free(b)
ggml_backend_init_best <- function() {
  best <- .rs(rs_vulkan_best_device())
  if (best >= 0L) {
    vk <- tryCatch(ggml_vulkan_init(best), ggmlR_error = function(e) e)
    if (inherits(vk, "ggml_backend")) {
      devs <- ggml_vulkan_list_devices()
      message(sprintf("ggml_backend_init_best(): using Vulkan device %d, %s (%s)",
                      best, devs$name[devs$index == best], devs$type[devs$index == best]))
      return(vk)
    }
    message(sprintf("ggml_backend_init_best(): Vulkan device %d failed (%s); using the CPU backend",
                    best, conditionMessage(vk)))
  } else {
    message("ggml_backend_init_best(): no Vulkan device; using the CPU backend")
  }
  ggml_backend_cpu_init()
}

.check_vulkan_backend <- function(backend, call = sys.call(-1L)) {
  if (!ggml_vulkan_is_backend(backend)) {
    .abort(sprintf(
      "`backend` must be a Vulkan backend from ggml_vulkan_init(), not %s.",
      if (inherits(backend, "ggml_backend")) sprintf("the '%s' backend", .rs(rs_backend_name(backend)))
      else class(backend)[1L]
    ), call = call)
  }
  invisible(backend)
}
