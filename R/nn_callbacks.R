# Callbacks of ggml_fit(): lists of functions called at the start and the
# end of each epoch with (epoch, logs, state). `logs` holds train_loss,
# train_accuracy, val_loss and val_accuracy; `state` is an environment with
# `stop` (set TRUE to stop), `lr_ud` (the learning rate) and `nepoch`.

.nn_mode <- function(mode, monitor, call = sys.call(-1L)) {
  if (!is.character(mode) || length(mode) != 1L || !mode %in% c("auto", "min", "max")) {
    .abort("`mode` must be \"auto\", \"min\" or \"max\"", call = call)
  }
  if (mode == "auto") if (grepl("loss", monitor)) "min" else "max" else mode
}

.nn_check_monitor <- function(monitor, call = sys.call(-1L)) {
  if (!is.character(monitor) || length(monitor) != 1L || !nzchar(monitor)) {
    .abort("`monitor` must be the name of a metric, e.g. \"val_loss\"", call = call)
  }
  monitor
}

# Tracks the best value of a metric: `$seen(v)` returns NA for a missing
# value, TRUE when `v` improves on the best by more than `min_delta` (and
# records it), FALSE otherwise; `$best()` is the best so far.
.nn_tracker <- function(mode, min_delta) {
  best <- if (mode == "min") Inf else -Inf
  list(seen = function(v) {
    if (is.null(v) || is.na(v)) return(NA)
    better <- if (mode == "min") v < best - min_delta else v > best + min_delta
    if (better) best <<- v
    better
  }, best = function() best)
}

# A callback that calls `act(epoch, wait, best, state)` at the end of an
# epoch once `monitor` has not improved for `patience` epochs; `act` returns
# TRUE to start waiting again.
.nn_on_plateau <- function(monitor, mode, patience, min_delta, act, call = sys.call(-1L)) {
  monitor <- .nn_check_monitor(monitor, call = call)
  track <- .nn_tracker(.nn_mode(mode, monitor, call = call), .nn_nonneg(min_delta, "min_delta", call = call))
  patience <- .nn_nonneg(patience, "patience", call = call)
  wait <- 0L
  list(on_epoch_end = function(epoch, logs, state) {
    better <- track$seen(logs[[monitor]])
    if (is.na(better)) return(invisible())
    wait <<- if (better) 0L else wait + 1L
    if (wait >= patience && !better && isTRUE(act(epoch, wait, track$best(), state))) wait <<- 0L
    invisible()
  })
}

.nn_nonneg <- function(x, what, call = sys.call(-1L)) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 0) {
    .abort(sprintf("`%s` must be a non-negative number", what), call = call)
  }
  as.double(x)
}

#' Early stopping
#'
#' Stops [ggml_fit()] when `monitor` has not improved by more than
#' `min_delta` for `patience` epochs. Epochs where the metric is missing
#' (e.g. `val_loss` without validation data) are ignored.
#'
#' @param monitor Metric: `"val_loss"`, `"val_accuracy"`, `"train_loss"` or
#'   `"train_accuracy"`.
#' @param patience Epochs without improvement before stopping.
#' @param min_delta Smallest change that counts as an improvement.
#' @param mode `"min"`, `"max"`, or `"auto"` (`"min"` for losses).
#' @param verbose Print a message when stopping.
#' @return A callback: a list with `on_epoch_end`.
#' @family callbacks
#' @export
#' @examples
#' cb <- ggml_callback_early_stopping(monitor = "val_loss", patience = 2)
#' state <- new.env()
#' state$stop <- FALSE
#' for (ep in 1:4) cb$on_epoch_end(ep, list(val_loss = 1), state)
#' state$stop
ggml_callback_early_stopping <- function(monitor = "val_loss", patience = 5, min_delta = 0,
                                         mode = "auto", verbose = TRUE) {
  .nn_on_plateau(monitor, mode, patience, min_delta, function(epoch, wait, best, state) {
    if (isTRUE(verbose)) {
      message(sprintf("Early stopping at epoch %d: %s has not improved for %d epochs (best %.4g)",
                      epoch, monitor, wait, best))
    }
    state$stop <- TRUE
    FALSE
  })
}

#' Learning-rate schedules
#'
#' Callbacks for [ggml_fit()] that change the learning rate:
#' * `ggml_schedule_step_decay()`: multiplies it by `gamma` at the start of
#'   epochs `1 + step_size`, `1 + 2 * step_size`, ...
#' * `ggml_schedule_cosine_decay()`: sets it at the start of epoch `e` to
#'   `eta_min + (eta_max - eta_min) * (1 + cos(pi * (e - 1) / T_max)) / 2`,
#'   where `eta_max` is the rate at the first epoch and `T_max` defaults to
#'   the number of epochs.
#' * `ggml_schedule_reduce_on_plateau()`: multiplies it by `factor` (never
#'   below `min_lr`) when `monitor` has not improved for `patience` epochs,
#'   then waits `patience` epochs again.
#'
#' @param step_size Epochs between reductions.
#' @param gamma,factor Multiplier of the rate.
#' @param eta_min Smallest rate of the cosine.
#' @param T_max Epochs of the cosine (default: the run's epochs).
#' @param monitor Metric watched by the plateau schedule.
#' @param patience Epochs without improvement before a reduction.
#' @param min_lr Smallest rate.
#' @param min_delta Smallest change that counts as an improvement.
#' @param mode `"min"`, `"max"` or `"auto"`.
#' @param verbose Print a message at each reduction.
#' @return A callback: a list with `on_epoch_begin` or `on_epoch_end`.
#' @family callbacks
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(runif(80), 40, 2)
#' y <- x %*% c(1, -1)
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(1, input_shape = 2) |>
#'   ggml_compile(optimizer = "sgd", loss = "mse", learning_rate = 0.1, backend = "cpu")
#' lrs <- numeric(0)
#' record <- list(on_epoch_end = function(epoch, logs, state) {
#'   lrs[epoch] <<- ggml_opt_get_lr(state$lr_ud)[["sgd"]]
#' })
#' # halve the rate every two epochs
#' step <- ggml_schedule_step_decay(step_size = 2, gamma = 0.5)
#' model <- ggml_fit(model, x, y, epochs = 6, batch_size = 10, verbose = 0,
#'                   callbacks = list(step, record))
#' lrs
#' # a cosine from 0.1 down to 0.01 over the six epochs
#' lrs <- numeric(0)
#' model <- ggml_compile(model, optimizer = "sgd", loss = "mse", learning_rate = 0.1,
#'                       backend = "cpu")
#' cosine <- ggml_schedule_cosine_decay(eta_min = 0.01)
#' model <- ggml_fit(model, x, y, epochs = 6, batch_size = 10, verbose = 0,
#'                   callbacks = list(cosine, record))
#' round(lrs, 4)
#' # halve it when the validation loss stops improving
#' plateau <- ggml_schedule_reduce_on_plateau(patience = 1, factor = 0.5)
#' model <- ggml_fit(model, x, y, epochs = 3, batch_size = 10, verbose = 0,
#'                   validation_split = 0.25, callbacks = list(plateau))
ggml_schedule_step_decay <- function(step_size = 10, gamma = 0.1, verbose = FALSE) {
  step_size <- .nn_int(step_size, "step_size")
  gamma <- .nn_nonneg(gamma, "gamma")
  list(on_epoch_begin = function(epoch, logs, state) {
    if (epoch > 1 && (epoch - 1) %% step_size == 0) {
      lr <- .nn_lr_get(state$lr_ud) * gamma
      .nn_lr_set(state$lr_ud, lr)
      if (isTRUE(verbose)) message(sprintf("Epoch %d: learning rate %.6g", epoch, lr))
    }
    invisible()
  })
}

#' @rdname ggml_schedule_step_decay
#' @export
ggml_schedule_cosine_decay <- function(eta_min = 0, T_max = NULL) {
  eta_min <- .nn_nonneg(eta_min, "eta_min")
  if (!is.null(T_max)) T_max <- .nn_int(T_max, "T_max")
  eta_max <- NULL
  list(on_epoch_begin = function(epoch, logs, state) {
    if (is.null(eta_max)) eta_max <<- .nn_lr_get(state$lr_ud)
    tm <- T_max %||% state$nepoch %||% epoch
    .nn_lr_set(state$lr_ud, eta_min + 0.5 * (eta_max - eta_min) * (1 + cos(pi * (epoch - 1) / tm)))
    invisible()
  })
}

#' @rdname ggml_schedule_step_decay
#' @export
ggml_schedule_reduce_on_plateau <- function(monitor = "val_loss", factor = 0.5, patience = 5,
                                            min_lr = 1e-7, min_delta = 1e-4, mode = "auto",
                                            verbose = TRUE) {
  factor <- .nn_nonneg(factor, "factor")
  min_lr <- .nn_nonneg(min_lr, "min_lr")
  .nn_on_plateau(monitor, mode, patience, min_delta, function(epoch, wait, best, state) {
    lr <- max(.nn_lr_get(state$lr_ud) * factor, min_lr)
    .nn_lr_set(state$lr_ud, lr)
    if (isTRUE(verbose)) {
      message(sprintf("Epoch %d: learning rate %.6g (%s has not improved for %d epochs)",
                      epoch, lr, monitor, wait))
    }
    TRUE
  })
}
