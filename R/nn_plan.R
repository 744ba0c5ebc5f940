# The plan of a model: its layers as steps in topological order, each with
# the ids of its inputs, its per-sample input and output shapes and the key of
# the weights it uses (steps with one key share weights). Sequential and
# functional models become the same kind of plan, so one forward pass
# (R/nn_forward.R) runs both.

.nn_shape_str <- function(s) paste0("[", paste(s, collapse = ", "), "]")

# The output shape of a layer of `type` with `config` on inputs `shapes`
# (a list of per-sample shapes); errors name the layer and the shapes.
.nn_out_shape <- function(type, config, shapes, label) {
  s <- if (length(shapes)) shapes[[1L]]
  need <- function(d, what) {
    if (length(s) != d) {
      .abort(sprintf("layer \"%s\" (%s) needs %s input but got shape %s", label, type, what,
                     .nn_shape_str(s)), call = NULL)
    }
  }
  conv_len <- function(n, k, st, pad) {
    o <- if (pad == "same") ceiling(n / st) else floor((n - k) / st) + 1
    if (o < 1) {
      .abort(sprintf("layer \"%s\" (%s): kernel %d does not fit an input of size %d", label, type, k, n),
             call = NULL)
    }
    as.integer(o)
  }
  switch(type,
    input = config$shape,
    dense = config$units,
    flatten = as.integer(prod(s)),
    batch_norm = , dropout = s,
    conv_2d = {
      need(3L, "an image c(H, W, C)")
      c(conv_len(s[1], config$kernel_size[1], config$strides[1], config$padding),
        conv_len(s[2], config$kernel_size[2], config$strides[2], config$padding), config$filters)
    },
    conv_1d = {
      need(2L, "a sequence c(L, C)")
      c(conv_len(s[1], config$kernel_size, config$strides, config$padding), config$filters)
    },
    max_pooling_2d = {
      need(3L, "an image c(H, W, C)")
      c(conv_len(s[1], config$pool_size[1], config$strides[1], "valid"),
        conv_len(s[2], config$pool_size[2], config$strides[2], "valid"), s[3])
    },
    global_max_pooling_2d = , global_average_pooling_2d = {
      need(3L, "an image c(H, W, C)")
      s[3]
    },
    embedding = c(as.integer(prod(s)), config$dim),
    lstm = , gru = {
      need(2L, "a sequence c(seq_len, features)")
      if (isTRUE(config$return_sequences)) c(s[1], config$units) else config$units
    },
    add = {
      for (i in seq_along(shapes)[-1L]) {
        if (!identical(as.integer(shapes[[i]]), as.integer(s))) {
          .abort(sprintf("%s (ggml_layer_add): shape mismatch -- input 1 has shape %s but input %d has shape %s",
                         label, .nn_shape_str(s), i, .nn_shape_str(shapes[[i]])), call = NULL)
        }
      }
      s
    },
    concatenate = {
      nd <- length(s)
      ax <- .nn_concat_axis(config$axis, nd, label)
      for (i in seq_along(shapes)[-1L]) {
        o <- shapes[[i]]
        if (length(o) != nd || !identical(as.integer(o[-ax]), as.integer(s[-ax]))) {
          .abort(sprintf("%s (ggml_layer_concatenate): shape mismatch along axis %d -- input 1 has shape %s but input %d has shape %s",
                         label, config$axis, .nn_shape_str(s), i, .nn_shape_str(o)), call = NULL)
        }
      }
      out <- s
      out[ax] <- sum(vapply(shapes, function(o) o[ax], numeric(1L)))
      as.integer(out)
    },
    .abort(sprintf("unknown layer type \"%s\"", type), call = NULL)
  )
}

# The 1-based position of a 0-based (or negative) axis over `nd` dimensions.
.nn_concat_axis <- function(axis, nd, label) {
  a <- if (axis < 0L) nd + axis else axis
  if (a < 0L || a >= nd) {
    .abort(sprintf("%s (ggml_layer_concatenate): axis %d is out of range for inputs with %d dimension%s (valid: %d to %d)",
                   label, axis, nd, if (nd == 1L) "" else "s", -nd, nd - 1L), call = NULL)
  }
  a + 1L
}

#' Infer the shapes of a sequential model (internal)
#'
#' Fills `input_shape` and `output_shape` of every layer from the model's
#' `input_shape`.
#' @param model A `ggml_sequential_model`.
#' @return The model.
#' @keywords internal
#' @noRd
nn_infer_shapes <- function(model) {
  if (is.null(model$input_shape)) {
    .abort(paste0("the model has no input_shape: give `input_shape` to its first layer ",
                  "(e.g. ggml_layer_dense(16, input_shape = 4)) or set model$input_shape"))
  }
  model$input_shape <- .nn_int(model$input_shape, "input_shape", len = 1:3)
  s <- model$input_shape
  for (i in seq_along(model$layers)) {
    l <- model$layers[[i]]
    l$input_shape <- s
    s <- as.integer(.nn_out_shape(l$type, l$config, list(s), l$name))
    l$output_shape <- s
    model$layers[[i]] <- l
  }
  model
}

# The plan of a sequential model (shapes already inferred).
.nn_plan_seq <- function(model) {
  steps <- list(list(id = "input", type = "input", config = list(shape = model$input_shape,
                                                                 dtype = model$input_dtype %||% "float32",
                                                                 name = "input"),
                     parents = character(0), key = NULL, label = "input", trainable = FALSE,
                     in_shapes = list(), out_shape = model$input_shape, layer_index = NA_integer_))
  prev <- "input"
  for (i in seq_along(model$layers)) {
    l <- model$layers[[i]]
    id <- paste0("layer_", i)
    steps[[length(steps) + 1L]] <- list(
      id = id, type = l$type, config = l$config, parents = prev,
      key = if (l$type %in% .nn_weighted_types) paste0("layer_", i),
      label = l$name, trainable = isTRUE(l$trainable), in_shapes = list(l$input_shape),
      out_shape = l$output_shape, layer_index = i)
    prev <- id
  }
  if (any(vapply(model$layers, function(l) l$type == "embedding", logical(1L)))) {
    if (model$layers[[1L]]$type == "embedding") steps[[1L]]$config$dtype <- "int32"
  }
  list(steps = steps, inputs = "input", outputs = prev, kind = "sequential")
}

# The plan of a functional model: shapes inferred node by node; layers that
# share weights (same ggml_layer object, or same name) get one key, and must
# agree on their configuration and input shape.
.nn_plan_fn <- function(model) {
  nodes <- nn_topo_sort(model$outputs)
  shapes <- list()
  steps <- list()
  keys <- list()
  override <- model$trainable_override %||% logical(0)
  input_ids <- vapply(model$inputs, function(n) n$id, character(1L))
  for (n in nodes) {
    psh <- lapply(n$parents, function(p) shapes[[p$id]])
    label <- n$config$name %||% n$id
    out <- as.integer(.nn_out_shape(n$node_type, n$config, psh, label))
    shapes[[n$id]] <- out
    key <- NULL
    if (n$node_type %in% .nn_weighted_types) {
      key <- n$layer_id %||% paste0("name:", label)
      sig <- list(type = n$node_type, config = n$config[setdiff(names(n$config), "name")],
                  in_shape = psh[[1L]])
      if (!is.null(keys[[key]]) && !identical(keys[[key]], sig)) {
        .abort(sprintf(paste0("layer \"%s\" is used twice with different settings or input shapes ",
                              "(%s then %s); shared layers need the same configuration and input shape"),
                       label, .nn_shape_str(keys[[key]]$in_shape), .nn_shape_str(psh[[1L]])), call = NULL)
      }
      keys[[key]] <- sig
    }
    trainable <- if (!is.na(override[label])) override[[label]] else !isFALSE(n$trainable)
    steps[[length(steps) + 1L]] <- list(
      id = n$id, type = n$node_type, config = n$config,
      parents = vapply(n$parents, function(p) p$id, character(1L)), key = key, label = label,
      trainable = trainable, in_shapes = psh, out_shape = out, layer_index = NA_integer_)
  }
  used_inputs <- vapply(Filter(function(s) s$type == "input", steps), function(s) s$id, character(1L))
  list(steps = steps, inputs = input_ids, outputs = vapply(model$outputs, function(n) n$id, character(1L)),
       unfed = setdiff(used_inputs, input_ids), kind = "functional")
}

.nn_weighted_types <- c("dense", "conv_2d", "conv_1d", "batch_norm", "embedding", "lstm", "gru")

.nn_plan <- function(model) {
  if (inherits(model, "ggml_sequential_model")) .nn_plan_seq(model) else .nn_plan_fn(model)
}
