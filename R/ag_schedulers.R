# Learning-rate schedulers: they change `optimizer$lr` at each `$step()`.

#' Learning-rate schedulers
#'
#' * `lr_scheduler_step`: multiplies the learning rate by `gamma` every
#'   `step_size` calls of `$step()`.
#' * `lr_scheduler_cosine`: sets it to
#'   `lr_min + (lr_max - lr_min) * (1 + cos(pi * t / T_max)) / 2` where
#'   `lr_max` is the optimizer's rate at creation and `t` the number of
#'   previous steps, held at `T_max - 1` (or, with `restart = TRUE`, taken
#'   modulo `T_max`).
#'
#' @param optimizer An optimizer.
#' @param step_size Steps between decays.
#' @param gamma Decay factor.
#' @param T_max Steps of one cosine cycle.
#' @param lr_min Smallest learning rate.
#' @param restart Start a new cycle after `T_max` steps.
#' @return A scheduler environment with `$step()` (returns the new rate
#'   invisibly) and `$get_lr()`.
#' @name lr_schedulers
#' @examples
#' w <- ag_param(matrix(1, 2, 2))
#' opt <- optimizer_sgd(list(w = w), lr = 0.1)
#' sch <- lr_scheduler_step(opt, step_size = 10, gamma = 0.5)
#' for (i in 1:30) sch$step()
#' opt$lr
#' sc <- lr_scheduler_cosine(opt, T_max = 20, lr_min = 0.001)
#' round(sapply(1:20, function(i) sc$step()), 4)
NULL

.ag_scheduler <- function(optimizer, cls) {
  if (!inherits(optimizer, "ag_optimizer") && !(is.environment(optimizer) && is.numeric(optimizer$lr))) {
    .abort("`optimizer` must be an optimizer (optimizer_sgd(), optimizer_adam(), ...)", call = sys.call(-1L))
  }
  env <- new.env(parent = emptyenv())
  env$optimizer <- optimizer
  env$last_epoch <- 0L
  env$get_lr <- function() env$optimizer$lr
  class(env) <- c(cls, "ag_scheduler")
  env
}

#' @rdname lr_schedulers
#' @export
lr_scheduler_step <- function(optimizer, step_size, gamma = 0.1) {
  env <- .ag_scheduler(optimizer, "lr_scheduler_step")
  env$step_size <- as.integer(.ag_scalar(step_size, "step_size"))
  if (env$step_size < 1L) .abort("`step_size` must be at least 1")
  env$gamma <- .ag_scalar(gamma, "gamma")
  env$step <- function() {
    env$last_epoch <- env$last_epoch + 1L
    if (env$last_epoch %% env$step_size == 0L) env$optimizer$lr <- env$optimizer$lr * env$gamma
    invisible(env$optimizer$lr)
  }
  env
}

#' @rdname lr_schedulers
#' @export
lr_scheduler_cosine <- function(optimizer, T_max, lr_min = 0, restart = FALSE) {
  env <- .ag_scheduler(optimizer, "lr_scheduler_cosine")
  env$T_max <- as.integer(.ag_scalar(T_max, "T_max"))
  if (env$T_max < 1L) .abort("`T_max` must be at least 1")
  env$lr_min <- .ag_scalar(lr_min, "lr_min")
  env$lr_max <- optimizer$lr
  env$restart <- isTRUE(restart)
  env$step <- function() {
    env$last_epoch <- env$last_epoch + 1L
    t <- env$last_epoch - 1L
    t <- if (env$restart) t %% env$T_max else min(t, env$T_max - 1L)
    lr <- env$lr_min + 0.5 * (env$lr_max - env$lr_min) * (1 + cos(pi * t / env$T_max))
    env$optimizer$lr <- lr
    invisible(lr)
  }
  env
}

#' @export
print.ag_scheduler <- function(x, ...) {
  cat(sprintf("<%s> step %d, lr %g\n", class(x)[1L], x$last_epoch, x$get_lr()))
  invisible(x)
}
