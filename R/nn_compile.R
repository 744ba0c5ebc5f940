# ggml_compile(): check the model, choose where it computes, create its
# weights, record the optimizer and the loss.

#' Compile a model
#'
#' Infers every layer's shape, creates the weights on the model's device and
#' records the optimizer and the loss. Compiling again keeps the weights and
#' starts a new optimizer.
#'
#' Where it computes: `backend = "cpu"` runs on ggml's CPU backend in f32
#' (weights and optimizer moments resident in the persistent pool, as on
#' Vulkan), or with `dtype = "f64"` on the autograd engine's device `"cpu"`
#' in double precision. When a Vulkan GPU holds the engine's pools (device
#' `"gpu"`), `backend = "cpu"` computes in f64 on the host. `"vulkan"` runs
#' on device `"gpu"` with a Vulkan backend; `"auto"` picks Vulkan when a
#' Vulkan device that is not a CPU emulation is present, else the CPU.
#'
#' @param model A `ggml_sequential_model` or `ggml_functional_model`.
#' @param optimizer `"adam"`, `"adamw"` or `"sgd"`, or a function of a named
#'   list of parameters returning an optimizer (e.g.
#'   `function(p) optimizer_adam(p, lr = 0.01)`).
#' @param loss `"categorical_crossentropy"` (one-hot targets; also
#'   `"crossentropy"`, `"cross_entropy"`), `"sparse_categorical_crossentropy"`
#'   (0-based class labels or a factor), `"binary_crossentropy"` (targets in
#'   `[0, 1]`) or `"mse"` (`"mean_squared_error"`).
#' @param metrics Metrics to report: `"accuracy"` (classification losses).
#' @param backend `"auto"`, `"cpu"` or `"vulkan"`.
#' @param learning_rate Learning rate (default: 0.001 for Adam and AdamW,
#'   0.01 for SGD).
#' @param dtype `"f32"` (ggml's precision) or `"f64"` (double precision on
#'   the host; `backend = "cpu"` only).
#' @param ... Unused.
#' @return The compiled model, invisibly.
#' @family training
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(8, activation = "relu", input_shape = 4) |>
#'   ggml_layer_dense(3, activation = "softmax")
#' model <- ggml_compile(model, optimizer = "adam", loss = "categorical_crossentropy",
#'                       backend = "cpu")
#' model$compiled
ggml_compile <- function(model, ...) UseMethod("ggml_compile")

#' @rdname ggml_compile
#' @export
ggml_compile.default <- function(model, ...) {
  .nn_check_model(model)
}

#' @rdname ggml_compile
#' @export
ggml_compile.ggml_sequential_model <- function(model, optimizer = "adam",
                                               loss = "categorical_crossentropy",
                                               metrics = c("accuracy"), backend = "auto",
                                               learning_rate = NULL, dtype = "f32", ...) {
  if (length(model$layers) == 0L) {
    .abort("the model has no layers: add layers (e.g. ggml_layer_dense()) before compiling")
  }
  model <- nn_infer_shapes(model)
  .nn_compile(model, optimizer, loss, metrics, backend, learning_rate, dtype)
}

#' @rdname ggml_compile
#' @export
ggml_compile.ggml_functional_model <- function(model, optimizer = "adam",
                                               loss = "categorical_crossentropy",
                                               metrics = c("accuracy"), backend = "auto",
                                               learning_rate = NULL, dtype = "f32", ...) {
  .nn_compile(model, optimizer, loss, metrics, backend, learning_rate, dtype)
}

.nn_compile <- function(model, optimizer, loss, metrics, backend, learning_rate, dtype = "f32",
                        call = sys.call(-1L)) {
  if (is.character(optimizer)) {
    if (length(optimizer) != 1L || !optimizer %in% c("adam", "adamw", "sgd")) {
      .abort(sprintf("`optimizer` must be \"adam\", \"adamw\" or \"sgd\" (or a function of the parameters), not %s",
                     paste(format(optimizer), collapse = " ")), call = call)
    }
  } else if (!is.function(optimizer)) {
    .abort("`optimizer` must be \"adam\", \"adamw\", \"sgd\" or a function(params) returning an optimizer",
           call = call)
  }
  .nn_loss_kind(loss, call = call)
  if (!is.null(metrics) && (!is.character(metrics) || !all(metrics %in% c("accuracy", "acc")))) {
    .abort("`metrics` must be NULL or \"accuracy\"", call = call)
  }
  if (!is.null(learning_rate)) {
    learning_rate <- .ag_scalar(learning_rate, "learning_rate")
    if (learning_rate <= 0) .abort("`learning_rate` must be positive", call = call)
  }
  place <- .nn_placement(backend, dtype, call = call)
  old <- model$compilation$runtime
  init <- if (!is.null(old) && identical(old$device, place$device)) .nn_weight_values(old)
  model$compilation <- .nn_empty_compilation()
  model$compilation$backend <- place$backend
  model$compilation$sched <- ggml_backend_sched_new(list(place$backend))
  model$compilation$optimizer <- if (is.character(optimizer)) optimizer else "custom"
  model$compilation$optimizer_fn <- if (is.function(optimizer)) optimizer
  model$compilation$learning_rate <- learning_rate
  model$compilation$loss <- loss
  model$compilation$metrics <- metrics
  model$compilation$backend_requested <- backend
  model$compilation$backend_used <- place$used
  model$compilation$device <- place$device
  model$compilation$device_description <- place$description
  model$compiled <- TRUE
  rt <- tryCatch(.nn_runtime(model, place$device, init = init), ggmlR_error = function(e) e)
  if (inherits(rt, "error")) {
    if (inherits(model, "ggml_sequential_model")) stop(rt)
    warning(sprintf("ggml_compile(): the model cannot be built yet, so ggml_fit() and ggml_predict() will fail until it is fixed: %s",
                    conditionMessage(rt)), call. = FALSE)
    rt <- NULL
  }
  if (!is.null(old$bn) && !is.null(rt)) {
    for (k in ls(old$bn)) if (!is.null(rt$bn[[k]])) rt$bn[[k]] <- old$bn[[k]]
  }
  model$compilation$runtime <- rt
  model <- .nn_sync_layers(model)
  .nn_check_loss_output(model, rt, loss, call = call)
  invisible(model)
}

# Where a model computes: the autograd device and the backend object.
.nn_placement <- function(backend, dtype = "f32", call = sys.call(-1L)) {
  if (!is.character(backend) || length(backend) != 1L || !backend %in% c("auto", "cpu", "vulkan", "gpu")) {
    .abort(sprintf("`backend` must be \"auto\", \"cpu\" or \"vulkan\", not %s",
                   paste(format(backend), collapse = " ")), call = call)
  }
  if (!is.character(dtype) || length(dtype) != 1L || !dtype %in% c("f32", "f64")) {
    .abort(sprintf("`dtype` must be \"f32\" or \"f64\", not %s", paste(format(dtype), collapse = " ")),
           call = call)
  }
  gpu_present <- function() {
    devs <- if (ggml_vulkan_available()) ggml_vulkan_list_devices() else NULL
    !is.null(devs) && any(devs$type != "cpu")
  }
  if (backend == "auto") backend <- if (dtype == "f32" && gpu_present()) "vulkan" else "cpu"
  if (backend == "cpu") {
    be <- if (dtype == "f32") .nn_cpu_pools(gpu_present)
    if (!is.null(be)) return(list(device = "gpu", used = "cpu", backend = be, description = "CPU"))
    return(list(device = "cpu", used = "cpu", backend = ggml_backend_cpu_init(), description = "CPU"))
  }
  if (dtype != "f32") {
    .abort("`dtype = \"f64\"` needs backend = \"cpu\": Vulkan computes in f32", call = call)
  }
  if (!ggml_vulkan_available()) {
    .abort(sprintf("backend = \"vulkan\" needs a Vulkan device, and none was found (%s); use backend = \"cpu\"",
                   .rs(rs_vulkan_status())), call = call, class = "ggmlR_vulkan_error")
  }
  be <- .ag_device_state$backend
  live <- !is.null(be) && !isTRUE(tryCatch(.rs(rs_backend_is_freed(be)), error = function(e) TRUE))
  if (!live || !ggml_vulkan_is_backend(be)) {
    be <- ggml_vulkan_init(0L)
    .ag_device_state$backend <- be
  }
  list(device = "gpu", used = "vulkan", backend = be, description = ggml_vulkan_device_description(0L))
}

# The CPU backend that holds the engine's pools (installed when none is
# live and no Vulkan GPU is present), or NULL when a Vulkan backend holds
# them: the model then computes in f64 on the host.
.nn_cpu_pools <- function(gpu_present) {
  be <- .ag_device_state$backend
  live <- !is.null(be) && identical(rs_backend_is_freed(be), FALSE)
  if (live) return(if (grepl("^CPU", ggml_backend_name(be))) be)
  if (gpu_present()) return(NULL)
  be <- ggml_backend_cpu_init()
  .ag_device_state$backend <- be
  be
}

# The runtime of a compiled model (built now when compiling could not).
.nn_runtime_of <- function(model, fn, call = sys.call(-1L)) {
  if (!.nn_is_model(model)) {
    .abort(sprintf("%s(): `model` must be a ggml_sequential_model or a ggml_functional_model, not %s",
                   fn, paste(class(model), collapse = "/")), call = call)
  }
  if (!isTRUE(model$compiled)) {
    .abort(sprintf("%s(): the model must be compiled first: call ggml_compile()", fn), call = call)
  }
  rt <- model$compilation$runtime
  if (identical(model$compilation$device, "gpu") &&
      !identical(model$compilation$backend, .ag_device_state$backend)) {
    .abort(sprintf("%s(): the model was compiled for backend \"%s\", but the engine's pools are now on another backend (%s); call ggml_compile() again",
                   fn, model$compilation$backend_used %||% "?",
                   tryCatch(ggml_backend_name(.ag_device_state$backend), error = function(e) "none")), call = call)
  }
  if (is.null(rt)) {
    rt <- tryCatch(.nn_runtime(model, model$compilation$device),
                   ggmlR_error = function(e) .abort(sprintf("%s(): %s", fn, conditionMessage(e)), call = call))
  }
  rt
}

# Sequential layers carry their weights (the runtime's tensors).
.nn_sync_layers <- function(model) {
  rt <- model$compilation$runtime
  if (!inherits(model, "ggml_sequential_model") || is.null(rt)) return(model)
  for (i in seq_along(model$layers)) {
    w <- rt$weights[[paste0("layer_", i)]]
    if (!is.null(w)) model$layers[[i]]$weights <- w
  }
  model
}

# The trained output and how the loss reads it.
.nn_loss_target <- function(rt, loss) {
  kind <- .nn_loss_kind(loss, call = NULL)
  id <- rt$plan$outputs[length(rt$plan$outputs)]
  st <- .nn_step(rt$plan, id)
  act <- st$config$activation
  fused <- (kind %in% c("ce", "sparse_ce") && identical(act, "softmax") && length(st$out_shape) == 1L) ||
    (kind == "bce" && identical(act, "sigmoid"))
  list(id = id, step = st, k = as.integer(prod(st$out_shape)), kind = if (kind == "sparse_ce") "ce" else kind,
       fused = fused)
}

.nn_check_loss_output <- function(model, rt, loss, call) {
  if (is.null(rt)) return(invisible())
  tg <- .nn_loss_target(rt, loss)
  if (tg$kind == "ce" && tg$k < 2L) {
    .abort(sprintf("loss \"%s\" needs an output with at least 2 units, but \"%s\" has %d; for one sigmoid output use loss = \"binary_crossentropy\"",
                   loss, tg$step$label, tg$k), call = call)
  }
  invisible()
}
