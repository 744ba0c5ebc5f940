# Training progress as Keras shows it: a progress bar during each epoch
# (verbose = 1) and one line per epoch left behind (verbose = 1 or 2).

.nn_bar_start <- function(verbose, ep, epochs, n_batches) {
  if (verbose != 1L) return(NULL)
  # The format's expressions are evaluated here (they need `::`).
  env <- new.env(parent = baseenv())
  env$loss <- NA_real_
  env$acc <- NA_real_
  env$ep <- ep
  env$epochs <- epochs
  env$fmt <- function(v) if (is.na(v)) "-" else sprintf("%.4f", v)
  env$id <- cli::cli_progress_bar(
    total = n_batches, clear = TRUE, .envir = env,
    format = paste("Epoch {ep}/{epochs} {cli::pb_bar} {cli::pb_current}/{cli::pb_total}",
                   "- loss: {fmt(loss)} - accuracy: {fmt(acc)} - {cli::pb_eta}"))
  env
}

.nn_bar_update <- function(bar, loss, acc) {
  if (is.null(bar)) return(invisible())
  bar$loss <- loss
  bar$acc <- acc
  cli::cli_progress_update(id = bar$id, .envir = bar)
}

.nn_bar_done <- function(bar) {
  if (!is.null(bar)) cli::cli_progress_done(id = bar$id, .envir = bar)
  invisible()
}

.nn_fmt_metric <- function(v) if (is.na(v)) NULL else sprintf("%.4f", v)

.nn_epoch_line <- function(ep, epochs, secs, logs) {
  parts <- c(sprintf("Epoch %d/%d", ep, epochs), sprintf("%.2fs", secs))
  for (nm in c("train_loss", "train_accuracy", "val_loss", "val_accuracy")) {
    v <- .nn_fmt_metric(logs[[nm]])
    if (!is.null(v)) parts <- c(parts, sprintf("%s: %s", sub("^train_", "", nm), v))
  }
  cat(paste(parts, collapse = " - "), "\n", sep = "")
}
