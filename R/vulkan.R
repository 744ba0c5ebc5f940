#' Is Vulkan available?
#'
#' `TRUE` when the Vulkan loader is installed and reports at least one device.
#' Without a loader or driver this is `FALSE`, quietly.
#'
#' @return A logical scalar.
#' @seealso [ggml_vulkan_device_count()], [ggml_vulkan_status()]
#' @export
#' @examples
#' ggml_vulkan_available()
ggml_vulkan_available <- function() ggml_vulkan_device_count() > 0L

#' Number of Vulkan devices
#'
#' @return An integer, 0 when Vulkan is not available.
#' @export
#' @examples
#' ggml_vulkan_device_count()
ggml_vulkan_device_count <- function() .rs(rs_vulkan_device_count())

#' Vulkan status
#'
#' Prints whether Vulkan is available and, if so, each device with its type
#' and memory; otherwise why not (no loader, no driver, no device).
#'
#' @return The one-line status, invisibly.
#' @export
#' @examples
#' ggml_vulkan_status()
ggml_vulkan_status <- function() {
  status <- .rs(rs_vulkan_status())
  if (!ggml_vulkan_available()) {
    cat("Vulkan: not available (", status, ")\n", sep = "")
    return(invisible(status))
  }
  devs <- ggml_vulkan_list_devices()
  cat("Vulkan: available,", nrow(devs), "device(s)\n")
  for (i in seq_len(nrow(devs))) {
    cat(sprintf("  [%d] %s (%s, %.2f GB%s)\n", devs$index[i], devs$name[i], devs$type[i],
                devs$memory[i] / 1e9, if (devs$f16[i]) ", f16" else ""))
  }
  invisible(status)
}

.vulkan_device <- function(device) {
  if (!is.numeric(device) || length(device) != 1L || is.na(device) ||
      device < 0 || device != trunc(device)) {
    .abort(
      "`device` must be a single device index (0, 1, ...); see ggml_vulkan_list_devices().",
      call = sys.call(-1L)
    )
  }
  as.integer(device)
}

#' List Vulkan devices
#'
#' @return A data frame with one row per device and columns `index` (0-based,
#'   as used by the other functions), `name`, `type` ("discrete",
#'   "integrated", "virtual", "cpu" or "other"), `driver`, `memory` (bytes of
#'   device-local memory) and `f16` (whether shaders can compute in f16).
#'   No rows when Vulkan is not available.
#' @seealso [ggml_vulkan_device_memory()], [ggml_vulkan_device_caps()]
#' @export
#' @examples
#' ggml_vulkan_list_devices()
ggml_vulkan_list_devices <- function() {
  cols <- .rs(rs_vulkan_list_devices())
  names(cols)[names(cols) == "device_type"] <- "type"
  data.frame(cols, stringsAsFactors = FALSE)
}

#' Vulkan device description
#'
#' @param device Device index, 0-based.
#' @return The device's name, a string.
#' @export
#' @examples
#' if (ggml_vulkan_available()) ggml_vulkan_device_description(0L)
ggml_vulkan_device_description <- function(device = 0L) {
  .rs(rs_vulkan_device_description(.vulkan_device(device)))
}

#' Vulkan device memory
#'
#' Free and total bytes of the device's local memory. Free memory comes from
#' the driver's memory budget (VK_EXT_memory_budget) where it has one, and
#' equals the total otherwise.
#'
#' @inheritParams ggml_vulkan_device_description
#' @return A list with numbers `free` and `total`, in bytes.
#' @export
#' @examples
#' if (ggml_vulkan_available()) ggml_vulkan_device_memory(0L)
ggml_vulkan_device_memory <- function(device = 0L) {
  .rs(rs_vulkan_device_memory(.vulkan_device(device)))
}

#' Vulkan device capabilities
#'
#' @inheritParams ggml_vulkan_device_description
#' @return A named list: `coopmat_support`, `coopmat1_fa_support`, `fp16`,
#'   `bf16`, `integer_dot_product` (logical), `subgroup_size`,
#'   `subgroup_min_size`, `subgroup_max_size` (integer), `subgroup_no_shmem`
#'   (logical), `wavefronts_per_simd` (integer), `arch` (vendor family),
#'   `coopmat_m`, `coopmat_n`, `coopmat_k` (integer),
#'   `supports_256_push_constants` (logical), `max_push_constants_size`
#'   (integer), then the device `type`, `api_version`, `driver`,
#'   `storage_16bit`, `unified_memory` (device memory is host memory),
#'   `memory_budget`, and the limits the engine respects
#'   (`max_memory_allocation_count`, `max_memory_allocation_size`,
#'   `max_storage_buffer_range`, `min_storage_buffer_offset_alignment`,
#'   `max_compute_work_group_count`, `max_compute_work_group_invocations`,
#'   `max_compute_shared_memory_size`).
#' @export
#' @examples
#' if (ggml_vulkan_available()) str(ggml_vulkan_device_caps(0L))
ggml_vulkan_device_caps <- function(device = 0L) {
  caps <- .rs(rs_vulkan_device_caps(.vulkan_device(device)))
  names(caps)[names(caps) == "device_type"] <- "type"
  caps
}
