# Devices and registries: what the engine can compute on, and starting
# backends on it.

#' Device types and buffer usages
#'
#' ggml's codes for device types (`GGML_BACKEND_DEVICE_TYPE_*`: a CPU, a
#' discrete GPU, an integrated GPU, an accelerator) and for the usage hint
#' of a buffer (`GGML_BACKEND_BUFFER_USAGE_*`: anything, weights, compute).
#' Vulkan devices are GPUs (integrated ones IGPU), including CPU-based
#' drivers such as lavapipe.
#'
#' @return An integer.
#' @seealso [ggml_backend_dev_type()], [ggml_backend_buffer_set_usage()]
#' @export
#' @examples
#' ggml_backend_device_type_cpu()
#' ggml_backend_device_type_gpu()
#' ggml_backend_device_type_igpu()
#' ggml_backend_device_type_accel()
#' ggml_backend_buffer_usage_any()
#' ggml_backend_buffer_usage_weights()
#' ggml_backend_buffer_usage_compute()
ggml_backend_device_type_cpu <- function() 0L

#' @rdname ggml_backend_device_type_cpu
#' @export
ggml_backend_device_type_gpu <- function() 1L

#' @rdname ggml_backend_device_type_cpu
#' @export
ggml_backend_device_type_igpu <- function() 2L

#' @rdname ggml_backend_device_type_cpu
#' @export
ggml_backend_device_type_accel <- function() 3L

#' @rdname ggml_backend_device_type_cpu
#' @export
ggml_backend_buffer_usage_any <- function() 0L

#' @rdname ggml_backend_device_type_cpu
#' @export
ggml_backend_buffer_usage_weights <- function() 1L

#' @rdname ggml_backend_device_type_cpu
#' @export
ggml_backend_buffer_usage_compute <- function() 2L

.new_device <- function(ptr) {
  if (is.null(ptr)) return(NULL)
  class(ptr) <- "ggml_backend_device"
  ptr
}

.check_device <- function(device, what = "device", call = sys.call(-1L)) {
  .check_handle(device, "ggml_backend_device", what,
                "ggml_backend_dev_get() or ggml_backend_dev_by_type()", call)
}

.index_arg <- function(x, what = "index", call = sys.call(-1L)) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x != trunc(x)) {
    .abort(sprintf("`%s` must be a single whole number (0-based), not %s.", what, .describe_value(x)),
      call = call)
  }
  x
}

#' Devices
#'
#' The devices the engine computes on, as ggml's backend registry lists them:
#' every Vulkan device (`"Vulkan0"`, ...) first, then the CPU (`"CPU"`) last.
#' `ggml_backend_dev_get()` takes a 0-based index, `ggml_backend_dev_by_name()`
#' a name (any case), `ggml_backend_dev_by_type()` a device type; all three
#' return `NULL` when there is no such device.
#'
#' @param index Device index, 0-based.
#' @param name A device name such as `"CPU"` or `"Vulkan0"`.
#' @param type A device type, see [ggml_backend_device_type_cpu()].
#' @return `ggml_backend_dev_count()`: a number. The others: a
#'   `ggml_backend_device`, or `NULL`.
#' @seealso [ggml_backend_dev_name()], [ggml_backend_dev_init()]
#' @export
#' @examples
#' ggml_backend_dev_count()
#' cpu <- ggml_backend_dev_by_type(ggml_backend_device_type_cpu())
#' cpu
#' ggml_backend_dev_get(ggml_backend_dev_count() - 1)
#' ggml_backend_dev_by_name("CPU")
ggml_backend_dev_count <- function() as.numeric(.rs(rs_backend_dev_count()))

#' @rdname ggml_backend_dev_count
#' @export
ggml_backend_dev_get <- function(index) .new_device(.rs(rs_dev_get(.index_arg(index))))

#' @rdname ggml_backend_dev_count
#' @export
ggml_backend_dev_by_name <- function(name) .new_device(.rs(rs_dev_by_name(name)))

#' @rdname ggml_backend_dev_count
#' @export
ggml_backend_dev_by_type <- function(type) .new_device(.rs(rs_dev_by_type(type)))

.dev_info <- function(device, call = sys.call(-1L)) {
  .check_device(device, call = call)
  .rs(rs_dev_info(device), call = call)
}

#' Device properties
#'
#' Name, description (the CPU model or the GPU), free and total memory in
#' bytes (host memory for the CPU, device-local memory for Vulkan devices),
#' device type and all of these at once.
#'
#' @param device A `ggml_backend_device`.
#' @return `ggml_backend_dev_name()`, `ggml_backend_dev_description()`: a
#'   string. `ggml_backend_dev_memory()`: a named numeric vector
#'   `c(free, total)`. `ggml_backend_dev_type()`: an integer device type.
#'   `ggml_backend_dev_get_props()`: a list with `name`, `description`,
#'   `memory_free`, `memory_total`, `type`, `device_id` (the Vulkan device
#'   index, `NULL` for the CPU) and `caps` (logicals `async`, `host_buffer`,
#'   `buffer_from_host_ptr`, `events`).
#' @export
#' @examples
#' d <- ggml_backend_dev_get(0)
#' ggml_backend_dev_name(d)
#' ggml_backend_dev_description(d)
#' ggml_backend_dev_memory(d)
#' ggml_backend_dev_type(d)
#' str(ggml_backend_dev_get_props(d))
ggml_backend_dev_name <- function(device) .dev_info(device)$name

#' @rdname ggml_backend_dev_name
#' @export
ggml_backend_dev_description <- function(device) .dev_info(device)$description

#' @rdname ggml_backend_dev_name
#' @export
ggml_backend_dev_memory <- function(device) {
  i <- .dev_info(device)
  c(free = i$free, total = i$total)
}

#' @rdname ggml_backend_dev_name
#' @export
ggml_backend_dev_type <- function(device) .dev_info(device)$type_code

#' @rdname ggml_backend_dev_name
#' @export
ggml_backend_dev_get_props <- function(device) {
  i <- .dev_info(device)
  list(name = i$name, description = i$description, memory_free = i$free, memory_total = i$total,
       type = i$type_code, device_id = i$device_id,
       caps = list(async = FALSE, host_buffer = identical(i$type_code, 0L),
                   buffer_from_host_ptr = FALSE, events = TRUE))
}

#' @export
print.ggml_backend_device <- function(x, ...) {
  i <- .rs(rs_dev_info(x))
  cat(sprintf("<ggml_backend_device> %s (%s, %s)\n", i$name, i$type_name, i$description))
  invisible(x)
}

#' What a device computes
#'
#' `ggml_backend_dev_supports_op()` says whether the device computes the op
#' of a tensor (a graph node) with the tensor's element types and sizes;
#' the scheduler ([ggml_backend_sched_new()]) places every node on the first
#' backend whose device supports it. `ggml_backend_dev_offload_op()` says
#' whether the device wants such an op even when its weights are in host
#' memory (Vulkan devices, for batches of at least 32). 
#' `ggml_backend_dev_supports_buft()` says whether the device computes on a
#' buffer's memory directly.
#'
#' @param device A `ggml_backend_device`.
#' @param op A `ggml_tensor` (a node).
#' @param buft A `ggml_backend_buffer`.
#' @return A logical.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
#' s <- ggml_add(ctx, a, a)
#' cpu <- ggml_backend_dev_by_type(ggml_backend_device_type_cpu())
#' ggml_backend_dev_supports_op(cpu, s)
#' ggml_backend_dev_offload_op(cpu, s)
#' ctx2 <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
#' ggml_new_tensor_1d(ctx2, GGML_TYPE_F32, 4)
#' b <- ggml_backend_cpu_init()
#' buf <- ggml_backend_alloc_ctx_tensors(ctx2, b)
#' ggml_backend_dev_supports_buft(cpu, buf)
#' ggml_backend_buffer_free(buf)
#' ggml_backend_free(b)
#' ggml_free(ctx2)
#' ggml_free(ctx)
ggml_backend_dev_supports_op <- function(device, op) {
  .check_device(device)
  .rs(rs_dev_supports_op(device, op, FALSE))
}

#' @rdname ggml_backend_dev_supports_op
#' @export
ggml_backend_dev_offload_op <- function(device, op) {
  .check_device(device)
  .rs(rs_dev_supports_op(device, op, TRUE))
}

#' @rdname ggml_backend_dev_supports_op
#' @export
ggml_backend_dev_supports_buft <- function(device, buft) {
  .check_device(device)
  .check_buffer(buft, "buft")
  .rs(rs_dev_supports_buffer(device, buft))
}

#' Start backends
#'
#' `ggml_backend_dev_init()` starts a backend on a device (on a meta device,
#' a meta backend, see [ggml_backend_meta_device()]).
#' `ggml_backend_init_by_name()` starts one on the device, or the first
#' device of the registry, of that name; `ggml_backend_init_by_type()` on
#' the first device of a type. Both return `NULL` when there is none.
#' `ggml_backend_get_device()` is the device a backend runs on.
#'
#' @param device A `ggml_backend_device`.
#' @param params Unused: backends here take no initialisation parameters
#'   (must be `NULL` or a string).
#' @param name A device or registry name (`"CPU"`, `"Vulkan0"`, `"Vulkan"`).
#' @param type A device type, see [ggml_backend_device_type_cpu()].
#' @param backend A `ggml_backend`.
#' @return A `ggml_backend`, or `NULL`; `ggml_backend_get_device()`: a
#'   `ggml_backend_device`.
#' @export
#' @examples
#' b <- ggml_backend_init_by_name("CPU")
#' ggml_backend_get_device(b)
#' ggml_backend_free(b)
#' b <- ggml_backend_dev_init(ggml_backend_dev_by_type(ggml_backend_device_type_cpu()))
#' ggml_backend_free(b)
#' b <- ggml_backend_init_by_type(ggml_backend_device_type_cpu())
#' ggml_backend_free(b)
ggml_backend_dev_init <- function(device, params = NULL) {
  .check_device(device)
  .check_params(params)
  .new_backend(.rs(rs_dev_init(device)))
}

.check_params <- function(params, call = sys.call(-1L)) {
  if (!is.null(params) && !(is.character(params) && length(params) == 1L)) {
    .abort("`params` must be NULL or a string.", call = call)
  }
}

#' @rdname ggml_backend_dev_init
#' @export
ggml_backend_init_by_name <- function(name, params = NULL) {
  .check_params(params)
  b <- .rs(rs_backend_init_by_name(name))
  if (is.null(b)) NULL else .new_backend(b)
}

#' @rdname ggml_backend_dev_init
#' @export
ggml_backend_init_by_type <- function(type, params = NULL) {
  .check_params(params)
  d <- ggml_backend_dev_by_type(type)
  if (is.null(d)) NULL else ggml_backend_dev_init(d)
}

#' @rdname ggml_backend_dev_init
#' @export
ggml_backend_get_device <- function(backend) {
  .check_backend(backend)
  .new_device(.rs(rs_backend_get_device(backend)))
}

#' Backend registries
#'
#' A registry per kind of backend, as ggml has: `"Vulkan"` (when a Vulkan
#' device is present) and `"CPU"`, each listing its devices.
#' `ggml_backend_reg_get()` and `ggml_backend_reg_by_name()` return `NULL`
#' for a registry that does not exist.
#'
#' @param index Registry (or device) index, 0-based.
#' @param name A registry name.
#' @param reg A `ggml_backend_reg`.
#' @return `ggml_backend_reg_count()`, `ggml_backend_reg_dev_count()`: a
#'   number. `ggml_backend_reg_name()`: a string. The others: a
#'   `ggml_backend_reg` or `ggml_backend_device`, or `NULL`.
#' @export
#' @examples
#' ggml_backend_reg_count()
#' ggml_backend_reg_get(ggml_backend_reg_count() - 1)
#' reg <- ggml_backend_reg_by_name("CPU")
#' ggml_backend_reg_name(reg)
#' ggml_backend_reg_dev_count(reg)
#' ggml_backend_reg_dev_get(reg, 0)
ggml_backend_reg_count <- function() as.numeric(length(.rs(rs_reg_names())))

.new_reg <- function(ptr) {
  if (is.null(ptr)) return(NULL)
  class(ptr) <- "ggml_backend_reg"
  ptr
}

.check_reg <- function(reg, call = sys.call(-1L)) {
  .check_handle(reg, "ggml_backend_reg", "reg", "ggml_backend_reg_get()", call)
}

#' @rdname ggml_backend_reg_count
#' @export
ggml_backend_reg_get <- function(index) {
  .index_arg(index)
  names <- .rs(rs_reg_names())
  if (index < 0 || index >= length(names)) return(NULL)
  .new_reg(.rs(rs_reg_get(names[index + 1])))
}

#' @rdname ggml_backend_reg_count
#' @export
ggml_backend_reg_by_name <- function(name) .new_reg(.rs(rs_reg_get(name)))

#' @rdname ggml_backend_reg_count
#' @export
ggml_backend_reg_name <- function(reg) {
  .check_reg(reg)
  .rs(rs_reg_name(reg))
}

#' @rdname ggml_backend_reg_count
#' @export
ggml_backend_reg_dev_count <- function(reg) {
  .check_reg(reg)
  .rs(rs_reg_dev_count(reg))
}

#' @rdname ggml_backend_reg_count
#' @export
ggml_backend_reg_dev_get <- function(reg, index) {
  .check_reg(reg)
  .new_device(.rs(rs_reg_dev_get(reg, .index_arg(index))))
}

#' @export
print.ggml_backend_reg <- function(x, ...) {
  cat(sprintf("<ggml_backend_reg> %s, %d device(s)\n", .rs(rs_reg_name(x)), as.integer(.rs(rs_reg_dev_count(x)))))
  invisible(x)
}

#' Loading and registering backends
#'
#' ggmlR's backends (the CPU and Vulkan, found at run time) are built in:
#' ggml's backend plugins (shared libraries) are not loaded.
#' `ggml_backend_load()` therefore warns and returns `NULL`;
#' `ggml_backend_load_all()` has nothing to load and returns `NULL`
#' invisibly; `ggml_backend_unload()` is an error for a built-in registry.
#' `ggml_backend_register()` accepts the registries there are (they are
#' registered already); `ggml_backend_device_register()` adds a device, such
#' as a meta device, to the list [ggml_backend_dev_get()] reads.
#'
#' @param path Path to a backend plugin.
#' @param reg A `ggml_backend_reg`.
#' @param device A `ggml_backend_device`.
#' @return `NULL` (invisibly, except for `ggml_backend_load()`).
#' @export
#' @examples
#' ggml_backend_load_all()
#' suppressWarnings(ggml_backend_load("/no/such/libggml-plugin.so"))
#' cpu_reg <- ggml_backend_reg_by_name("CPU")
#' ggml_backend_register(cpu_reg)
#' try(ggml_backend_unload(cpu_reg))
#' cpu <- ggml_backend_dev_by_type(ggml_backend_device_type_cpu())
#' meta <- ggml_backend_meta_device(list(cpu, cpu), function(info, n) list(axis = 10L, ne = rep(0, n)))
#' ggml_backend_device_register(meta)
#' ggml_backend_dev_count()
ggml_backend_load <- function(path) {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    .abort("`path` must be a single path to a backend library.")
  }
  why <- if (file.exists(path)) "ggml backend plugins are not loaded: ggmlR's backends are built in"
         else "the file does not exist"
  warning(sprintf("ggml_backend_load(): could not load '%s' (%s)", path, why), call. = FALSE)
  NULL
}

#' @rdname ggml_backend_load
#' @export
ggml_backend_load_all <- function() invisible(NULL)

#' @rdname ggml_backend_load
#' @export
ggml_backend_unload <- function(reg) {
  .check_reg(reg)
  .abort(sprintf("the '%s' registry is built into ggmlR and cannot be unloaded.", .rs(rs_reg_name(reg))))
}

#' @rdname ggml_backend_load
#' @export
ggml_backend_register <- function(reg) {
  .check_reg(reg)
  invisible(NULL)
}

#' @rdname ggml_backend_load
#' @export
ggml_backend_device_register <- function(device) {
  .check_device(device)
  invisible(.rs(rs_dev_register(device)))
}
