# Saving and loading models. A saved model is data only: the architecture as
# a description of its layers (type and constructor arguments), the
# parameters and the running statistics of batch-norm layers, all plain
# numbers and strings, in a file with a format tag, a version and a checksum
# (src/rust/core/src/savefile). Loading rebuilds the layers with this
# package's own constructors; nothing from the file is ever evaluated.

.ag_state_format <- "ggmlR model"
.ag_state_version <- 1L

.ag_layers_of <- function(model) if (is.list(model$layers)) model$layers else list(model)

.ag_buffers <- function(model) {
  out <- list()
  ls <- .ag_layers_of(model)
  for (i in seq_along(ls)) {
    if (inherits(ls[[i]], "ag_batch_norm")) {
      out[[paste0("layer", i, "_running_mean")]] <- .ag_plain_matrix(ls[[i]]$running_mean)
      out[[paste0("layer", i, "_running_var")]] <- .ag_plain_matrix(ls[[i]]$running_var)
    }
  }
  out
}

# Installs the running statistics `buffers` (as .ag_buffers() names them) in
# the batch-norm layers of `model`; `bad(what)` reports one that does not fit.
.ag_set_buffers <- function(model, buffers, bad = function(what) stop(what, call. = FALSE)) {
  ls <- .ag_layers_of(model)
  for (i in seq_along(ls)) {
    if (!inherits(ls[[i]], "ag_batch_norm")) next
    for (s in c("running_mean", "running_var")) {
      v <- buffers[[paste0("layer", i, "_", s)]]
      if (is.null(v)) next
      if (!is.double(v) || length(v) != ls[[i]]$num_features) {
        bad(sprintf("layer %d's %s does not fit %d features", i, s, ls[[i]]$num_features))
      }
      ls[[i]][[s]] <- matrix(v, ls[[i]]$num_features, 1L)
    }
  }
  invisible(model)
}

.ag_plain_matrix <- function(m) {
  m <- as.matrix(m)
  storage.mode(m) <- "double"
  structure(as.vector(m), dim = dim(m))
}

# Architectures: for each layer class, how to describe a layer as data and
# how to rebuild it from that description with the layer's constructor.
# Other model kinds add themselves with .ag_register_arch().
.ag_arch_kinds <- new.env(parent = emptyenv())

.ag_register_arch <- function(class, type, describe, rebuild) {
  .ag_arch_kinds[[type]] <- list(class = class, describe = describe, rebuild = rebuild)
  invisible(type)
}

.ag_register_arch("ag_linear", "linear",
  function(l) list(in_features = l$W$shape[2L], out_features = l$W$shape[1L],
                   activation = if (is.null(l$activation)) NA_character_ else l$activation),
  function(s) ag_linear(s$in_features, s$out_features,
                        if (is.na(s$activation)) NULL else s$activation))
.ag_register_arch("ag_dropout", "dropout",
  function(l) list(rate = l$rate), function(s) ag_dropout(s$rate))
.ag_register_arch("ag_batch_norm", "batch_norm",
  function(l) list(num_features = l$num_features, eps = l$eps, momentum = l$momentum),
  function(s) ag_batch_norm(s$num_features, s$eps, s$momentum))
.ag_register_arch("ag_embedding", "embedding",
  function(l) list(vocab_size = l$vocab_size, dim = l$dim),
  function(s) ag_embedding(s$vocab_size, s$dim))
.ag_register_arch("ag_multihead_attention", "multihead_attention",
  function(l) list(d_model = l$d_model, n_heads = l$n_heads, dropout = l$dropout,
                   bias = !is.null(l$b_o)),
  function(s) ag_multihead_attention(s$d_model, s$n_heads, s$dropout, s$bias))
.ag_register_arch("ag_sequential", "sequential",
  function(l) {
    parts <- lapply(l$layers, .ag_arch_describe)
    if (any(vapply(parts, is.null, logical(1L)))) return(NULL)
    list(layers = parts)
  },
  function(s) {
    if (!is.list(s$layers) || !length(s$layers)) stop("a sequential model without layers")
    ag_sequential(lapply(s$layers, .ag_arch_rebuild))
  })

# The description of a layer (NULL when some layer is of a kind that cannot
# be described, e.g. a user's own layer).
.ag_arch_describe <- function(layer) {
  for (type in ls(.ag_arch_kinds)) {
    k <- .ag_arch_kinds[[type]]
    if (class(layer)[1L] == k$class) {
      d <- k$describe(layer)
      return(if (is.null(d)) NULL else c(list(type = type), d))
    }
  }
  NULL
}

.ag_arch_rebuild <- function(spec) {
  if (!is.list(spec) || !is.character(spec$type) || length(spec$type) != 1L ||
      is.null(.ag_arch_kinds[[spec$type]])) {
    stop(sprintf("an unknown layer type %s", .describe_value(spec$type)))
  }
  .ag_arch_kinds[[spec$type]]$rebuild(spec)
}

#' Save and load a model
#'
#' `ag_save_model()` writes the model's architecture (for models made of this
#' package's layers), its parameters (by the names of `model$parameters()`)
#' and the running statistics of its batch-norm layers. The file holds data
#' only, with a format tag, a version and a checksum; it is written to a
#' temporary file in the same folder and renamed, so a failed save (a full
#' disk) leaves an earlier file at `path` intact.
#'
#' `ag_load_model()` rebuilds the model from the stored architecture, or with
#' `model_fn` when given (needed for models with layers of your own), checks
#' that names and shapes match, installs the values and returns it in
#' evaluation mode. A corrupted, truncated or foreign file is an error.
#' Loading never runs code from the file.
#'
#' @param model An `ag_sequential` or layer.
#' @param path File path.
#' @param model_fn A function of no arguments that builds the (untrained)
#'   architecture. `ag_save_model()` accepts it for compatibility but never
#'   stores it (a file holds no code); pass it to `ag_load_model()` instead.
#' @param device Device to rebuild on (`NULL`: the default device).
#' @return `ag_save_model()`: `path`, invisibly. `ag_load_model()`: the model.
#' @name ag_save_model
#' @examples
#' model <- ag_sequential(ag_linear(4, 8, "relu"), ag_batch_norm(8), ag_linear(8, 3))
#' f <- tempfile(fileext = ".ggmlr")
#' ag_save_model(model, f)
#' back <- ag_load_model(f)
#' back
NULL

#' @rdname ag_save_model
#' @export
ag_save_model <- function(model, path, model_fn = NULL) {
  call <- sys.call()
  if (!inherits(model, "ag_layer")) {
    .abort("`model` must be an ag_sequential or an ag_* layer", call = call)
  }
  if (!is.null(model_fn) && !is.function(model_fn)) {
    .abort("`model_fn` must be a function or NULL", call = call)
  }
  path <- .check_file_path(path, call = call)
  params <- .ag_layer_params(model)
  state <- list(
    format = .ag_state_format,
    version = .ag_state_version,
    architecture = .ag_arch_describe(model),
    parameters = lapply(params, function(p) .ag_plain_matrix(.ag_data(p))),
    param_dtypes = vapply(params, function(p) p$dtype %||% "f32", character(1L)),
    buffers = .ag_buffers(model),
    ggmlR_version = as.character(utils::packageVersion("ggmlR")),
    created = format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z")
  )
  .rs(rs_savefile_write(path, state), call = call)
  invisible(path)
}

#' @rdname ag_save_model
#' @export
ag_load_model <- function(path, model_fn = NULL, device = NULL) {
  call <- sys.call()
  if (!is.null(model_fn) && !is.function(model_fn)) {
    .abort("`model_fn` must be a function of no arguments or NULL", call = call)
  }
  path <- .check_file_path(path, call = call)
  if (!file.exists(path)) .abort(sprintf("`path`: there is no file '%s'", path), call = call)
  state <- .rs(rs_savefile_read(path), call = call)
  bad <- function(what) .abort(sprintf("'%s' is not a valid saved model: %s", path, what), call = call)
  if (!is.list(state) || !identical(state$format, .ag_state_format)) bad("no ggmlR model in it")
  if (!identical(state$version, .ag_state_version)) {
    bad(sprintf("model version %s; this ggmlR reads version %d", format(state$version), .ag_state_version))
  }
  if (!is.list(state$parameters)) bad("no parameters")
  if (!is.null(device)) {
    old <- ag_device(device)
    on.exit(ag_device(old), add = TRUE)
  }
  model <- if (is.function(model_fn)) {
    model_fn()
  } else if (is.list(state$architecture)) {
    tryCatch(.ag_arch_rebuild(state$architecture),
             error = function(e) bad(sprintf("its architecture cannot be rebuilt (%s)", conditionMessage(e))))
  } else {
    .abort(sprintf(paste(
      "'%s' stores no architecture (the model has layers of your own);",
      "pass `model_fn`, a function that builds the untrained model"), path), call = call)
  }
  if (!inherits(model, "ag_layer")) {
    .abort("`model_fn` must return an ag_sequential or an ag_* layer", call = call)
  }
  params <- .ag_layer_params(model)
  saved <- state$parameters
  miss <- setdiff(names(params), names(saved))
  extra <- setdiff(names(saved), names(params))
  if (length(miss) || length(extra)) {
    .abort(sprintf("the rebuilt model does not match the file (parameter mismatch): missing in the file: %s; not in the model: %s",
                   paste(miss, collapse = ", "), paste(extra, collapse = ", ")), call = call)
  }
  for (nm in names(params)) {
    v <- saved[[nm]]
    if (!is.double(v) || !identical(as.integer(dim(v)), as.integer(params[[nm]]$shape))) {
      .abort(sprintf("shape mismatch: parameter '%s' is %s in the model but %s in the file", nm,
                     paste(params[[nm]]$shape, collapse = "x"),
                     if (is.double(v)) paste(dim(v), collapse = "x") else "not numeric"), call = call)
    }
  }
  for (nm in names(params)) .ag_data_set(params[[nm]], saved[[nm]])
  .ag_set_buffers(model, state$buffers, bad)
  ag_eval(model)
  model
}
