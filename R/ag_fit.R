# A training loop with a progress bar and a history of the epochs.

# Accuracy for class scores `pred` [classes, n] against one-hot `y` (or NA
# when the task is not a classification).
.ag_accuracy <- function(pred, y) {
  if (nrow(pred) < 2L || nrow(y) != nrow(pred)) return(NA_real_)
  mean(max.col(t(pred), ties.method = "first") == max.col(t(y), ties.method = "first"))
}

# Targets as a matrix [outputs, n]; class indices become one-hot.
.ag_fit_target <- function(y, k) {
  if (is_ag_tensor(y)) y <- .ag_data(y)
  if (is.null(dim(y)) || is.factor(y)) {
    idx <- if (is.factor(y)) as.integer(y) - 1L else as.integer(y)
    return(.ag_onehot(idx, matrix(0, k, 1L)))
  }
  .ag_num(y, "y")
}

#' Train a model
#'
#' Runs `epochs` passes over the columns of `x` in shuffled mini-batches
#' (the last one may be smaller): forward in training mode on the tape,
#' [backward()], `optimizer$step()`. After each epoch the model is evaluated
#' (in evaluation mode) on the training data and on `validation`. A cli
#' progress bar shows the progress.
#'
#' @param model A layer with `$forward()` and `$parameters()`.
#' @param x Features `[features, n]`.
#' @param y Targets: a matrix `[outputs, n]` (one-hot for classification),
#'   or class labels (0-based integers or a factor).
#' @param loss A loss function `(pred, target)`.
#' @param optimizer An optimizer over `model$parameters()`; by default Adam
#'   with `lr = 0.001`.
#' @param epochs Number of epochs.
#' @param batch_size Samples per step.
#' @param validation `NULL` or `list(x, y)` evaluated after each epoch.
#' @param verbose Show the progress bar.
#' @return An `ag_history` object: `$metrics`, a data frame with `epoch`,
#'   `loss`, `accuracy`, `val_loss`, `val_accuracy` (accuracy is `NA` for
#'   regression), with `print()` and `plot()` methods. The model is left in
#'   evaluation mode.
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(2 * 64), 2, 64)
#' y <- as.integer(x[1, ] + x[2, ] > 0)
#' model <- ag_sequential(ag_linear(2, 8, "relu"), ag_linear(8, 2))
#' h <- ag_fit(model, x, y, epochs = 5, batch_size = 16, verbose = FALSE)
#' h
ag_fit <- function(model, x, y, loss = ag_softmax_cross_entropy_loss, optimizer = NULL,
                   epochs = 10L, batch_size = 32L, validation = NULL, verbose = TRUE) {
  if (!is.function(model$forward)) .abort("`model` must be a layer with $forward() and $parameters()")
  if (!is.function(loss)) .abort("`loss` must be a function (pred, target)")
  x <- .ag_num(if (is_ag_tensor(x)) .ag_data(x) else x, "x")
  params <- .ag_layer_params(model)
  if (is.null(optimizer)) optimizer <- optimizer_adam(params)
  epochs <- .ag_count(epochs, "epochs")
  batch_size <- .ag_count(batch_size, "batch_size")
  n <- ncol(x)
  k <- params[[length(params)]]$shape[1L]
  y <- .ag_fit_target(y, k)
  if (ncol(y) != n) .abort(sprintf("`x` has %d samples (columns) but `y` has %d", n, ncol(y)))
  if (!is.null(validation)) {
    if (!is.list(validation) || length(validation) < 2L) .abort("`validation` must be list(x, y)")
    vx <- .ag_num(if (is_ag_tensor(validation[[1L]])) .ag_data(validation[[1L]]) else validation[[1L]], "validation x")
    vy <- .ag_fit_target(validation[[2L]], k)
  }
  evaluate <- function(xm, ym) {
    ag_eval(model)
    pred <- model$forward(ag_tensor(xm))
    l <- sum(.ag_data(loss(pred, ym)))
    c(l, .ag_accuracy(.ag_data(pred), ym))
  }
  n_batches <- ceiling(n / batch_size)
  hist <- data.frame(epoch = seq_len(epochs), loss = NA_real_, accuracy = NA_real_,
                     val_loss = NA_real_, val_accuracy = NA_real_)
  if (verbose) {
    pb <- cli::cli_progress_bar("Training", total = epochs * n_batches,
                                format = "{cli::pb_bar} {cli::pb_percent} | epoch {ep}/{epochs} | loss {sprintf('%.4f', cur)} | {cli::pb_eta}",
                                .envir = environment())
  }
  ep <- 0L
  cur <- NA_real_
  for (ep in seq_len(epochs)) {
    ag_train(model)
    ord <- sample.int(n)
    for (b in seq_len(n_batches)) {
      idx <- ord[((b - 1L) * batch_size + 1L):min(b * batch_size, n)]
      xb <- ag_tensor(x[, idx, drop = FALSE])
      yb <- y[, idx, drop = FALSE]
      with_grad_tape(l <- loss(model$forward(xb), yb))
      optimizer$step(backward(l))
      optimizer$zero_grad()
      cur <- sum(.ag_data(l))
      if (verbose) cli::cli_progress_update(id = pb)
    }
    hist[ep, c("loss", "accuracy")] <- evaluate(x, y)
    if (!is.null(validation)) hist[ep, c("val_loss", "val_accuracy")] <- evaluate(vx, vy)
  }
  if (verbose) cli::cli_progress_done(id = pb)
  ag_eval(model)
  structure(list(metrics = hist, epochs = epochs, batch_size = batch_size),
            class = "ag_history")
}

#' @export
print.ag_history <- function(x, ...) {
  m <- x$metrics
  last <- m[nrow(m), ]
  cat(sprintf("<ag_history> %d epochs, batch size %d\n", x$epochs, x$batch_size))
  fmt <- function(v) if (is.na(v)) "-" else sprintf("%.4f", v)
  cat(sprintf("  final: loss %s, accuracy %s, val_loss %s, val_accuracy %s\n",
              fmt(last$loss), fmt(last$accuracy), fmt(last$val_loss), fmt(last$val_accuracy)))
  invisible(x)
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
