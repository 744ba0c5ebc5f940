# Keras-style layers. Every `ggml_layer_*()` works in two styles: given a
# `ggml_sequential_model` it appends a layer description to `model$layers`;
# given a `ggml_tensor_node` (from ggml_input() or another layer) it returns a
# new node of a functional graph. Layers are descriptions only: weights are
# created by ggml_compile() (see R/nn_build.R) and computed by the autograd
# engine (R/nn_forward.R).

# Counters for node ids, shared-layer ids and automatic names.
.nn_counters <- new.env(parent = emptyenv())
.nn_counters$node <- 0L
.nn_counters$layer <- 0L
.nn_counters$names <- list()

.nn_next_id <- function(what = c("node", "layer")) {
  what <- match.arg(what)
  .nn_counters[[what]] <- .nn_counters[[what]] + 1L
  paste0(what, "_", .nn_counters[[what]])
}

# "dense_1", "dense_2", ...: one counter per type for functional nodes.
.nn_auto_name <- function(type) {
  n <- (.nn_counters$names[[type]] %||% 0L) + 1L
  .nn_counters$names[[type]] <- n
  paste0(type, "_", n)
}

# The next free name of `type` in a sequential model.
.nn_seq_name <- function(model, type) {
  n <- sum(vapply(model$layers, function(l) identical(l$type, type), logical(1L)))
  paste0(type, "_", n + 1L)
}

.nn_int <- function(x, what, len = 1L, min = 1L, call = sys.call(-1L)) {
  ok <- is.numeric(x) && length(x) %in% len && !anyNA(x) && all(abs(x) <= .Machine$integer.max) &&
    all(x == round(x)) && all(x >= min)
  if (!ok) {
    .abort(sprintf("`%s` must be %s whole number%s >= %d, not %s", what,
                   if (identical(len, 1L)) "a" else paste(len, collapse = " or "),
                   if (identical(len, 1L)) "" else "s", min,
                   paste(format(x), collapse = ", ")), call = call)
  }
  as.integer(x)
}

.nn_activations <- c("relu", "sigmoid", "tanh", "softmax", "silu", "gelu",
                     "hardsigmoid", "hardswish", "leaky_relu", "elu", "linear")

.nn_check_activation <- function(activation, call = sys.call(-1L)) {
  if (is.null(activation)) return(NULL)
  if (!is.character(activation) || length(activation) != 1L || !activation %in% .nn_activations) {
    .abort(sprintf("`activation` must be NULL or one of %s, not %s",
                   paste0("\"", .nn_activations, "\"", collapse = ", "),
                   paste(format(activation), collapse = " ")), call = call)
  }
  if (identical(activation, "linear")) NULL else activation
}

.nn_check_padding <- function(padding, call = sys.call(-1L)) {
  if (!is.character(padding) || length(padding) != 1L || !padding %in% c("valid", "same")) {
    .abort("`padding` must be \"valid\" or \"same\"", call = call)
  }
  padding
}

.nn_check_name <- function(name, call = sys.call(-1L)) {
  if (!is.null(name) && !(is.character(name) && length(name) == 1L && !is.na(name) && nzchar(name))) {
    .abort("`name` must be NULL or a non-empty string", call = call)
  }
  name
}

.nn_check_flag <- function(x, what, call = sys.call(-1L)) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    .abort(sprintf("`%s` must be TRUE or FALSE", what), call = call)
  }
  x
}

# Appends a layer to a sequential model, or makes a functional node, from
# `target`; `fn` names the user's function in errors.
.nn_layer <- function(target, type, config, name, trainable, input_shape = NULL,
                      call = sys.call(-1L)) {
  name <- .nn_check_name(name, call = call)
  trainable <- .nn_check_flag(trainable, "trainable", call = call)
  if (inherits(target, "ggml_tensor_node")) {
    if (!is.null(input_shape)) {
      .abort("`input_shape` is for sequential models; a functional graph takes its shape from ggml_input()",
             call = call)
    }
    config$name <- name %||% .nn_auto_name(type)
    return(.nn_node(type, config, list(target), trainable = trainable))
  }
  if (inherits(target, "ggml_sequential_model")) {
    if (isTRUE(target$compiled)) {
      .abort("the model is already compiled: add layers before ggml_compile()", call = call)
    }
    if (!is.null(input_shape)) {
      input_shape <- .nn_int(input_shape, "input_shape", len = 1:3, call = call)
      if (is.null(target$input_shape)) target$input_shape <- input_shape
    }
    layer <- list(type = type, name = name %||% .nn_seq_name(target, type),
                  trainable = trainable, config = config, input_shape = input_shape,
                  output_shape = NULL, weights = list())
    target$layers <- c(target$layers, list(layer))
    return(target)
  }
  .abort(sprintf(paste0("`model` must be a ggml_sequential_model (from ggml_model_sequential()) ",
                        "or a ggml_tensor_node (from ggml_input() or a layer), not %s"),
                 paste(class(target), collapse = "/")), call = call)
}

#' Dense (fully connected) layer
#'
#' `activation(x %*% W + b)` with Glorot-uniform weights and zero bias. In a
#' sequential model the input is flattened first when it has more than one
#' dimension.
#'
#' @param model A `ggml_sequential_model` (the layer is appended) or a
#'   `ggml_tensor_node` (a new node of a functional graph is returned).
#' @param units Number of outputs.
#' @param activation `NULL` (identity) or one of `"relu"`, `"sigmoid"`,
#'   `"tanh"`, `"softmax"`, `"silu"`, `"gelu"`, `"hardsigmoid"`,
#'   `"hardswish"`, `"leaky_relu"`, `"elu"`, `"linear"`.
#' @param input_shape Shape of one sample, for the first layer of a
#'   sequential model.
#' @param name Layer name (default: `"dense_1"`, `"dense_2"`, ...). In a
#'   functional graph, layers with the same name share their weights.
#' @param trainable Whether training updates the layer's weights.
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(16, activation = "relu", input_shape = 4) |>
#'   ggml_layer_dense(3, activation = "softmax")
#' model
#' x <- ggml_input(shape = 4)
#' h <- ggml_layer_dense(x, 8, activation = "relu")
#' h$node_type
ggml_layer_dense <- function(model, units, activation = NULL, input_shape = NULL,
                             name = NULL, trainable = TRUE) {
  cfg <- list(units = .nn_int(units, "units"), activation = .nn_check_activation(activation))
  .nn_layer(model, "dense", cfg, name, trainable, input_shape)
}

#' Convolution layers
#'
#' `ggml_layer_conv_2d()` convolves images `c(H, W, C)` with `filters`
#' kernels of `kernel_size` (Keras `Conv2D`, He-uniform weights);
#' `ggml_layer_conv_1d()` convolves sequences `c(L, C)` (Keras `Conv1D`).
#' `padding = "same"` keeps the spatial size at stride 1.
#'
#' @inheritParams ggml_layer_dense
#' @param filters Number of output channels.
#' @param kernel_size Kernel size: one number, or `c(height, width)`.
#' @param strides Stride: one number, or `c(height, width)`.
#' @param padding `"valid"` (none) or `"same"`.
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_conv_2d(8, c(3, 3), activation = "relu", input_shape = c(28, 28, 1)) |>
#'   ggml_layer_max_pooling_2d(c(2, 2)) |>
#'   ggml_layer_flatten() |>
#'   ggml_layer_dense(10, activation = "softmax")
#' model
#' # sequences of 20 steps with 3 channels
#' ggml_model_sequential() |>
#'   ggml_layer_conv_1d(4, 3, activation = "relu", input_shape = c(20, 3)) |>
#'   ggml_layer_flatten() |>
#'   ggml_layer_dense(2, activation = "softmax")
ggml_layer_conv_2d <- function(model, filters, kernel_size, activation = NULL,
                               input_shape = NULL, strides = c(1L, 1L),
                               padding = "valid", name = NULL, trainable = TRUE) {
  cfg <- list(filters = .nn_int(filters, "filters"),
              kernel_size = rep_len(.nn_int(kernel_size, "kernel_size", len = 1:2), 2L),
              strides = rep_len(.nn_int(strides, "strides", len = 1:2), 2L),
              padding = .nn_check_padding(padding),
              activation = .nn_check_activation(activation))
  .nn_layer(model, "conv_2d", cfg, name, trainable, input_shape)
}

#' @rdname ggml_layer_conv_2d
#' @export
ggml_layer_conv_1d <- function(model, filters, kernel_size, activation = NULL,
                               input_shape = NULL, strides = 1L,
                               padding = "valid", name = NULL, trainable = TRUE) {
  cfg <- list(filters = .nn_int(filters, "filters"),
              kernel_size = .nn_int(kernel_size, "kernel_size"),
              strides = .nn_int(strides, "strides"),
              padding = .nn_check_padding(padding),
              activation = .nn_check_activation(activation))
  .nn_layer(model, "conv_1d", cfg, name, trainable, input_shape)
}

#' Pooling layers
#'
#' `ggml_layer_max_pooling_2d()` takes the maximum over `pool_size` windows
#' of an image `c(H, W, C)`; the global layers reduce each channel over all
#' positions to one value (`c(H, W, C)` to `C`).
#'
#' @inheritParams ggml_layer_dense
#' @param pool_size Window: one number, or `c(height, width)`.
#' @param strides Step between windows (default: `pool_size`).
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' ggml_model_sequential() |>
#'   ggml_layer_conv_2d(4, c(3, 3), input_shape = c(8, 8, 1)) |>
#'   ggml_layer_max_pooling_2d(c(2, 2)) |>
#'   ggml_layer_global_max_pooling_2d()
#' x <- ggml_input(shape = c(8, 8, 4))
#' y <- ggml_layer_global_average_pooling_2d(x)
#' y$node_type
ggml_layer_max_pooling_2d <- function(model, pool_size = c(2L, 2L), strides = NULL,
                                      name = NULL, trainable = TRUE, input_shape = NULL) {
  pool_size <- rep_len(.nn_int(pool_size, "pool_size", len = 1:2), 2L)
  strides <- if (is.null(strides)) pool_size else rep_len(.nn_int(strides, "strides", len = 1:2), 2L)
  .nn_layer(model, "max_pooling_2d", list(pool_size = pool_size, strides = strides), name, trainable,
            input_shape)
}

#' @rdname ggml_layer_max_pooling_2d
#' @export
ggml_layer_global_max_pooling_2d <- function(model, name = NULL, trainable = TRUE, input_shape = NULL) {
  .nn_layer(model, "global_max_pooling_2d", list(), name, trainable, input_shape)
}

#' @rdname ggml_layer_max_pooling_2d
#' @export
ggml_layer_global_average_pooling_2d <- function(model, name = NULL, trainable = TRUE,
                                                 input_shape = NULL) {
  .nn_layer(model, "global_average_pooling_2d", list(), name, trainable, input_shape)
}

#' Flatten layer
#'
#' Turns each sample into one vector (`c(H, W, C)` to `H * W * C`).
#'
#' @inheritParams ggml_layer_dense
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' ggml_model_sequential() |>
#'   ggml_layer_flatten(input_shape = c(4, 4)) |>
#'   ggml_layer_dense(2)
ggml_layer_flatten <- function(model, name = NULL, trainable = TRUE, input_shape = NULL) {
  .nn_layer(model, "flatten", list(), name, trainable, input_shape)
}

#' Dropout layer
#'
#' In training, zeroes each value with probability `rate` and scales the
#' others by `1 / (1 - rate)` (inverted dropout, as Keras), with a new mask for
#' every batch; in evaluation and prediction the layer is the identity.
#'
#' @inheritParams ggml_layer_dense
#' @param rate Drop probability in `[0, 1)`.
#' @param stochastic Kept for compatibility: the mask is always random.
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' ggml_model_sequential() |>
#'   ggml_layer_dense(32, activation = "relu", input_shape = 10) |>
#'   ggml_layer_dropout(0.3) |>
#'   ggml_layer_dense(2, activation = "softmax")
ggml_layer_dropout <- function(model, rate, stochastic = FALSE, name = NULL, trainable = FALSE,
                               input_shape = NULL) {
  if (!is.numeric(rate) || length(rate) != 1L || is.na(rate) || rate < 0 || rate >= 1) {
    .abort(sprintf("`rate` must be a number in [0, 1), not %s", paste(format(rate), collapse = " ")))
  }
  cfg <- list(rate = as.double(rate), stochastic = .nn_check_flag(stochastic, "stochastic"))
  .nn_layer(model, "dropout", cfg, name, trainable, input_shape)
}

#' Batch normalisation layer
#'
#' Normalises each feature (each channel of an image or sequence) with the
#' batch's mean and variance in training, and with running averages of them
#' (`momentum`) in evaluation and prediction; then scales by `gamma` and
#' shifts by `beta`, both learnt (Keras `BatchNormalization`).
#'
#' @inheritParams ggml_layer_dense
#' @param eps Added to the variance.
#' @param momentum Weight of the new batch in the running statistics.
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' ggml_model_sequential() |>
#'   ggml_layer_dense(16, input_shape = 4) |>
#'   ggml_layer_batch_norm() |>
#'   ggml_layer_dense(2, activation = "softmax")
ggml_layer_batch_norm <- function(model, eps = 1e-5, name = NULL, trainable = TRUE, momentum = 0.1,
                                  input_shape = NULL) {
  cfg <- list(eps = .ag_scalar(eps, "eps"), momentum = .ag_scalar(momentum, "momentum"))
  if (cfg$eps <= 0) .abort("`eps` must be positive")
  if (cfg$momentum <= 0 || cfg$momentum > 1) .abort("`momentum` must be in (0, 1]")
  .nn_layer(model, "batch_norm", cfg, name, trainable, input_shape)
}

#' Embedding layer
#'
#' Maps each 0-based integer index in `[0, vocab_size)` to a learnt vector of
#' length `dim`: a sample of `L` indices becomes `c(L, dim)`. Use
#' `ggml_input(shape, dtype = "int32")` for the indices.
#'
#' @inheritParams ggml_layer_dense
#' @param vocab_size Number of distinct indices.
#' @param dim Length of each vector.
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' tokens <- ggml_input(shape = 10, dtype = "int32")
#' out <- tokens |>
#'   ggml_layer_embedding(vocab_size = 100, dim = 8) |>
#'   ggml_layer_flatten() |>
#'   ggml_layer_dense(2, activation = "softmax")
#' ggml_model(tokens, out)
ggml_layer_embedding <- function(model, vocab_size, dim, name = NULL, trainable = TRUE,
                                 input_shape = NULL) {
  cfg <- list(vocab_size = .nn_int(vocab_size, "vocab_size"), dim = .nn_int(dim, "dim"))
  .nn_layer(model, "embedding", cfg, name, trainable, input_shape)
}

#' Recurrent layers
#'
#' `ggml_layer_lstm()` (Keras `LSTM`: gates i, f, g, o; the forget gate's bias
#' starts at 1) and `ggml_layer_gru()` (Keras `GRU` with `reset_after =
#' TRUE`) read a sequence `c(seq_len, features)` and return the last hidden
#' state (`units`) or, with `return_sequences = TRUE`, every hidden state
#' (`c(seq_len, units)`). They are unrolled over time on the autograd engine,
#' so gradients flow through every step.
#'
#' @inheritParams ggml_layer_dense
#' @param units Size of the hidden state.
#' @param return_sequences Return the hidden state of every step.
#' @param activation Activation of the cell candidate (default `"tanh"`).
#' @param recurrent_activation Activation of the gates (default `"sigmoid"`).
#' @return The model with the layer appended, or a `ggml_tensor_node`.
#' @family layers
#' @export
#' @examples
#' ggml_model_sequential() |>
#'   ggml_layer_lstm(16, input_shape = c(10, 3)) |>
#'   ggml_layer_dense(2, activation = "softmax")
#' ggml_model_sequential() |>
#'   ggml_layer_gru(8, return_sequences = TRUE, input_shape = c(10, 3)) |>
#'   ggml_layer_gru(4) |>
#'   ggml_layer_dense(1)
ggml_layer_lstm <- function(model, units, return_sequences = FALSE, activation = "tanh",
                            recurrent_activation = "sigmoid", input_shape = NULL,
                            name = NULL, trainable = TRUE) {
  .nn_layer(model, "lstm", .nn_rnn_config(units, return_sequences, activation,
                                          recurrent_activation),
            name, trainable, input_shape)
}

#' @rdname ggml_layer_lstm
#' @export
ggml_layer_gru <- function(model, units, return_sequences = FALSE, activation = "tanh",
                           recurrent_activation = "sigmoid", input_shape = NULL,
                           name = NULL, trainable = TRUE) {
  .nn_layer(model, "gru", .nn_rnn_config(units, return_sequences, activation,
                                         recurrent_activation),
            name, trainable, input_shape)
}

.nn_rnn_config <- function(units, return_sequences, activation, recurrent_activation,
                           call = sys.call(-1L)) {
  act <- .nn_check_activation(activation, call = call)
  rec <- .nn_check_activation(recurrent_activation, call = call)
  if (is.null(act) || is.null(rec)) {
    .abort("recurrent layers need an `activation` and a `recurrent_activation`", call = call)
  }
  list(units = .nn_int(units, "units", call = call),
       return_sequences = .nn_check_flag(return_sequences, "return_sequences", call = call),
       activation = act, recurrent_activation = rec)
}
