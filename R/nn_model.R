# Sequential models, and what both kinds of model share: layer lookup,
# freezing, the backend a model runs on.

.nn_empty_compilation <- function() {
  list(ctx_weights = NULL, backend = NULL, sched = NULL, buffer = NULL,
       optimizer = NULL, loss = NULL, metrics = NULL)
}

#' Sequential model
#'
#' An empty stack of layers; add layers with the `ggml_layer_*()` functions
#' (the first one gives `input_shape`), then [ggml_compile()], [ggml_fit()],
#' [ggml_evaluate()] and [ggml_predict()].
#'
#' @return A `ggml_sequential_model`.
#' @family models
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(16, activation = "relu", input_shape = 4) |>
#'   ggml_layer_dense(3, activation = "softmax")
#' model
ggml_model_sequential <- function() {
  structure(list(layers = list(), input_shape = NULL, compiled = FALSE,
                 compilation = .nn_empty_compilation()),
            class = c("ggml_sequential_model", "list"))
}

.nn_is_model <- function(x) inherits(x, c("ggml_sequential_model", "ggml_functional_model"))

.nn_check_model <- function(model, call = sys.call(-1L)) {
  if (!.nn_is_model(model)) {
    .abort(sprintf("`model` must be a ggml_sequential_model or a ggml_functional_model, not %s",
                   paste(class(model), collapse = "/")), call = call)
  }
  model
}

#' Find a layer of a sequential model
#'
#' @param model A `ggml_sequential_model`.
#' @param index Position of the layer (1-based).
#' @param name Name of the layer.
#' @return The layer: a list with `type`, `name`, `trainable`, `config`,
#'   `input_shape`, `output_shape` and, once compiled, `weights` (tensors).
#' @family models
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(8, name = "hidden", input_shape = 4) |>
#'   ggml_layer_dense(2)
#' ggml_get_layer(model, name = "hidden")$config$units
#' ggml_get_layer(model, index = 2)$name
ggml_get_layer <- function(model, index = NULL, name = NULL) {
  if (!inherits(model, "ggml_sequential_model")) .abort("`model` must be a ggml_sequential_model")
  if (is.null(index) && is.null(name)) .abort("give either index or name")
  if (!is.null(index) && !is.null(name)) .abort("give either index or name, not both")
  n <- length(model$layers)
  if (!is.null(index)) {
    if (!is.numeric(index) || length(index) != 1L || is.na(index) || index < 1 || index > n ||
        index != round(index)) {
      .abort(sprintf("index %s is out of range: the model has %d layer%s", paste(format(index), collapse = " "),
                     n, if (n == 1L) "" else "s"))
    }
    return(model$layers[[index]])
  }
  names <- vapply(model$layers, function(l) l$name, character(1L))
  i <- match(name, names)
  if (is.na(i)) {
    .abort(sprintf("No layer named \"%s\"; the layers are %s", name,
                   if (n) paste0("\"", names, "\"", collapse = ", ") else "(none)"))
  }
  model$layers[[i]]
}

#' Remove the last layer of a sequential model
#'
#' @param model An uncompiled `ggml_sequential_model`.
#' @return The model without its last layer (and without `input_shape` when
#'   no layer is left).
#' @family models
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(8, input_shape = 4) |>
#'   ggml_layer_dense(2)
#' length(ggml_pop_layer(model)$layers)
ggml_pop_layer <- function(model) {
  if (!inherits(model, "ggml_sequential_model")) .abort("`model` must be a ggml_sequential_model")
  if (length(model$layers) == 0L) .abort("the model has no layers to remove")
  if (isTRUE(model$compiled)) {
    .abort("the model is compiled: remove layers before ggml_compile() (or rebuild the model)")
  }
  model$layers[[length(model$layers)]] <- NULL
  if (length(model$layers) == 0L) model$input_shape <- NULL
  model
}

#' Freeze and unfreeze layers
#'
#' A frozen layer keeps its weights during [ggml_fit()] (batch
#' normalisation still updates its running statistics). For a sequential
#' model give a range of layer positions; for a functional model the names of
#' the layers (default: all).
#'
#' @param model A `ggml_sequential_model` or `ggml_functional_model`.
#' @param from,to First and last layer position (sequential models).
#' @param layers Layer names (functional models; `NULL`: every layer).
#' @param ... Unused.
#' @return The model.
#' @family models
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(8, input_shape = 4) |>
#'   ggml_layer_dense(2)
#' model <- ggml_freeze_weights(model, from = 1, to = 1)
#' vapply(model$layers, function(l) l$trainable, TRUE)
#' model <- ggml_unfreeze_weights(model)
#' vapply(model$layers, function(l) l$trainable, TRUE)
ggml_freeze_weights <- function(model, ...) UseMethod("ggml_freeze_weights")

#' @rdname ggml_freeze_weights
#' @export
ggml_unfreeze_weights <- function(model, ...) UseMethod("ggml_unfreeze_weights")

#' @rdname ggml_freeze_weights
#' @export
ggml_freeze_weights.ggml_sequential_model <- function(model, from = 1L, to = length(model$layers), ...) {
  .nn_set_trainable_seq(model, from, to, FALSE)
}

#' @rdname ggml_freeze_weights
#' @export
ggml_unfreeze_weights.ggml_sequential_model <- function(model, from = 1L, to = length(model$layers), ...) {
  .nn_set_trainable_seq(model, from, to, TRUE)
}

#' @rdname ggml_freeze_weights
#' @export
ggml_freeze_weights.ggml_functional_model <- function(model, layers = NULL, ...) {
  .nn_set_trainable_fn(model, layers, FALSE)
}

#' @rdname ggml_freeze_weights
#' @export
ggml_unfreeze_weights.ggml_functional_model <- function(model, layers = NULL, ...) {
  .nn_set_trainable_fn(model, layers, TRUE)
}

#' @export
ggml_freeze_weights.default <- function(model, ...) .nn_check_model(model)

#' @export
ggml_unfreeze_weights.default <- function(model, ...) .nn_check_model(model)

.nn_set_trainable_seq <- function(model, from, to, value, call = sys.call(-1L)) {
  n <- length(model$layers)
  ok <- function(v) is.numeric(v) && length(v) == 1L && !is.na(v) && v == round(v)
  if (!ok(from) || !ok(to) || from < 1 || to > n || from > to) {
    .abort(sprintf("Invalid range from = %s, to = %s: the model has %d layer%s (1 <= from <= to <= %d)",
                   format(from), format(to), n, if (n == 1L) "" else "s", n), call = call)
  }
  for (i in seq.int(from, to)) model$layers[[i]]$trainable <- value
  model
}

.nn_set_trainable_fn <- function(model, layers, value, call = sys.call(-1L)) {
  nodes <- nn_topo_sort(model$outputs)
  have <- unique(unlist(lapply(nodes, function(n) if (n$node_type != "input") n$config$name)))
  if (is.null(layers)) layers <- have
  if (!is.character(layers)) .abort("`layers` must be NULL or a character vector of layer names", call = call)
  bad <- setdiff(layers, have)
  if (length(bad)) {
    .abort(sprintf("no layer named %s; the layers are %s", paste0("\"", bad, "\"", collapse = ", "),
                   paste0("\"", have, "\"", collapse = ", ")), call = call)
  }
  tr <- model$trainable_override %||% logical(0)
  tr[layers] <- value
  model$trainable_override <- tr
  model
}

#' Where a model computes, and what it learnt
#'
#' `ggml_model_backend()` says where a compiled model computes;
#' `ggml_training_history()` gives its training history as a data frame.
#'
#' @param object A compiled model.
#' @param verbose Return details instead of one string.
#' @param format `"wide"` (one row per epoch) or `"long"` (one row per epoch,
#'   metric and split: columns `epoch`, `metric`, `split` (`"train"` or
#'   `"val"`) and `value`).
#' @param ... Unused.
#' @return `ggml_model_backend()`: `"cpu"` or `"vulkan"`; with `verbose`, a
#'   list: `requested` (the `backend` given to [ggml_compile()]), `used`,
#'   `device` (`"cpu"`, or the Vulkan device's description), `fallback` (a non-CPU backend was
#'   asked for but the CPU is used) and `autograd_device` (`"cpu"`: f64 on
#'   the host, or `"gpu"`: the engine's pools, in f32 on the CPU backend
#'   or Vulkan). `ggml_training_history()`: a data frame, or `NULL` with a
#'   warning before any training.
#' @family models
#' @export
#' @examples
#' model <- ggml_model_sequential() |> ggml_layer_dense(2, input_shape = 3)
#' model <- ggml_compile(model, loss = "mse", backend = "cpu")
#' ggml_model_backend(model)
#' model <- ggml_fit(model, matrix(runif(30), 10), matrix(runif(20), 10), epochs = 2, verbose = 0)
#' ggml_training_history(model, "long")
ggml_model_backend <- function(object, verbose = FALSE) {
  .nn_check_model(object)
  if (!isTRUE(object$compiled)) .abort("the model is not compiled: call ggml_compile() first")
  c <- object$compilation
  if (!isTRUE(verbose)) return(c$backend_used)
  device <- if (identical(c$backend_used, "cpu")) "cpu" else c$device_description
  list(requested = c$backend_requested, used = c$backend_used, device = device,
       fallback = !identical(c$backend_requested, "cpu") && identical(c$backend_used, "cpu"),
       autograd_device = c$device)
}

#' @rdname ggml_model_backend
#' @export
ggml_training_history <- function(object, format = c("wide", "long"), ...) {
  format <- match.arg(format)
  .nn_check_model(object)
  if (is.null(object$history) || !length(object$history$train_loss)) {
    warning("the model has no training history yet (fit it first)", call. = FALSE)
    return(NULL)
  }
  df <- as.data.frame(object$history)
  df <- df[, vapply(df, function(v) !all(is.na(v)), logical(1L)), drop = FALSE]
  if (format == "wide") return(df)
  m <- setdiff(names(df), "epoch")
  # columns are <split>_<metric>: train_loss, val_accuracy, ...
  split <- sub("_.*$", "", m)
  metric <- sub("^[^_]*_", "", m)
  data.frame(epoch = rep(df$epoch, length(m)), metric = rep(metric, each = nrow(df)),
             split = rep(split, each = nrow(df)), value = unlist(df[m], use.names = FALSE))
}

#' A default multi-layer perceptron
#'
#' An uncompiled sequential model: dense hidden layers (each followed by
#' dropout when `dropout > 0`) and an output layer with softmax
#' (`"classif"`) or no activation (`"regr"`).
#'
#' @param n_features Number of inputs.
#' @param n_out Number of outputs (classes, or regression targets).
#' @param task_type `"classif"` or `"regr"`.
#' @param hidden_layers Widths of the hidden layers (`integer(0)`: none).
#' @param activation Activation of the hidden layers.
#' @param dropout Dropout rate after each hidden layer, in `[0, 1)`.
#' @return A `ggml_sequential_model`.
#' @family models
#' @export
#' @examples
#' ggml_default_mlp(n_features = 20, n_out = 3, hidden_layers = c(32, 16))
ggml_default_mlp <- function(n_features, n_out, task_type = c("classif", "regr"),
                             hidden_layers = c(128L, 64L), activation = "relu", dropout = 0.2) {
  task_type <- match.arg(task_type)
  n_features <- .nn_int(n_features, "n_features")
  n_out <- .nn_int(n_out, "n_out")
  if (length(hidden_layers)) hidden_layers <- .nn_int(hidden_layers, "hidden_layers", len = length(hidden_layers))
  if (!is.numeric(dropout) || length(dropout) != 1L || is.na(dropout) || dropout < 0 || dropout >= 1) {
    .abort("`dropout` must be a number in [0, 1)")
  }
  model <- ggml_model_sequential()
  first <- TRUE
  for (u in hidden_layers) {
    model <- ggml_layer_dense(model, u, activation = activation,
                              input_shape = if (first) n_features)
    if (dropout > 0) model <- ggml_layer_dropout(model, dropout)
    first <- FALSE
  }
  ggml_layer_dense(model, n_out, activation = if (task_type == "classif") "softmax",
                   input_shape = if (first) n_features)
}
