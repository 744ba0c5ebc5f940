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
#' computed graph (the whole graph is one command buffer), plus one per
#' staged upload or download on devices whose memory the host cannot map.
#' Useful to check that a graph ran as a single submission.
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
#' Returns a backend on the best Vulkan GPU (discrete, then integrated, then
#' virtual), or the CPU backend when there is none or it cannot be started. A
#' message says which backend was chosen and why.
#'
#' A CPU-type Vulkan device (a software implementation such as llvmpipe /
#' lavapipe, which many servers and CI machines have) runs shaders on the
#' host, far slower than the CPU backend, so it is never chosen here by
#' itself: use it by index with [ggml_vulkan_init()], or set the environment
#' variable `GGMLR_VULKAN_CPU_DEVICE=1` to let this function (and
#' `ag_device("gpu")`) take it when there is no GPU.
#'
#' @return A `ggml_backend` object.
#' @export
#' @examples
#' b <- ggml_backend_init_best()
#' ggml_backend_free(b)
ggml_backend_init_best <- function() {
  best <- .rs(rs_vulkan_best_device())
  devs <- if (best$index >= 0L || best$cpu_device >= 0L) ggml_vulkan_list_devices() else NULL
  label <- function(i) sprintf("Vulkan device %d, %s (%s)", i, devs$name[devs$index == i], devs$type[devs$index == i])
  if (best$index >= 0L) {
    vk <- tryCatch(ggml_vulkan_init(best$index), ggmlR_error = function(e) e)
    if (inherits(vk, "ggml_backend")) {
      why <- if (devs$type[devs$index == best$index] == "cpu") {
        sprintf(": a CPU-type device, used because %s is set", best$env)
      } else ""
      message(sprintf("ggml_backend_init_best(): using %s%s", label(best$index), why))
      return(vk)
    }
    message(sprintf("ggml_backend_init_best(): %s failed (%s); using the CPU backend",
                    label(best$index), conditionMessage(vk)))
  } else if (best$cpu_device >= 0L) {
    message(sprintf(paste0(
      "ggml_backend_init_best(): using the CPU backend; the only Vulkan device is %s, ",
      "a software device slower than the CPU backend (ggml_vulkan_init(%d) or %s=1 uses it)"),
      label(best$cpu_device), best$cpu_device, best$env))
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
