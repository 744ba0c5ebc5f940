#' Engine version.
#' @noRd
rs_version <- function() .Call(wrap__rs_version)

#' Deliberately fails, for tests of the error path: `kind` is "error" or "panic".
#' @noRd
rs_debug_fail <- function(kind) .Call(wrap__rs_debug_fail, kind)

#' @noRd
rs_backend_cpu_init <- function() .Call(wrap__rs_backend_cpu_init)

#' @noRd
rs_backend_name <- function(b) .Call(wrap__rs_backend_name, b)

#' @noRd
rs_backend_free <- function(b) .Call(wrap__rs_backend_free, b)

#' @noRd
rs_backend_is_freed <- function(b) .Call(wrap__rs_backend_is_freed, b)

#' @noRd
rs_backend_dev_count <- function() .Call(wrap__rs_backend_dev_count)

#' @noRd
rs_vulkan_device_count <- function() .Call(wrap__rs_vulkan_device_count)

#' @noRd
rs_vulkan_status <- function() .Call(wrap__rs_vulkan_status)


