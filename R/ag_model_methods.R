# predict() and summary() for models (ag_sequential and the ag_* layers).

#' Predictions of a model
#'
#' Runs the model forward in evaluation mode, in chunks of `batch_size`
#' samples, on features given in any form [ag_fit()] takes (a matrix in
#' either layout, a data frame, an `ag_tensor`), and returns plain R values
#' in the layout of `newdata`. The model's training or evaluation mode is
#' left as it was.
#'
#' @param object A model: an `ag_sequential` or an `ag_*` layer.
#' @param newdata Features.
#' @param type `"output"`: the values of the last layer. `"prob"`: class
#'   probabilities, the softmax of the outputs (unless the last layer ends in
#'   a softmax already; for a single sigmoid output, the probabilities of
#'   class 0 and class 1). `"class"`: the most probable class.
#' @param layout `"auto"`, `"columns"` or `"rows"`, as for [ag_fit()]; when
#'   the model's input size cannot be told, `"auto"` takes the layout of
#'   the model's last `ag_fit()`.
#' @param batch_size Samples per forward pass.
#' @param ... Ignored.
#' @return For `"output"` and `"prob"`, a numeric matrix with one column per
#'   sample, or one row per sample when the samples of `newdata` are rows
#'   (then the columns of `"prob"` are named by the classes, when
#'   [ag_fit()] saw a factor). For `"class"`, a factor with the classes
#'   [ag_fit()] saw, else 0-based integer labels.
#' @seealso [ag_fit()], [summary.ag_layer()]
#' @export
#' @examples
#' set.seed(2)
#' model <- ag_sequential(ag_linear(4, 8, "relu"), ag_linear(8, 3))
#' ag_fit(model, iris[, 1:4], iris$Species, epochs = 10, verbose = 0)
#' head(predict(model, iris[, 1:4], type = "prob"))
#' mean(predict(model, iris[, 1:4], type = "class") == iris$Species)
#' predict(model, t(as.matrix(iris[1:3, 1:4])))  # samples as columns
predict.ag_layer <- function(object, newdata, type = c("output", "prob", "class"),
                             layout = c("auto", "columns", "rows"), batch_size = 1024L, ...) {
  type <- match.arg(type)
  layout <- match.arg(layout)
  batch_size <- .ag_count(batch_size, "batch_size")
  info <- object$fit_info
  f <- .ag_features(newdata, layout, .ag_model_inputs(object), NULL, "newdata",
                    default = info$layout %||% "columns")
  was_training <- isTRUE(object$training)
  ag_eval(object)
  on.exit(if (was_training) ag_train(object), add = TRUE)
  n <- ncol(f$x)
  out <- do.call(cbind, lapply(seq_len(ceiling(n / batch_size)), function(k) {
    idx <- ((k - 1L) * batch_size + 1L):min(k * batch_size, n)
    .ag_data(object$forward(ag_tensor(f$x[, idx, drop = FALSE])))
  }))
  if (type != "output") out <- .ag_probabilities(out, .ag_last_activation(object))
  classes <- info$classes
  if (type == "class") {
    lab <- max.col(t(out), ties.method = "first") - 1L
    if (!is.null(classes) && length(classes) >= nrow(out)) return(factor(classes[lab + 1L], levels = classes))
    return(lab)
  }
  if (type == "prob" && !is.null(classes) && length(classes) == nrow(out)) rownames(out) <- classes
  if (f$layout == "rows") {
    out <- t(out)
    if (is.data.frame(newdata) && .row_names_info(newdata) > 0L) rownames(out) <- rownames(newdata)
  }
  out
}

# Class probabilities from the last layer's outputs [k, n].
.ag_probabilities <- function(out, act, call = sys.call(-1L)) {
  if (identical(act, "softmax")) return(out)
  if (nrow(out) == 1L) {
    if (identical(act, "sigmoid")) return(rbind(1 - out, out))
    .abort(paste0("type = \"prob\" or \"class\" needs class scores, but the model has one output ",
                  "without a sigmoid: use type = \"output\""), call = call)
  }
  e <- exp(sweep(out, 2L, apply(out, 2L, max)))
  sweep(e, 2L, colSums(e), "/")
}

# The activation the model's output comes out of ("softmax", "sigmoid", ...;
# NULL for none or when it cannot be told).
.ag_last_activation <- function(m) {
  if (inherits(m, "ag_sequential")) {
    for (l in rev(m$layers)) {
      if (inherits(l, "ag_dropout")) next
      return(.ag_last_activation(l))
    }
    return(NULL)
  }
  if (inherits(m, "ag_linear")) return(m$activation)
  NULL
}

#' Summary of a model
#'
#' One row per layer: its description, its parameters and their shapes; the
#' total; the input and output sizes; the mode; where the parameters live;
#' and what [ag_fit()] last trained it on.
#'
#' @param object A model: an `ag_sequential` or an `ag_*` layer.
#' @param x A `summary.ag_layer`.
#' @param ... Ignored.
#' @return `summary()`: an object of class `summary.ag_layer` (a list with
#'   the data frame `layers` and the totals) that prints as a table.
#' @seealso [predict.ag_layer()]
#' @export
#' @examples
#' model <- ag_sequential(ag_linear(4, 16, "relu"), ag_dropout(0.1), ag_linear(16, 3))
#' s <- summary(model)
#' s
#' s$layers
#' s$parameters
summary.ag_layer <- function(object, ...) {
  layers <- if (inherits(object, "ag_sequential")) object$layers else list(object)
  rows <- lapply(seq_along(layers), function(i) {
    l <- layers[[i]]
    p <- .ag_layer_params(l)
    shapes <- vapply(names(p), function(nm) sprintf("%s %s", nm, paste(p[[nm]]$shape, collapse = "x")),
                     character(1L))
    data.frame(layer = i, name = l$name %||% class(l)[1L], parameters = .ag_n_params(p),
               shapes = if (length(shapes)) paste(shapes, collapse = ", ") else "-",
               stringsAsFactors = FALSE)
  })
  params <- .ag_layer_params(object)
  devices <- unique(vapply(params, function(p) .ag_storage_label(p), character(1L)))
  structure(list(class = class(object)[1L], layers = do.call(rbind, rows),
                 parameters = .ag_n_params(params), inputs = .ag_model_inputs(object),
                 outputs = .ag_model_outputs(object), training = isTRUE(object$training),
                 storage = devices, fit_info = object$fit_info),
            class = "summary.ag_layer")
}

.ag_n_params <- function(p) sum(vapply(p, function(t) prod(t$shape), numeric(1L)))

.ag_count_words <- function(n, what) {
  sprintf("%s %s%s", format(n, big.mark = ",", scientific = FALSE), what, if (n == 1) "" else "s")
}

#' @rdname summary.ag_layer
#' @export
print.summary.ag_layer <- function(x, ...) {
  cat(sprintf("<%s> %s, %s, %s mode\n", x$class, .ag_count_words(nrow(x$layers), "layer"),
              .ag_count_words(x$parameters, "parameter"), if (x$training) "training" else "eval"))
  io <- c(if (!is.null(x$inputs) && !is.na(x$inputs)) sprintf("%d features in", x$inputs),
          if (!is.null(x$outputs)) sprintf("%d outputs", x$outputs))
  if (length(io)) cat("  ", paste(io, collapse = ", "), "; parameters on ", paste(x$storage, collapse = " and "), "\n", sep = "")
  tab <- x$layers
  tab$parameters <- format(tab$parameters, big.mark = ",")
  names(tab) <- c("", "layer", "parameters", "shapes")
  out <- utils::capture.output(print(tab, row.names = FALSE, right = FALSE))
  cat(paste0("  ", sub("\\s+$", "", out)), sep = "\n")
  fi <- x$fit_info
  if (!is.null(fi)) {
    cat(sprintf("  trained by ag_fit(): %s, %s%s\n", fi$loss, .ag_layout_words(fi$layout),
                if (length(fi$classes)) paste0(", classes ", paste(fi$classes, collapse = ", ")) else ""))
  }
  invisible(x)
}
