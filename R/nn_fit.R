# Training, evaluation and prediction of compiled models. R drives the loop
# (batches, callbacks, progress); every forward, backward and optimizer step
# is engine work on the model's device.

#' Train a model
#'
#' Trains a compiled model for `epochs` passes over the data in mini-batches
#' (the last batch of an epoch may be smaller), shuffled every epoch, and
#' returns it with its `history` (a `ggml_history`).
#'
#' `ggml_fit()` is also upstream ggml's lower-level trainer: called with a
#' scheduler as its first argument (`ggml_fit(sched, ctx_compute, inputs,
#' outputs, dataset, ...)`) it runs [ggml_fit_opt()].
#'
#' @param model A compiled `ggml_sequential_model` or `ggml_functional_model`.
#' @param x Inputs, one row per sample: a matrix (or data frame) for vector
#'   inputs, an array `[n, seq_len, features]` for sequences, `[n, H, W, C]`
#'   for images, an integer matrix for embedding indices; a list of these for
#'   a model with several inputs.
#' @param y Targets: one-hot rows for `categorical_crossentropy`, 0-based
#'   labels (or a factor) for `sparse_categorical_crossentropy`, a numeric
#'   matrix or vector for `mse` and `binary_crossentropy`.
#' @param epochs Passes over the data.
#' @param batch_size Samples per step.
#' @param validation_split Fraction of the samples (the last ones, taken
#'   before shuffling, as Keras) held out to validate after each epoch.
#' @param validation_data `list(x_val, y_val)` to validate on instead.
#' @param verbose `0` (or `FALSE`): silent; `1` (or `TRUE`): a progress bar
#'   during each epoch and a line after it; `2`: the line only.
#' @param shuffle Shuffle the training samples every epoch.
#' @param callbacks A list of callbacks: lists with functions
#'   `on_epoch_begin(epoch, logs, state)` and/or `on_epoch_end(epoch, logs,
#'   state)` (see [ggml_callback_early_stopping()]); `state$stop <- TRUE`
#'   stops training, `state$lr_ud` is the learning rate ([ggml_opt_get_lr()]).
#' @param class_weight Weights by 0-based class, e.g. `c("0" = 1, "1" = 2)`.
#' @param sample_weight One weight per sample (not with `class_weight`).
#' @param ... Unused.
#' @return The model, with `model$history`.
#' @family training
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(runif(200 * 4), 200, 4)
#' y <- cbind(rowSums(x) > 2, rowSums(x) <= 2) * 1
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(16, activation = "relu", input_shape = 4) |>
#'   ggml_layer_dense(2, activation = "softmax") |>
#'   ggml_compile(optimizer = "adam", loss = "categorical_crossentropy", backend = "cpu")
#' model <- ggml_fit(model, x, y, epochs = 5, batch_size = 32, verbose = 0)
#' model$history
ggml_fit <- function(model, ...) UseMethod("ggml_fit")

#' @rdname ggml_fit
#' @export
ggml_fit.ggml_sequential_model <- function(model, x, y, epochs = 1L, batch_size = 32L,
                                           validation_split = 0, validation_data = NULL,
                                           verbose = 1L, shuffle = TRUE, callbacks = list(),
                                           class_weight = NULL, sample_weight = NULL, ...) {
  .nn_fit(model, x, y, epochs, batch_size, validation_split, validation_data, verbose,
          shuffle, callbacks, class_weight, sample_weight)
}

#' @rdname ggml_fit
#' @export
ggml_fit.ggml_functional_model <- ggml_fit.ggml_sequential_model

#' @rdname ggml_fit
#' @export
ggml_fit.default <- function(model, ...) {
  if (missing(model)) return(ggml_fit_opt(...))
  if (inherits(model, "ggml_backend_sched")) return(ggml_fit_opt(model, ...))
  .abort(sprintf("ggml_fit(): `model` must be a compiled ggml_sequential_model or ggml_functional_model (or a scheduler for ggml's own trainer), not %s",
                 paste(class(model), collapse = "/")))
}

.nn_verbose <- function(verbose) {
  if (is.logical(verbose) && length(verbose) == 1L && !is.na(verbose)) return(as.integer(verbose))
  if (is.numeric(verbose) && length(verbose) == 1L && !is.na(verbose)) return(as.integer(min(max(verbose, 0), 2)))
  .abort("`verbose` must be 0, 1, 2, TRUE or FALSE", call = sys.call(-1L))
}

# Prepared data: inputs, targets, weights.
.nn_data <- function(model, rt, x, y, fn, sample_weight = NULL, class_weight = NULL,
                     what_x = "`x`", what_y = "`y`") {
  px <- .nn_prepare_x(rt, x, fn, what_x, samples = identical(rt$device, "gpu"))
  tg <- .nn_loss_target(rt, model$compilation$loss)
  if (is.null(y)) .abort(sprintf("%s(): %s is missing", fn, what_y), call = NULL)
  py <- .nn_prepare_y(y, model$compilation$loss, tg$k, px$n, tg$step$label, fn, what_y)
  w <- .nn_sample_weights(sample_weight, class_weight, py$cls, px$n, fn)
  list(x = px$x, n = px$n, y = py$y, w = w)
}

.nn_subset <- function(d, idx) {
  list(x = lapply(d$x, .nn_columns, idx = idx), n = length(idx),
       y = d$y[, idx, drop = FALSE], w = if (!is.null(d$w)) d$w[idx])
}

# The optimizer of a runtime over its trainable parameters (made again when
# that set changes; kept between fits otherwise, as Keras does).
.nn_optimizer <- function(model, rt) {
  .nn_refresh_trainable(model, rt)
  params <- .nn_trainable_params(rt)
  for (st in rt$plan$steps) {
    if (is.null(st$key)) next
    for (p in rt$weights[[st$key]]) p$requires_grad <- FALSE
  }
  for (p in params) p$requires_grad <- TRUE
  if (!length(params)) return(NULL)
  if (!is.null(rt$optimizer) && identical(names(rt$opt_params), names(params))) return(rt$optimizer)
  cmp <- model$compilation
  lr <- cmp$learning_rate
  opt <- if (is.function(cmp$optimizer_fn)) {
    o <- cmp$optimizer_fn(params)
    if (!inherits(o, "ag_optimizer")) .abort("the `optimizer` function must return an optimizer (optimizer_adam(), ...)", call = NULL)
    o
  } else switch(cmp$optimizer,
    adam = optimizer_adam(params, lr = lr %||% 0.001),
    adamw = optimizer_adamw(params, lr = lr %||% 0.001),
    sgd = optimizer_sgd(params, lr = lr %||% 0.01))
  rt$optimizer <- opt
  rt$opt_params <- params
  opt
}

# Layers frozen or unfrozen after compiling take effect at the next fit.
.nn_refresh_trainable <- function(model, rt) {
  steps <- rt$plan$steps
  if (inherits(model, "ggml_sequential_model")) {
    for (j in seq_along(steps)) {
      i <- steps[[j]]$layer_index
      if (!is.na(i)) steps[[j]]$trainable <- isTRUE(model$layers[[i]]$trainable)
    }
  } else {
    ov <- model$trainable_override %||% logical(0)
    for (j in seq_along(steps)) {
      v <- ov[steps[[j]]$label]
      if (!is.na(v)) steps[[j]]$trainable <- v[[1L]]
    }
  }
  rt$plan$steps <- steps
  invisible(rt)
}

.nn_fit <- function(model, x, y, epochs, batch_size, validation_split, validation_data,
                    verbose, shuffle, callbacks, class_weight, sample_weight, fn = "ggml_fit") {
  rt <- .nn_runtime_of(model, fn)
  epochs <- .nn_int(epochs, "epochs")
  batch_size <- .nn_int(batch_size, "batch_size")
  verbose <- .nn_verbose(verbose)
  shuffle <- .nn_check_flag(shuffle, "shuffle")
  if (!is.list(callbacks) || (length(callbacks) && !all(vapply(callbacks, is.list, logical(1L))))) {
    .abort(sprintf("%s(): `callbacks` must be a list of callbacks (lists with on_epoch_begin / on_epoch_end functions)", fn),
           call = NULL)
  }
  d <- .nn_data(model, rt, x, y, fn, sample_weight, class_weight)
  val <- NULL
  if (!is.null(validation_data)) {
    if (!is.list(validation_data) || is.data.frame(validation_data) || length(validation_data) < 2L) {
      .abort(sprintf("%s(): `validation_data` must be a list: list(x_val, y_val)", fn), call = NULL)
    }
    val <- .nn_data(model, rt, validation_data[[1L]], validation_data[[2L]], fn,
                    sample_weight = if (length(validation_data) > 2L) validation_data[[3L]],
                    what_x = "validation_data[[1]]", what_y = "validation_data[[2]]")
  } else {
    if (!is.numeric(validation_split) || length(validation_split) != 1L || is.na(validation_split) ||
        validation_split < 0 || validation_split >= 1) {
      .abort(sprintf("%s(): `validation_split` must be a number in [0, 1)", fn), call = NULL)
    }
    nv <- floor(d$n * validation_split)
    if (nv > 0) {
      if (nv >= d$n) .abort(sprintf("%s(): `validation_split` leaves no training samples", fn), call = NULL)
      vi <- seq.int(d$n - nv + 1L, d$n)
      val <- .nn_subset(d, vi)
      d <- .nn_subset(d, seq_len(d$n - nv))
    }
  }
  opt <- .nn_optimizer(model, rt)
  tg <- .nn_loss_target(rt, model$compilation$loss)
  state <- new.env(parent = emptyenv())
  state$stop <- FALSE
  state$nepoch <- epochs
  state$lr_ud <- .nn_lr_handle(opt)
  state$model <- model
  hist <- list(train_loss = numeric(0), train_accuracy = numeric(0),
               val_loss = numeric(0), val_accuracy = numeric(0))
  nb <- ceiling(d$n / batch_size)
  for (ep in seq_len(epochs)) {
    for (cb in callbacks) if (is.function(cb$on_epoch_begin)) cb$on_epoch_begin(ep, list(), state)
    if (isTRUE(state$stop)) break
    t0 <- proc.time()[["elapsed"]]
    ord <- if (shuffle) sample.int(d$n) else seq_len(d$n)
    bar <- .nn_bar_start(verbose, ep, epochs, nb)
    tot_l <- 0
    tot_c <- 0
    for (b in seq_len(nb)) {
      idx <- ord[((b - 1L) * batch_size + 1L):min(b * batch_size, d$n)]
      r <- .nn_train_step(rt, tg, opt, d, idx)
      tot_l <- tot_l + r[1L] * length(idx)
      tot_c <- tot_c + r[2L]
      seen <- min(b * batch_size, d$n)
      .nn_bar_update(bar, tot_l / seen, tot_c / seen)
    }
    .nn_bar_done(bar)
    logs <- list(train_loss = tot_l / d$n, train_accuracy = tot_c / d$n,
                 val_loss = NA_real_, val_accuracy = NA_real_)
    if (!is.null(val)) {
      ev <- .nn_eval(rt, tg, val, batch_size)
      logs$val_loss <- ev[["loss"]]
      logs$val_accuracy <- ev[["accuracy"]]
    }
    logs$loss <- logs$train_loss
    logs$accuracy <- logs$train_accuracy
    for (nm in names(hist)) hist[[nm]] <- c(hist[[nm]], logs[[nm]])
    if (verbose > 0L) .nn_epoch_line(ep, epochs, proc.time()[["elapsed"]] - t0, logs)
    for (cb in callbacks) if (is.function(cb$on_epoch_end)) cb$on_epoch_end(ep, logs, state)
    if (isTRUE(state$stop)) break
  }
  model$history <- structure(c(hist, list(epochs = seq_along(hist$train_loss))), class = "ggml_history")
  model$compilation$runtime <- rt
  model
}

# One training step: loss and number of correct predictions of the batch.
# The step's intermediates (batch, activations, loss: tensors nothing
# outside this function sees) are released as soon as they have been read,
# not when R's garbage collector gets to them, so the next step reuses their
# memory (see .nn_scratch()).
.nn_train_step <- function(rt, tg, opt, d, idx) {
  .nn_scratch(TRUE)
  on.exit(.nn_scratch(FALSE))
  yb <- d$y[, idx, drop = FALSE]
  wb <- if (!is.null(d$w)) d$w[idx]
  if (is.null(opt)) {
    # Everything frozen: batch norm still learns its statistics.
    xb <- .nn_batch(rt, d$x, idx)
    vals <- .nn_run(rt, xb, training = TRUE, logits = if (tg$fused) tg$id)
    out <- vals[[tg$id]]
    l <- .nn_loss_value(tg$kind, out, yb, wb, tg$fused)
    grads <- NULL
  } else {
    # The batch is made on the tape: starting a tape on device "gpu" frees
    # the pass pool it would be in.
    with_grad_tape({
      xb <- .nn_batch(rt, d$x, idx)
      vals <- .nn_run(rt, xb, training = TRUE, logits = if (tg$fused) tg$id)
      out <- vals[[tg$id]]
      l <- .nn_loss_value(tg$kind, out, yb, wb, tg$fused)
    })
    grads <- backward(l)
  }
  r <- c(sum(.ag_data(l)), .nn_correct(tg$kind, .ag_data(out), yb, tg$fused))
  .nn_scratch(FALSE)
  if (!is.null(grads)) {
    opt$step(grads)
    opt$zero_grad()
  }
  r
}

# Opens (TRUE) or closes (FALSE) the engine's scratch scope: closing it frees
# the memory of every tensor made since it opened (reading one afterwards is
# an error), so a loop over batches reuses the same buffers step after step.
.nn_scratch <- function(open) invisible(.rs(rs_ag_scratch(open)))

# Loss and accuracy of data `d` in evaluation mode.
.nn_eval <- function(rt, tg, d, batch_size) {
  tot_l <- 0
  tot_c <- 0
  on.exit(.nn_scratch(FALSE))
  for (s in seq(1L, d$n, by = batch_size)) {
    .nn_scratch(TRUE)
    idx <- s:min(s + batch_size - 1L, d$n)
    vals <- .nn_run(rt, .nn_batch(rt, d$x, idx), training = FALSE, logits = if (tg$fused) tg$id)
    out <- vals[[tg$id]]
    yb <- d$y[, idx, drop = FALSE]
    wb <- if (!is.null(d$w)) d$w[idx]
    tot_l <- tot_l + sum(.ag_data(.nn_loss_value(tg$kind, out, yb, wb, tg$fused))) * length(idx)
    tot_c <- tot_c + .nn_correct(tg$kind, .ag_data(out), yb, tg$fused)
  }
  c(loss = tot_l / d$n, accuracy = tot_c / d$n)
}

#' Evaluate a model
#'
#' The loss (as in training: weighted when weights are given) and the
#' accuracy of a compiled model on `x`, `y`, in evaluation mode (no dropout;
#' batch normalisation uses its running statistics).
#'
#' @inheritParams ggml_fit
#' @param verbose Unused (kept for compatibility).
#' @return A list: `loss`, `accuracy` (`NA` when the loss has none) and
#'   `n_samples`.
#' @family training
#' @export
#' @examples
#' x <- matrix(runif(40), 10, 4)
#' y <- cbind(x[, 1] > 0.5, x[, 1] <= 0.5) * 1
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(2, activation = "softmax", input_shape = 4) |>
#'   ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
#' ggml_evaluate(model, x, y)
ggml_evaluate <- function(model, ...) UseMethod("ggml_evaluate")

#' @rdname ggml_evaluate
#' @export
ggml_evaluate.default <- function(model, x, y, batch_size = 32L, sample_weight = NULL,
                                  class_weight = NULL, verbose = 0L, ...) {
  rt <- .nn_runtime_of(model, "ggml_evaluate")
  batch_size <- .nn_int(batch_size, "batch_size")
  d <- .nn_data(model, rt, x, y, "ggml_evaluate", sample_weight, class_weight)
  tg <- .nn_loss_target(rt, model$compilation$loss)
  ev <- .nn_eval(rt, tg, d, batch_size)
  list(loss = ev[["loss"]], accuracy = ev[["accuracy"]], n_samples = d$n)
}

#' Predict with a model
#'
#' Runs the model in evaluation mode on `x` in batches.
#'
#' @inheritParams ggml_fit
#' @param verbose Unused (kept for compatibility).
#' @return A matrix with one row per sample (several outputs: a list of
#'   them). `ggml_predict_classes()`: the 1-based index of the largest output
#'   of each sample (for one output unit: 2 when it is above 0.5, else 1).
#' @family training
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(3, activation = "softmax", input_shape = 4) |>
#'   ggml_compile(loss = "categorical_crossentropy", backend = "cpu")
#' x <- matrix(runif(20), 5, 4)
#' ggml_predict(model, x)
#' ggml_predict_classes(model, x)
ggml_predict <- function(model, ...) UseMethod("ggml_predict")

#' @rdname ggml_predict
#' @export
ggml_predict.default <- function(model, x, batch_size = 32L, verbose = 0L, ...) {
  rt <- .nn_runtime_of(model, "ggml_predict")
  batch_size <- .nn_int(batch_size, "batch_size")
  px <- .nn_prepare_x(rt, x, "ggml_predict")
  outs <- rt$plan$outputs
  res <- lapply(outs, function(id) matrix(0, px$n, prod(.nn_step(rt$plan, id)$out_shape)))
  on.exit(.nn_scratch(FALSE))
  for (s in seq(1L, px$n, by = batch_size)) {
    .nn_scratch(TRUE)
    idx <- s:min(s + batch_size - 1L, px$n)
    vals <- .nn_run(rt, .nn_batch(rt, px$x, idx), training = FALSE)
    for (i in seq_along(outs)) res[[i]][idx, ] <- t(.ag_data(vals[[outs[i]]]))
  }
  if (length(res) == 1L) res[[1L]] else res
}

#' @rdname ggml_predict
#' @export
ggml_predict_classes <- function(model, x, batch_size = 32L, ...) {
  p <- ggml_predict(model, x, batch_size = batch_size)
  if (is.list(p)) p <- p[[length(p)]]
  if (ncol(p) == 1L) return(1L + as.integer(p[, 1L] > 0.5))
  as.integer(max.col(p, ties.method = "first"))
}
