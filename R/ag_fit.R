# A training loop with a progress bar, a line per epoch and a history.
# The data's layout and the targets are worked out in R/ag_fit_data.R.

#' Train a model
#'
#' Runs `epochs` passes over the samples in shuffled mini-batches (the last
#' one may be smaller): forward in training mode on the tape, [backward()],
#' `optimizer$step()`. After each epoch the model is evaluated (in evaluation
#' mode) on the training data and on `validation`.
#'
#' @section Layout of the data: The package's tensors hold one sample per
#'   column (`[features, samples]`), but `x` may come either way: a data
#'   frame has one sample per row; for a matrix, `layout = "auto"` compares
#'   its shape with the number of features the model's first layer takes (and
#'   with the number of targets) and transposes a samples-as-rows matrix. A
#'   square matrix that both readings fit is taken as `[features, samples]`.
#'   The layout taken is said at `verbose >= 1` and kept in the history
#'   (`$layout`); `predict()` returns results in the same layout.
#'
#' @section Targets: With a classification loss ([ag_softmax_cross_entropy_loss()],
#'   [ag_cross_entropy_loss()]) `y` is a factor, a character or logical
#'   vector, whole-number class labels `0..k-1`, or a one-hot (or
#'   probability) matrix; non-integer labels, a model with one output, and a
#'   numeric matrix whose columns are not class probabilities are refused,
#'   naming the loss to use instead. With [ag_mse_loss()] `y` is numeric: a
#'   vector (one output) or a matrix in the layout of `x`. Other loss
#'   functions get a one-hot matrix for a factor or whole-number labels (when
#'   the model has more than one output) and the numbers otherwise. The class
#'   levels are kept in `model$fit_info`, so that `predict(type = "class")`
#'   can return a factor.
#'
#' @section Output: At `verbose = 1` a progress bar runs during each epoch
#'   (running mean of the batch losses, the last validation loss, time left)
#'   and each epoch leaves one line behind: its losses, accuracies and time.
#'   `verbose = 2` prints only the lines; `verbose = 0` (or `FALSE`) nothing.
#'   The lines are messages, so [suppressMessages()] silences them. Losses
#'   are shown with four significant digits.
#'
#' @param model A layer with `$forward()` and `$parameters()`.
#' @param x Features: a matrix `[features, samples]` or samples-as-rows, a
#'   data frame of numeric columns (samples as rows), or an `ag_tensor`.
#' @param y Targets (see Targets).
#' @param loss A loss function `(pred, target)`.
#' @param optimizer An optimizer over `model$parameters()`; by default Adam
#'   with `lr = 0.001`.
#' @param epochs Number of epochs.
#' @param batch_size Samples per step.
#' @param validation `NULL` or `list(x, y)` in the same form as `x` and `y`,
#'   evaluated after each epoch.
#' @param verbose 0, 1 or 2 (`TRUE` is 1): see Output.
#' @param layout `"auto"`, `"columns"` (samples are columns) or `"rows"`.
#' @return An `ag_history` object: `$metrics`, a data frame with `epoch`,
#'   `loss`, `accuracy`, `val_loss`, `val_accuracy` (accuracy is `NA` unless
#'   the targets are classes) and `seconds`; `$layout`, `$loss`, `$samples`;
#'   with `print()`, `plot()` and `as.data.frame()` methods. The model is
#'   left in evaluation mode.
#' @seealso [predict.ag_layer()], [summary.ag_layer()]
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(2 * 64), 2, 64)
#' y <- as.integer(x[1, ] + x[2, ] > 0)
#' model <- ag_sequential(ag_linear(2, 8, "relu"), ag_linear(8, 2))
#' h <- ag_fit(model, x, y, epochs = 5, batch_size = 16, verbose = 2)
#' h
#' # a data frame, samples as rows, with a factor target
#' model <- ag_sequential(ag_linear(4, 16, "relu"), ag_linear(16, 3))
#' h <- ag_fit(model, iris[, 1:4], iris$Species, epochs = 3, verbose = 0)
#' table(predict(model, iris[, 1:4], type = "class"), iris$Species)
ag_fit <- function(model, x, y, loss = ag_softmax_cross_entropy_loss, optimizer = NULL,
                   epochs = 10L, batch_size = 32L, validation = NULL, verbose = 1L,
                   layout = c("auto", "columns", "rows")) {
  if (!is.environment(model) || !is.function(model$forward)) {
    .abort("`model` must be a layer with $forward() and $parameters() (e.g. ag_sequential())")
  }
  if (!is.function(loss)) .abort("`loss` must be a function (pred, target), such as ag_mse_loss")
  layout <- match.arg(layout)
  verbose <- .ag_verbose(verbose)
  params <- .ag_layer_params(model)
  if (!length(params)) .abort("`model` has no parameters to train")
  if (is.null(optimizer)) optimizer <- optimizer_adam(params)
  epochs <- .ag_count(epochs, "epochs")
  batch_size <- .ag_count(batch_size, "batch_size")
  loss_name <- .ag_loss_name(loss, substitute(loss))
  d <- .ag_fit_data(model, x, y, loss, loss_name, layout)
  vd <- NULL
  if (!is.null(validation)) {
    if (!is.list(validation) || length(validation) != 2L || is.data.frame(validation)) {
      .abort("`validation` must be list(x, y), in the same form as `x` and `y`")
    }
    vd <- .ag_fit_data(model, validation[[1L]], validation[[2L]], loss, loss_name, layout,
                       levels = d$levels, what = "validation")
  }
  if (verbose >= 1L) .ag_say_layout(d)
  model$fit_info <- list(layout = d$layout, classes = d$levels, loss = loss_name,
                         features = nrow(d$x), outputs = nrow(d$y))
  n <- ncol(d$x)
  n_batches <- ceiling(n / batch_size)
  hist <- data.frame(epoch = seq_len(epochs), loss = NA_real_, accuracy = NA_real_,
                     val_loss = NA_real_, val_accuracy = NA_real_, seconds = NA_real_)
  val_loss <- NA_real_
  for (ep in seq_len(epochs)) {
    t0 <- proc.time()[["elapsed"]]
    ag_train(model)
    ord <- sample.int(n)
    bar <- if (verbose == 1L) .ag_bar_start(ep, epochs, n_batches)
    run <- 0
    for (b in seq_len(n_batches)) {
      idx <- ord[((b - 1L) * batch_size + 1L):min(b * batch_size, n)]
      xb <- ag_tensor(d$x[, idx, drop = FALSE])
      yb <- d$y[, idx, drop = FALSE]
      with_grad_tape(l <- loss(model$forward(xb), yb))
      optimizer$step(backward(l))
      optimizer$zero_grad()
      run <- run + (sum(.ag_data(l)) - run) / b
      if (!is.null(bar)) .ag_bar_update(bar, run, val_loss)
    }
    if (!is.null(bar)) cli::cli_progress_done(id = bar$id)
    hist[ep, c("loss", "accuracy")] <- .ag_evaluate(model, loss, d, batch_size)
    if (!is.null(vd)) hist[ep, c("val_loss", "val_accuracy")] <- .ag_evaluate(model, loss, vd, batch_size)
    val_loss <- hist$val_loss[ep]
    hist$seconds[ep] <- proc.time()[["elapsed"]] - t0
    if (verbose >= 1L) message(.ag_epoch_line(hist[ep, ], epochs))
  }
  ag_eval(model)
  structure(list(metrics = hist, epochs = epochs, batch_size = batch_size, layout = d$layout,
                 loss = loss_name, samples = n, validation_samples = if (!is.null(vd)) ncol(vd$x)),
            class = "ag_history")
}

.ag_verbose <- function(verbose, call = sys.call(-1L)) {
  if (isTRUE(verbose)) return(1L)
  if (isFALSE(verbose)) return(0L)
  if (!is.numeric(verbose) || length(verbose) != 1L || !verbose %in% 0:2) {
    .abort("`verbose` must be 0, 1 or 2 (or TRUE / FALSE)", call = call)
  }
  as.integer(verbose)
}

# Loss and accuracy of the model on data `d`, in chunks (the loss is the
# chunks' mean weighted by their sizes: the loss itself for the built-in
# losses, which average over samples).
.ag_evaluate <- function(model, loss, d, batch_size) {
  ag_eval(model)
  n <- ncol(d$x)
  size <- max(batch_size, 1024L)
  total <- 0
  pred <- vector("list", ceiling(n / size))
  for (k in seq_along(pred)) {
    idx <- ((k - 1L) * size + 1L):min(k * size, n)
    p <- model$forward(ag_tensor(d$x[, idx, drop = FALSE]))
    total <- total + sum(.ag_data(loss(p, d$y[, idx, drop = FALSE]))) * length(idx)
    if (d$classes) pred[[k]] <- .ag_data(p)
  }
  acc <- if (d$classes) .ag_accuracy(do.call(cbind, pred), d$y) else NA_real_
  c(total / n, acc)
}

# Accuracy of class scores `pred` [classes, n] against one-hot `y`.
.ag_accuracy <- function(pred, y) {
  if (nrow(pred) < 2L || nrow(y) != nrow(pred)) return(NA_real_)
  mean(max.col(t(pred), ties.method = "first") == max.col(t(y), ties.method = "first"))
}

# Four significant digits, "-" for NA.
.ag_fmt <- function(v, digits = 4L) {
  if (is.na(v)) return("-")
  formatC(v, digits = digits, format = "g", flag = "#")
}

.ag_epoch_line <- function(row, epochs) {
  w <- nchar(epochs)
  parts <- c(sprintf("epoch %*d/%d", w, row$epoch, epochs), paste("loss", .ag_fmt(row$loss)),
             if (!is.na(row$accuracy)) paste("accuracy", .ag_fmt(row$accuracy, 3L)),
             if (!is.na(row$val_loss)) paste("val_loss", .ag_fmt(row$val_loss)),
             if (!is.na(row$val_accuracy)) paste("val_accuracy", .ag_fmt(row$val_accuracy, 3L)),
             sprintf("%.2fs", row$seconds))
  paste(parts, collapse = "  ")
}

.ag_bar_start <- function(ep, epochs, n_batches) {
  bar <- new.env(parent = baseenv())  # the format evaluates cli::pb_* in it
  bar$loss <- "-"
  bar$val <- "-"
  bar$ep <- ep
  bar$epochs <- epochs
  bar$id <- cli::cli_progress_bar(
    total = n_batches, clear = TRUE, .envir = bar,
    format = paste("epoch {ep}/{epochs} {cli::pb_bar} {cli::pb_current}/{cli::pb_total}",
                   "| loss {loss} | val_loss {val} | {cli::pb_eta}"))
  bar
}

.ag_bar_update <- function(bar, loss, val_loss) {
  bar$loss <- .ag_fmt(loss)
  bar$val <- .ag_fmt(val_loss)
  cli::cli_progress_update(id = bar$id, .envir = bar)
}

#' @export
print.ag_history <- function(x, ...) {
  m <- x$metrics
  last <- m[nrow(m), ]
  cat(sprintf("<ag_history> %d epoch%s on %d samples (%s), batch size %d, loss %s\n",
              x$epochs, if (x$epochs == 1L) "" else "s", x$samples %||% NA_integer_,
              .ag_layout_words(x$layout), x$batch_size, x$loss %||% "?"))
  final <- c(loss = .ag_fmt(last$loss), accuracy = .ag_fmt(last$accuracy, 3L),
             val_loss = .ag_fmt(last$val_loss), val_accuracy = .ag_fmt(last$val_accuracy, 3L))
  final <- final[final != "-"]
  cat("  final: ", paste(names(final), final, collapse = ", "), "\n", sep = "")
  if (any(!is.na(m$val_loss))) {
    b <- which.min(m$val_loss)
    cat(sprintf("  best val_loss %s at epoch %d\n", .ag_fmt(m$val_loss[b]), m$epoch[b]))
  }
  invisible(x)
}

.ag_layout_words <- function(layout) {
  switch(layout %||% "columns", rows = "samples as rows", columns = "samples as columns", layout)
}

#' @export
as.data.frame.ag_history <- function(x, ...) x$metrics

#' Plot a training history
#'
#' Loss (and, for classification, accuracy) per epoch, on the training data
#' and on the validation data when there was some.
#' @param x An `ag_history` from [ag_fit()].
#' @param ... Passed to [graphics::plot()].
#' @return `x`, invisibly.
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(2 * 64), 2, 64)
#' y <- as.integer(x[1, ] > 0)
#' h <- ag_fit(ag_sequential(ag_linear(2, 2)), x, y, epochs = 3, verbose = FALSE)
#' plot(h)
plot.ag_history <- function(x, ...) {
  m <- x$metrics
  has_acc <- any(!is.na(m$accuracy))
  op <- graphics::par(mfrow = c(1L, if (has_acc) 2L else 1L))
  on.exit(graphics::par(op))
  panel <- function(tr, va, ylab) {
    rng <- range(c(tr, va), na.rm = TRUE)
    graphics::plot(m$epoch, tr, type = "l", lwd = 2, col = "steelblue", ylim = rng,
                   xlab = "epoch", ylab = ylab, ...)
    if (any(!is.na(va))) {
      graphics::lines(m$epoch, va, lwd = 2, col = "darkorange")
      graphics::legend("right", c("training", "validation"), col = c("steelblue", "darkorange"),
                       lwd = 2, bty = "n")
    }
  }
  panel(m$loss, m$val_loss, "loss")
  if (has_acc) panel(m$accuracy, m$val_accuracy, "accuracy")
  invisible(x)
}
