# Saving and loading models as a state of plain matrices: the parameters, and
# the running statistics of batch-norm layers. The architecture is rebuilt by
# a function (`model_fn`), stored in the file or given when loading.

.ag_state_format <- "ggmlR.ag_state"
.ag_state_version <- 1L

.ag_layers_of <- function(model) if (is.list(model$layers)) model$layers else list(model)

.ag_buffers <- function(model) {
  out <- list()
  ls <- .ag_layers_of(model)
  for (i in seq_along(ls)) {
    if (inherits(ls[[i]], "ag_batch_norm")) {
      out[[paste0("layer", i, "_running_mean")]] <- ls[[i]]$running_mean
      out[[paste0("layer", i, "_running_var")]] <- ls[[i]]$running_var
    }
  }
  out
}

#' Save and load a model
#'
#' `ag_save_model()` writes an RDS file with the model's parameters (by the
#' names of `model$parameters()`), the running statistics of its batch-norm
#' layers, and `model_fn` when given. `ag_load_model()` rebuilds the model
#' with `model_fn` (the argument, else the stored one), checks that names and
#' shapes match, installs the values and returns it in evaluation mode.
#'
#' @param model An `ag_sequential` or layer.
#' @param path File path.
#' @param model_fn A function of no arguments that builds the (untrained)
#'   architecture.
#' @param device Device to rebuild on (`NULL`: the default device).
#' @return `ag_save_model()`: `path`, invisibly. `ag_load_model()`: the model.
#' @name ag_save_model
#' @examples
#' build <- function() ag_sequential(ag_linear(4, 8, "relu"), ag_batch_norm(8), ag_linear(8, 3))
#' f <- tempfile(fileext = ".rds")
#' ag_save_model(build(), f, model_fn = build)
#' model <- ag_load_model(f)
NULL

#' @rdname ag_save_model
#' @export
ag_save_model <- function(model, path, model_fn = NULL) {
  if (!inherits(model, "ag_layer")) .abort("`model` must be an ag_sequential or an ag_* layer")
  if (!is.null(model_fn) && !is.function(model_fn)) .abort("`model_fn` must be a function or NULL")
  params <- .ag_layer_params(model)
  state <- structure(list(
    format = .ag_state_format,
    version = .ag_state_version,
    parameters = lapply(params, .ag_data),
    param_dtypes = vapply(params, function(p) p$dtype %||% "f32", character(1L)),
    buffers = .ag_buffers(model),
    model_fn = model_fn,
    ggmlR_version = utils::packageVersion("ggmlR"),
    R_version = getRversion(),
    created = Sys.time()
  ), class = "ggmlR_ag_state")
  saveRDS(state, path)
  invisible(path)
}

#' @rdname ag_save_model
#' @export
ag_load_model <- function(path, model_fn = NULL, device = NULL) {
  state <- tryCatch(readRDS(path), error = function(e) {
    .abort(sprintf("cannot read '%s': %s", path, conditionMessage(e)), call = NULL)
  })
  if (!is.list(state) || !identical(state$format, .ag_state_format)) {
    .abort(sprintf("'%s' is not a model saved by ag_save_model()", path))
  }
  if (!identical(state$version, .ag_state_version)) {
    .abort(sprintf("'%s' has state version %s; this ggmlR reads version %d", path,
                   format(state$version), .ag_state_version))
  }
  build <- model_fn %||% state$model_fn
  if (!is.function(build)) {
    .abort("no `model_fn`: pass one that rebuilds the architecture, or save with `model_fn`")
  }
  if (!is.null(device)) {
    old <- ag_device(device)
    on.exit(ag_device(old), add = TRUE)
  }
  model <- build()
  if (!inherits(model, "ag_layer")) .abort("`model_fn` must return an ag_sequential or an ag_* layer")
  params <- .ag_layer_params(model)
  saved <- state$parameters
  miss <- setdiff(names(params), names(saved))
  extra <- setdiff(names(saved), names(params))
  if (length(miss) || length(extra)) {
    .abort(sprintf("the rebuilt model does not match the file: missing in the file: %s; not in the model: %s",
                   paste(miss, collapse = ", "), paste(extra, collapse = ", ")))
  }
  for (nm in names(params)) {
    if (!identical(as.integer(dim(saved[[nm]])), as.integer(params[[nm]]$shape))) {
      .abort(sprintf("parameter '%s' is %s in the model but %s in the file", nm,
                     paste(params[[nm]]$shape, collapse = "x"), paste(dim(saved[[nm]]), collapse = "x")))
    }
  }
  for (nm in names(params)) .ag_data_set(params[[nm]], saved[[nm]])
  ls <- .ag_layers_of(model)
  for (i in seq_along(ls)) {
    if (inherits(ls[[i]], "ag_batch_norm")) {
      rm <- state$buffers[[paste0("layer", i, "_running_mean")]]
      rv <- state$buffers[[paste0("layer", i, "_running_var")]]
      if (!is.null(rm)) ls[[i]]$running_mean <- rm
      if (!is.null(rv)) ls[[i]]$running_var <- rv
    }
  }
  ag_eval(model)
  model
}

#' @export
print.ggmlR_ag_state <- function(x, ...) {
  cat(sprintf("<ggmlR model state v%d> %d parameters, %d buffers, model_fn %s, saved %s\n",
              x$version, length(x$parameters), length(x$buffers),
              if (is.null(x$model_fn)) "not stored" else "stored", format(x$created)))
  invisible(x)
}
