# The functional API: symbolic nodes (`ggml_tensor_node`) that record a graph
# of layers, reusable layer objects (`ggml_layer`) applied with ggml_apply(),
# and ggml_model() that closes a graph over its inputs and outputs.

.nn_node <- function(type, config, parents, trainable = TRUE, layer_id = NULL) {
  structure(list(id = .nn_next_id("node"), node_type = type, trainable = trainable,
                 config = config, parents = parents, layer_id = layer_id),
            class = "ggml_tensor_node")
}

#' Input of a functional model
#'
#' A symbolic input holding the shape of one sample (without the batch):
#' a number for feature vectors, `c(seq_len, features)` for sequences,
#' `c(H, W, C)` for images.
#'
#' @param shape Shape of one sample.
#' @param name Input name (default `"input_1"`, `"input_2"`, ...).
#' @param dtype `"float32"`, or `"int32"` for the indices an embedding reads.
#' @return A `ggml_tensor_node`.
#' @family functional
#' @export
#' @examples
#' x <- ggml_input(shape = c(28, 28, 1), name = "image")
#' x
ggml_input <- function(shape, name = NULL, dtype = "float32") {
  shape <- .nn_int(shape, "shape", len = 1:3)
  name <- .nn_check_name(name)
  if (!is.character(dtype) || length(dtype) != 1L || !dtype %in% c("float32", "int32")) {
    .abort(sprintf("`dtype` must be \"float32\" or \"int32\", not %s", paste(format(dtype), collapse = " ")))
  }
  .nn_node("input", list(shape = shape, name = name %||% .nn_auto_name("input"), dtype = dtype),
           list(), trainable = FALSE)
}

#' Functional model
#'
#' Closes a graph of `ggml_tensor_node`s: `inputs` are nodes from
#' [ggml_input()], `outputs` any nodes computed from them. Several inputs
#' take `x` as a list in [ggml_fit()] and [ggml_predict()]; several outputs
#' are all predicted, and the last one is trained.
#'
#' @param inputs A node from [ggml_input()] or a list of them.
#' @param outputs A node or a list of nodes.
#' @return A `ggml_functional_model`.
#' @family functional
#' @export
#' @examples
#' a <- ggml_input(shape = 4)
#' b <- ggml_input(shape = 3)
#' h <- ggml_layer_concatenate(list(ggml_layer_dense(a, 8, activation = "relu"),
#'                                  ggml_layer_dense(b, 8, activation = "relu")))
#' out <- ggml_layer_dense(h, 2, activation = "softmax")
#' model <- ggml_model(inputs = list(a, b), outputs = out)
#' model
ggml_model <- function(inputs, outputs) {
  if (inherits(inputs, "ggml_tensor_node")) inputs <- list(inputs)
  if (inherits(outputs, "ggml_tensor_node")) outputs <- list(outputs)
  is_node <- function(l) is.list(l) && !inherits(l, "ggml_tensor_node") && length(l) > 0L &&
    all(vapply(l, inherits, logical(1L), "ggml_tensor_node"))
  if (!is_node(inputs)) {
    .abort("`inputs` must be a ggml_tensor_node from ggml_input() or a list of them")
  }
  if (!is_node(outputs)) {
    .abort("`outputs` must be a ggml_tensor_node or a list of ggml_tensor_node objects")
  }
  types <- vapply(inputs, function(n) n$node_type, character(1L))
  if (any(types != "input")) {
    i <- which(types != "input")[1L]
    .abort(sprintf("inputs[[%d]] has node_type \"%s\": model inputs must be nodes made by ggml_input()",
                   i, types[i]))
  }
  ids <- vapply(inputs, function(n) n$id, character(1L))
  if (anyDuplicated(ids)) .abort("the same ggml_input() node is listed twice in `inputs`")
  structure(list(inputs = inputs, outputs = outputs, compiled = FALSE,
                 compilation = .nn_empty_compilation()),
            class = c("ggml_functional_model", "list"))
}

.nn_check_nodes <- function(tensors, fn, call = sys.call(-1L)) {
  if (!is.list(tensors) || inherits(tensors, "ggml_tensor_node") || length(tensors) < 2L) {
    .abort(sprintf("`tensors` must be a list of at least 2 ggml_tensor_node objects (%s() merges them)", fn),
           call = call)
  }
  if (!all(vapply(tensors, inherits, logical(1L), "ggml_tensor_node"))) {
    .abort("every element of `tensors` must be a ggml_tensor_node", call = call)
  }
  tensors
}

#' Merge layers: element-wise sum and concatenation
#'
#' `ggml_layer_add()` adds nodes of the same shape (a residual connection);
#' `ggml_layer_concatenate()` joins nodes along `axis`, 0-based over the
#' sample's shape and negative from the end: for feature vectors `0` and `-1`
#' are the features; for sequences `c(L, C)` and images `c(H, W, C)`, `-1`
#' joins channels and `0` joins along the first axis.
#'
#' @param tensors A list of at least two `ggml_tensor_node`s.
#' @param axis Axis to join along.
#' @param name Layer name (default `"add_1"`, `"concatenate_1"`, ...).
#' @return A `ggml_tensor_node`.
#' @family functional
#' @export
#' @examples
#' x <- ggml_input(shape = 8)
#' h <- ggml_layer_dense(x, 8, activation = "relu")
#' r <- ggml_layer_add(list(x, h))
#' r$node_type
#' cat_xh <- ggml_layer_concatenate(list(x, h), axis = -1)
#' cat_xh$node_type
ggml_layer_add <- function(tensors, name = NULL) {
  tensors <- .nn_check_nodes(tensors, "ggml_layer_add")
  name <- .nn_check_name(name)
  .nn_node("add", list(name = name %||% .nn_auto_name("add")), tensors, trainable = FALSE)
}

#' @rdname ggml_layer_add
#' @export
ggml_layer_concatenate <- function(tensors, axis = 0L, name = NULL) {
  tensors <- .nn_check_nodes(tensors, "ggml_layer_concatenate")
  name <- .nn_check_name(name)
  if (!is.numeric(axis) || length(axis) != 1L || is.na(axis) || axis != round(axis)) {
    .abort("`axis` must be a whole number (0-based; negative counts from the end)")
  }
  .nn_node("concatenate", list(axis = as.integer(axis), name = name %||% .nn_auto_name("concatenate")),
           tensors, trainable = FALSE)
}

.nn_layer_object <- function(type, config, name, trainable, call = sys.call(-1L)) {
  name <- .nn_check_name(name, call = call)
  structure(list(layer_id = .nn_next_id("layer"), node_type = type,
                 name = name %||% .nn_auto_name(type), config = config,
                 trainable = .nn_check_flag(trainable, "trainable", call = call)),
            class = "ggml_layer")
}

#' Reusable layer objects
#'
#' `ggml_dense()`, `ggml_batch_norm()`, `ggml_embedding()`, `ggml_lstm()` and
#' `ggml_gru()` make a layer object; [ggml_apply()] applies it to a node.
#' Applying the same object to several nodes shares one set of weights (a
#' Siamese network, a shared encoder).
#'
#' @inheritParams ggml_layer_dense
#' @inheritParams ggml_layer_batch_norm
#' @inheritParams ggml_layer_embedding
#' @inheritParams ggml_layer_lstm
#' @return A `ggml_layer`.
#' @family functional
#' @export
#' @examples
#' enc <- ggml_dense(8, activation = "relu")
#' a <- ggml_input(shape = 4)
#' b <- ggml_input(shape = 4)
#' ha <- ggml_apply(a, enc)
#' hb <- ggml_apply(b, enc)
#' identical(ha$layer_id, hb$layer_id)
#' ggml_batch_norm(eps = 1e-3)
#' ggml_embedding(vocab_size = 100, dim = 8)
#' seq <- ggml_input(shape = c(10, 3))
#' ggml_apply(seq, ggml_lstm(16))$node_type
#' ggml_apply(seq, ggml_gru(16, return_sequences = TRUE))$node_type
ggml_dense <- function(units, activation = NULL, name = NULL, trainable = TRUE) {
  .nn_layer_object("dense", list(units = .nn_int(units, "units"),
                                 activation = .nn_check_activation(activation)), name, trainable)
}

#' @rdname ggml_dense
#' @export
ggml_batch_norm <- function(eps = 1e-5, name = NULL, trainable = TRUE, momentum = 0.1) {
  .nn_layer_object("batch_norm", list(eps = .ag_scalar(eps, "eps"),
                                      momentum = .ag_scalar(momentum, "momentum")), name, trainable)
}

#' @rdname ggml_dense
#' @export
ggml_embedding <- function(vocab_size, dim, name = NULL, trainable = TRUE) {
  .nn_layer_object("embedding", list(vocab_size = .nn_int(vocab_size, "vocab_size"),
                                     dim = .nn_int(dim, "dim")), name, trainable)
}

#' @rdname ggml_dense
#' @export
ggml_lstm <- function(units, return_sequences = FALSE, activation = "tanh",
                      recurrent_activation = "sigmoid", name = NULL, trainable = TRUE) {
  .nn_layer_object("lstm", .nn_rnn_config(units, return_sequences, activation, recurrent_activation),
                   name, trainable)
}

#' @rdname ggml_dense
#' @export
ggml_gru <- function(units, return_sequences = FALSE, activation = "tanh",
                     recurrent_activation = "sigmoid", name = NULL, trainable = TRUE) {
  .nn_layer_object("gru", .nn_rnn_config(units, return_sequences, activation, recurrent_activation),
                   name, trainable)
}

#' Apply a layer object
#'
#' Applies a `ggml_layer` (from [ggml_dense()] and friends) to a node; every
#' application of the same object uses the same weights. Applied to a
#' sequential model, the layer is appended to it.
#'
#' @param tensor A `ggml_tensor_node`, or a `ggml_sequential_model`.
#' @param layer A `ggml_layer`.
#' @return A new `ggml_tensor_node` (or the model with the layer appended).
#' @family functional
#' @export
#' @examples
#' shared <- ggml_dense(3)
#' x <- ggml_input(shape = 4)
#' ggml_apply(x, shared)$layer_id == shared$layer_id
ggml_apply <- function(tensor, layer) {
  if (!inherits(layer, "ggml_layer")) {
    .abort("`layer` must be a ggml_layer object (from ggml_dense(), ggml_lstm(), ...)")
  }
  if (inherits(tensor, "ggml_sequential_model")) {
    return(.nn_layer(tensor, layer$node_type, layer$config, layer$name, layer$trainable))
  }
  if (!inherits(tensor, "ggml_tensor_node")) {
    .abort(sprintf("`tensor` must be a ggml_tensor_node (from ggml_input() or a layer), not %s",
                   paste(class(tensor), collapse = "/")))
  }
  .nn_node(layer$node_type, c(layer$config, list(name = layer$name)), list(tensor),
           trainable = layer$trainable, layer_id = layer$layer_id)
}

#' Nodes of a functional graph in order
#'
#' Every node the `outputs` depend on, each once, parents before children.
#'
#' @param outputs A `ggml_tensor_node` or a list of them (e.g. `model$outputs`).
#' @return A list of `ggml_tensor_node`s.
#' @family functional
#' @export
#' @examples
#' x <- ggml_input(shape = 4)
#' out <- ggml_layer_dense(ggml_layer_dense(x, 8), 2)
#' vapply(nn_topo_sort(out), function(n) n$node_type, "")
nn_topo_sort <- function(outputs) {
  if (inherits(outputs, "ggml_tensor_node")) outputs <- list(outputs)
  if (!is.list(outputs) || !all(vapply(outputs, inherits, TRUE, "ggml_tensor_node"))) {
    .abort("`outputs` must be a ggml_tensor_node (from ggml_input() or a layer) or a list of them")
  }
  seen <- new.env(parent = emptyenv())
  ordered <- list()
  # Iterative depth-first walk: deep residual stacks do not grow R's stack.
  for (out in outputs) {
    stack <- list(list(node = out, done = FALSE))
    while (length(stack)) {
      top <- stack[[length(stack)]]
      stack[[length(stack)]] <- NULL
      id <- top$node$id
      if (top$done) {
        ordered[[length(ordered) + 1L]] <- top$node
        next
      }
      if (!is.null(seen[[id]])) next
      seen[[id]] <- TRUE
      stack[[length(stack) + 1L]] <- list(node = top$node, done = TRUE)
      for (p in rev(top$node$parents)) {
        if (is.null(seen[[p$id]])) stack[[length(stack) + 1L]] <- list(node = p, done = FALSE)
      }
    }
  }
  ordered
}

#' @export
print.ggml_tensor_node <- function(x, ...) {
  parents <- vapply(x$parents, function(p) p$config$name %||% p$id, character(1L))
  cat(sprintf("<ggml_tensor_node> %s \"%s\"%s\n", x$node_type, x$config$name %||% x$id,
              if (length(parents)) paste0(" <- ", paste(parents, collapse = ", ")) else
                sprintf(" shape (%s), %s", paste(x$config$shape, collapse = ", "), x$config$dtype)))
  invisible(x)
}

#' @export
print.ggml_layer <- function(x, ...) {
  cfg <- x$config[!vapply(x$config, is.null, logical(1L))]
  cat(sprintf("<ggml_layer> %s \"%s\" (%s)%s\n", x$node_type, x$name,
              paste(names(cfg), vapply(cfg, function(v) paste(format(v), collapse = "x"), ""),
                    sep = " = ", collapse = ", "),
              if (isTRUE(x$trainable)) "" else ", frozen"))
  invisible(x)
}
