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
#' Says what Vulkan discovery found, or why no device is available.
#'
#' @return A string.
#' @export
#' @examples
#' ggml_vulkan_status()
ggml_vulkan_status <- function() .rs(rs_vulkan_status())
