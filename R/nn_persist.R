# Saving and loading models: the architecture, compile settings, weights,
# batch-norm statistics and history, as plain data (R/files.R).

.nn_model_format <- "ggmlR.model"
.nn_weights_format <- "ggmlR.weights"
.nn_model_version <- 1L

# The architecture of a model as plain data.
.nn_architecture <- function(model) {
  if (inherits(model, "ggml_sequential_model")) {
    return(list(kind = "sequential", input_shape = model$input_shape,
                layers = lapply(model$layers, function(l) {
                  list(type = l$type, name = l$name, trainable = isTRUE(l$trainable), config = l$config)
                })))
  }
  nodes <- nn_topo_sort(model$outputs)
  list(kind = "functional",
       nodes = lapply(nodes, function(n) {
         list(id = n$id, node_type = n$node_type, config = n$config,
              parents = vapply(n$parents, function(p) p$id, character(1L)),
              trainable = !isFALSE(n$trainable), layer_id = n$layer_id)
       }),
       inputs = vapply(model$inputs, function(n) n$id, character(1L)),
       outputs = vapply(model$outputs, function(n) n$id, character(1L)),
       trainable_override = model$trainable_override)
}

# A model (uncompiled) from its architecture data, with fresh node ids.
.nn_from_architecture <- function(arch, fn) {
  if (identical(arch$kind, "sequential")) {
    m <- ggml_model_sequential()
    m$input_shape <- as.integer(arch$input_shape)
    m$layers <- lapply(arch$layers, function(l) {
      list(type = l$type, name = l$name, trainable = isTRUE(l$trainable), config = l$config,
           input_shape = NULL, output_shape = NULL, weights = list())
    })
    return(m)
  }
  if (!identical(arch$kind, "functional")) .abort(sprintf("%s(): the file holds an unknown kind of model", fn), call = NULL)
  made <- list()
  layer_ids <- list()
  for (n in arch$nodes) {
    parents <- lapply(n$parents, function(p) {
      if (is.null(made[[p]])) .abort(sprintf("%s(): the file's graph refers to a missing node", fn), call = NULL)
      made[[p]]
    })
    lid <- NULL
    if (!is.null(n$layer_id)) {
      lid <- layer_ids[[n$layer_id]] %||% .nn_next_id("layer")
      layer_ids[[n$layer_id]] <- lid
    }
    made[[n$id]] <- .nn_node(n$node_type, n$config, parents, trainable = isTRUE(n$trainable), layer_id = lid)
  }
  m <- ggml_model(lapply(arch$inputs, function(i) made[[i]]), lapply(arch$outputs, function(i) made[[i]]))
  if (length(arch$trainable_override)) m$trainable_override <- unlist(arch$trainable_override)
  m
}

# Weights in plan order (one entry per key, first use), with their shapes.
.nn_weights_in_order <- function(rt) {
  keys <- unique(unlist(lapply(rt$plan$steps, function(s) s$key)))
  list(keys = keys, weights = lapply(keys, function(k) lapply(rt$weights[[k]], .ag_data)),
       bn = lapply(keys, function(k) rt$bn[[k]]),
       types = vapply(keys, function(k) Filter(function(s) identical(s$key, k), rt$plan$steps)[[1L]]$type, ""))
}

# Installs saved weights (in plan order) into a runtime, checking they fit.
.nn_install_weights <- function(rt, saved, fn, what) {
  mine <- unique(unlist(lapply(rt$plan$steps, function(s) s$key)))
  types <- vapply(mine, function(k) Filter(function(s) identical(s$key, k), rt$plan$steps)[[1L]]$type, "")
  mism <- function(msg) .abort(sprintf("%s(): architecture mismatch between the model and %s: %s", fn, what, msg),
                               call = NULL)
  if (length(mine) != length(saved$weights)) {
    mism(sprintf("the model has %d layers with weights, the file %d", length(mine), length(saved$weights)))
  }
  for (i in seq_along(mine)) {
    if (!identical(unname(types[i]), unname(saved$types[i]))) {
      mism(sprintf("weighted layer %d is %s in the model but %s in the file", i, types[i], saved$types[i]))
    }
    w <- rt$weights[[mine[i]]]
    s <- saved$weights[[i]]
    if (!identical(sort(names(w)), sort(names(s)))) mism(sprintf("weighted layer %d has different weights", i))
    for (nm in names(w)) {
      if (!is.matrix(s[[nm]]) || !identical(as.integer(dim(s[[nm]])), as.integer(w[[nm]]$shape))) {
        mism(sprintf("weight '%s' of layer %d is %s in the model but %s in the file", nm, i,
                     paste(w[[nm]]$shape, collapse = "x"), paste(dim(s[[nm]]) %||% length(s[[nm]]), collapse = "x")))
      }
      if (!is.double(s[[nm]]) || any(!is.finite(s[[nm]]))) mism(sprintf("weight '%s' of layer %d is not finite numbers", nm, i))
    }
  }
  for (i in seq_along(mine)) {
    w <- rt$weights[[mine[i]]]
    for (nm in names(w)) .ag_data_set(w[[nm]], saved$weights[[i]][[nm]])
    b <- saved$bn[[i]]
    if (!is.null(b) && !is.null(rt$bn[[mine[i]]])) rt$bn[[mine[i]]] <- list(mean = b$mean, var = b$var)
  }
  if (identical(rt$device, "gpu")) .nn_make_resident(rt)
  invisible(rt)
}

#' Save and load models and weights
#'
#' `ggml_save_model()` writes the architecture, the compile settings, the
#' weights, batch-norm statistics and the training history;
#' `ggml_load_model()` rebuilds the model, compiled and ready to predict or
#' train on. `ggml_save_weights()` writes the weights only;
#' `ggml_load_weights()` loads them into a compiled model of the same
#' architecture.
#'
#' Files hold plain data (numbers, strings and lists), with a format tag, a
#' version and a checksum: loading never runs code from a file, and a
#' truncated or corrupted file is an error. A save goes to a temporary file
#' that replaces `path` only once it is completely written, so a failed save
#' leaves the previous file intact.
#'
#' @param model A compiled model (any model for `ggml_save_model()`).
#' @param path File path.
#' @param backend Where the loaded model computes (see [ggml_compile()];
#'   `NULL`: as when it was saved).
#' @param ... Unused.
#' @return `ggml_save_model()`, `ggml_save_weights()`: `model`, invisibly.
#'   `ggml_load_model()`: the model. `ggml_load_weights()`: `model` with the
#'   weights.
#' @family persistence
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(4, activation = "relu", input_shape = 3) |>
#'   ggml_layer_dense(2, activation = "softmax") |>
#'   ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
#' f <- tempfile(fileext = ".ggml")
#' ggml_save_model(model, f)
#' model2 <- ggml_load_model(f)
#' x <- matrix(runif(6), 2, 3)
#' all.equal(ggml_predict(model, x), ggml_predict(model2, x))
#' # the weights alone, into a model of the same architecture
#' fw <- tempfile(fileext = ".ggml")
#' ggml_save_weights(model, fw)
#' model3 <- ggml_model_sequential() |>
#'   ggml_layer_dense(4, activation = "relu", input_shape = 3) |>
#'   ggml_layer_dense(2, activation = "softmax") |>
#'   ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
#' model3 <- ggml_load_weights(model3, fw)
#' all.equal(ggml_predict(model, x), ggml_predict(model3, x))
#' unlink(c(f, fw))
ggml_save_model <- function(model, path, ...) UseMethod("ggml_save_model")

#' @rdname ggml_save_model
#' @export
ggml_save_model.default <- function(model, path, ...) {
  .nn_check_model(model)
  value <- list(format = .nn_model_format, version = .nn_model_version,
                architecture = .nn_architecture(model), compiled = isTRUE(model$compiled),
                ggmlR_version = as.character(utils::packageVersion("ggmlR")))
  if (isTRUE(model$compiled)) {
    rt <- .nn_runtime_of(model, "ggml_save_model")
    c <- model$compilation
    value$compilation <- list(optimizer = if (c$optimizer == "custom") "adam" else c$optimizer,
                              loss = c$loss, metrics = c$metrics, learning_rate = c$learning_rate,
                              backend = c$backend_requested)
    value$weights <- .nn_weights_in_order(rt)
  }
  if (!is.null(model$history)) value$history <- unclass(model$history)
  .write_data_file(value, path, "ggml_save_model")
  invisible(model)
}

#' @rdname ggml_save_model
#' @export
ggml_load_model <- function(path, backend = NULL) {
  v <- .read_data_file(path, "ggml_load_model")
  .nn_model_from_data(v, backend, "ggml_load_model", sprintf("'%s'", path))
}

.nn_model_from_data <- function(v, backend, fn, what) {
  if (!is.list(v) || is.null(v$format)) .abort(sprintf("%s(): %s does not hold a ggmlR model", fn, what), call = NULL)
  if (identical(v$format, .nn_weights_format)) {
    .abort(sprintf("%s(): %s holds weights only (written by ggml_save_weights()); build the model and load them with ggml_load_weights(), or save the whole model with ggml_save_model()",
                   fn, what), call = NULL)
  }
  if (!identical(v$format, .nn_model_format)) .abort(sprintf("%s(): %s does not hold a ggmlR model", fn, what), call = NULL)
  if (!identical(v$version, .nn_model_version)) {
    .abort(sprintf("%s(): %s has model format version %s; this ggmlR reads version %d", fn, what,
                   format(v$version), .nn_model_version), call = NULL)
  }
  model <- tryCatch(.nn_from_architecture(v$architecture, fn), ggmlR_error = function(e) {
    .abort(sprintf("%s(): %s holds an architecture that cannot be rebuilt: %s", fn, what, conditionMessage(e)),
           call = NULL)
  })
  if (isTRUE(v$compiled)) {
    c <- v$compilation
    model <- ggml_compile(model, optimizer = c$optimizer, loss = c$loss, metrics = c$metrics,
                          backend = backend %||% c$backend %||% "auto", learning_rate = c$learning_rate)
    rt <- .nn_runtime_of(model, fn)
    .nn_install_weights(rt, v$weights, fn, what)
    model$compilation$runtime <- rt
    model <- .nn_sync_layers(model)
  }
  if (!is.null(v$history)) model$history <- structure(v$history, class = "ggml_history")
  model
}

#' @rdname ggml_save_model
#' @export
ggml_save_weights <- function(model, path) {
  rt <- .nn_runtime_of(model, "ggml_save_weights")
  value <- list(format = .nn_weights_format, version = .nn_model_version,
                weights = .nn_weights_in_order(rt))
  .write_data_file(value, path, "ggml_save_weights")
  invisible(model)
}

#' @rdname ggml_save_model
#' @export
ggml_load_weights <- function(model, path) {
  rt <- .nn_runtime_of(model, "ggml_load_weights")
  v <- .read_data_file(path, "ggml_load_weights")
  what <- sprintf("'%s'", path)
  if (identical(v$format, .nn_model_format) && !is.null(v$weights)) v$format <- .nn_weights_format
  if (!identical(v$format, .nn_weights_format) || is.null(v$weights)) {
    .abort(sprintf("ggml_load_weights(): %s holds no weights", what))
  }
  .nn_install_weights(rt, v$weights, "ggml_load_weights", what)
  model$compilation$runtime <- rt
  .nn_sync_layers(model)
}

#' Marshal a model to bytes and back
#'
#' `ggml_marshal_model()` gives the bytes [ggml_save_model()] would write,
#' in a container that can travel between R sessions (e.g. to parallel
#' workers); `ggml_unmarshal_model()` rebuilds the model from it, checking the
#' container and the checksum.
#'
#' @param model A model.
#' @param x A `ggmlR_marshaled` container.
#' @param backend Where the rebuilt model computes (`NULL`: as saved).
#' @return `ggml_marshal_model()`: a `ggmlR_marshaled` list. `ggml_unmarshal_model()`:
#'   the model.
#' @family persistence
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(2, input_shape = 3) |>
#'   ggml_compile(loss = "mse", backend = "cpu")
#' m <- ggml_marshal_model(model)
#' m
#' model2 <- ggml_unmarshal_model(m)
ggml_marshal_model <- function(model) {
  .nn_check_model(model)
  f <- tempfile(fileext = ".ggml")
  on.exit(unlink(f))
  ggml_save_model(model, f)
  payload <- readBin(f, "raw", n = file.size(f))
  structure(list(format = "ggmlR.marshal", version = 1L,
                 api = if (inherits(model, "ggml_sequential_model")) "sequential" else "functional",
                 backend = model$compilation$backend_used %||% "cpu",
                 ggmlR_version = utils::packageVersion("ggmlR"), R_version = getRversion(),
                 created = Sys.time(), checksum = .md5_raw(payload), payload = payload),
            class = "ggmlR_marshaled")
}

#' @rdname ggml_marshal_model
#' @export
ggml_unmarshal_model <- function(x, backend = NULL) {
  if (!inherits(x, "ggmlR_marshaled") || !identical(x$format, "ggmlR.marshal")) {
    .abort("`x` is not a ggmlR marshaled model (from ggml_marshal_model())")
  }
  if (!identical(x$version, 1L)) .abort(sprintf("unsupported marshal container version %s", format(x$version)))
  if (!is.raw(x$payload) || !length(x$payload)) .abort("the marshaled model has no payload")
  if (!identical(x$checksum, .md5_raw(x$payload))) .abort("the marshaled model is corrupted (checksum mismatch)")
  v <- .read_data_bytes(x$payload, "the marshaled model", "ggml_unmarshal_model")
  .nn_model_from_data(v, backend, "ggml_unmarshal_model", "the marshaled model")
}

#' @export
print.ggmlR_marshaled <- function(x, ...) {
  cat(sprintf("<ggmlR marshaled %s model> %s, backend %s, ggmlR %s, created %s\n", x$api,
              .fmt_bytes(length(x$payload)), x$backend, format(x$ggmlR_version), format(x$created)))
  invisible(x)
}
