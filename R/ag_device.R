# Default device and precision of new tensors.
#
# Device "cpu" computes in double precision on the host. Device "gpu" runs
# ops as ggml graphs on the residency backend (.ag_device_state$backend: the
# best backend, a Vulkan GPU when present, else the CPU backend) in f32, with
# weights resident in the persistent pool and activations in the pass pool
# (see src/rust/core/src/autograd/device.rs).

# Shared device state. The residency layer adds its fields (backend, pools,
# generations, budget) to this environment.
.ag_device_state <- new.env(parent = emptyenv())
.ag_device_state$device <- "cpu"
.ag_device_state$dtype  <- "f32"

.ag_devices <- c("cpu", "gpu")
.ag_dtypes  <- c("f32", "f16", "bf16")

.ag_check_device <- function(device, call = sys.call(-1L)) {
  if (!is.character(device) || length(device) != 1L || !device %in% .ag_devices) {
    .abort(sprintf("`device` must be \"cpu\" or \"gpu\", not %s",
                   paste(deparse(device), collapse = "")), call = call)
  }
  device
}

.ag_check_dtype <- function(dtype, call = sys.call(-1L)) {
  if (!is.character(dtype) || length(dtype) != 1L || !dtype %in% .ag_dtypes) {
    .abort(sprintf("`dtype` must be one of \"f32\", \"f16\", \"bf16\", not %s",
                   paste(deparse(dtype), collapse = "")), call = call)
  }
  dtype
}

#' Default device and precision
#'
#' `ag_device()` sets the device of tensors created afterwards: `"cpu"`
#' (double precision on the host) or `"gpu"` (the backend of
#' [ggml_backend_init_best()]: a Vulkan GPU when there is one, else the CPU
#' backend in f32; a CPU-type Vulkan device such as lavapipe only with the
#' environment variable `GGMLR_VULKAN_CPU_DEVICE=1`). `ag_dtype()` sets the precision used on a
#' device (`"f32"`, `"f16"`, `"bf16"`); device `"cpu"` always computes in
#' double precision. On `"gpu"` each op runs as a ggml graph on that backend in
#' f32; parameters are uploaded once into the persistent pool (stored in f16
#' with `ag_dtype("f16")`, in bf16 with `ag_dtype("bf16")`) and updated there in
#' place.
#'
#' @param device `"cpu"` or `"gpu"`.
#' @param dtype `"f32"`, `"f16"` or `"bf16"`.
#' @return `ag_device()` and `ag_dtype()` return the previous setting
#'   invisibly; `ag_default_device()` and `ag_default_dtype()` the current one.
#' @name ag_device
#' @examples
#' old <- ag_device("cpu")
#' ag_default_device()
#' ag_device(old)
#' old_dtype <- ag_dtype("f16")
#' ag_default_dtype()
#' ag_dtype(old_dtype)
NULL

#' @rdname ag_device
#' @export
ag_device <- function(device) {
  device <- .ag_check_device(device)
  prev <- .ag_device_state$device
  if (identical(device, "gpu")) .ag_device_ready()
  .ag_device_state$device <- device
  invisible(prev)
}

# Installs the best backend for the residency pools unless a live one is.
.ag_device_ready <- function(call = sys.call(-1L)) {
  be <- .ag_device_state$backend
  # FALSE from a live backend; TRUE, or the error value of a handle that is
  # not a backend, makes a new one (no tryCatch: this runs per op on "gpu").
  if (!is.null(be) && identical(rs_backend_is_freed(be), FALSE)) {
    return(invisible(be))
  }
  init <- get0("ggml_backend_init_best", envir = topenv(), inherits = FALSE)
  be <- if (is.function(init)) init() else ggml_backend_cpu_init()
  .ag_device_state$backend <- be
  invisible(be)
}

# Uploads a parameter on "gpu" once into the persistent pool (as f16 or bf16 when its
# dtype says so, else f32); its value is then updated there in place (the R
# fields point at that memory).
.ag_make_resident <- function(t) {
  ptr <- .new_tensor(.rs(rs_ag_to_device(t$.h, "persistent", t$dtype %||% "f32")))
  .ag_data_set_handle(t, .ag_handle(ptr, t$shape, "persistent"))
}

#' @rdname ag_device
#' @export
ag_default_device <- function() .ag_device_state$device

#' @rdname ag_device
#' @export
ag_dtype <- function(dtype) {
  dtype <- .ag_check_dtype(dtype)
  prev <- .ag_device_state$dtype
  .ag_device_state$dtype <- dtype
  invisible(prev)
}

#' @rdname ag_device
#' @export
ag_default_dtype <- function() .ag_device_state$dtype

#' Copy a tensor to a device
#'
#' @param tensor An `ag_tensor`.
#' @param device `"cpu"` or `"gpu"`.
#' @return `tensor` itself when it is already there, else a new tensor with
#'   the same value and `requires_grad`.
#' @export
#' @examples
#' x <- ag_tensor(1:3)
#' ag_to_device(x, "gpu")$device
ag_to_device <- function(tensor, device) {
  if (!is_ag_tensor(tensor)) .abort("`tensor` must be an ag_tensor")
  device <- .ag_check_device(device)
  if (identical(tensor$device, device)) return(tensor)
  out <- ag_tensor(.ag_data(tensor), device = device, dtype = tensor$dtype)
  out$requires_grad <- isTRUE(tensor$requires_grad)
  out
}
