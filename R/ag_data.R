# Mini-batches.

#' Mini-batch iterator
#'
#' Splits the columns (samples) of `x` (and `y`) into batches of
#' `batch_size`; a last incomplete batch is left out. `$reset()` starts an
#' epoch (reshuffled when `shuffle = TRUE`), `$has_next()` and
#' `$next_batch()` (a list with `ag_tensor`s `x` and, with `y`, `y`) iterate,
#' `$epoch()` returns all the batches of a new epoch, `$n_batches()` counts
#' them.
#'
#' @param x Features `[features, n]` (or `[n, features]` with
#'   `col_major = FALSE`).
#' @param y Targets with the same layout, or `NULL`.
#' @param batch_size Samples per batch.
#' @param shuffle Shuffle at each `$reset()`.
#' @param col_major `TRUE` when samples are columns.
#' @return An `ag_dataloader` environment.
#' @export
#' @examples
#' dl <- ag_dataloader(matrix(runif(4 * 10), 4, 10), batch_size = 4)
#' dl$n_batches()
#' while (dl$has_next()) print(dim(dl$next_batch()$x))
ag_dataloader <- function(x, y = NULL, batch_size = 32L, shuffle = TRUE, col_major = TRUE) {
  x <- .ag_num(x, "x")
  if (!is.null(y)) y <- .ag_num(y, "y")
  if (!col_major) {
    x <- t(x)
    if (!is.null(y)) y <- t(y)
  }
  n <- ncol(x)
  if (!is.null(y) && ncol(y) != n) {
    .abort(sprintf("`x` has %d samples but `y` has %d (samples are %s)", n, ncol(y),
                   if (col_major) "columns" else "rows"))
  }
  env <- new.env(parent = emptyenv())
  env$x <- x
  env$y <- y
  env$n <- n
  env$batch_size <- .ag_count(batch_size, "batch_size")
  env$shuffle <- isTRUE(shuffle)
  env$order <- seq_len(n)
  env$pos <- 1L
  env$reset <- function() {
    env$order <- if (env$shuffle) sample.int(env$n) else seq_len(env$n)
    env$pos <- 1L
    invisible(env)
  }
  env$has_next <- function() env$pos + env$batch_size - 1L <= env$n
  env$next_batch <- function() {
    if (!env$has_next()) .abort("no more batches in this epoch; call $reset() to start a new one")
    idx <- env$order[env$pos:(env$pos + env$batch_size - 1L)]
    env$pos <- env$pos + env$batch_size
    b <- list(x = ag_tensor(env$x[, idx, drop = FALSE]))
    if (!is.null(env$y)) b$y <- ag_tensor(env$y[, idx, drop = FALSE])
    b
  }
  env$epoch <- function() {
    env$reset()
    out <- list()
    while (env$has_next()) out[[length(out) + 1L]] <- env$next_batch()
    out
  }
  env$n_batches <- function() env$n %/% env$batch_size
  class(env) <- "ag_dataloader"
  env$reset()
  env
}

#' @export
print.ag_dataloader <- function(x, ...) {
  cat(sprintf("<ag_dataloader> %d samples, batch size %d, %d batches per epoch%s\n",
              x$n, x$batch_size, x$n_batches(), if (x$shuffle) ", shuffled" else ""))
  invisible(x)
}
