#' A custom ncnn layer written in R
#'
#' Creates the layer object that a creator registered with
#' `net$register_custom_layer()` returns. The net calls `forward` each time the
#' layer runs.
#'
#' Blobs are numeric arrays with `dim = c(w)`, `c(w, h)`, `c(w, h, c)` or
#' `c(w, h, d, c)` (w varies fastest, as in ncnn's memory order).
#'
#' @param forward A function. When `one_blob_only` is `TRUE` it receives the
#'   bottom blob (an array) and returns the top blob; otherwise it receives a
#'   list of bottom blobs and returns a list of top blobs, one per top the
#'   param declares.
#' @param one_blob_only Whether the layer has exactly one bottom and one top.
#' @param support_inplace Whether the layer may write its result over its
#'   input (recorded for compatibility; the package always passes copies).
#' @return An object of class `ncnn_layer` (an environment, so that a
#'   destroyer receives the identical object the creator returned and layers
#'   may keep state).
#' @seealso [ncnn_net()]
#' @export
#' @examples
#' plus_one <- ncnn_layer(function(x) x + 1)
#' plus_one$forward(array(1:4, c(2, 2)))
ncnn_layer <- function(forward, one_blob_only = TRUE, support_inplace = FALSE) {
  if (!is.function(forward)) {
    .abort("`forward` must be a function", "ncnn_error")
  }
  if (!is.logical(one_blob_only) || length(one_blob_only) != 1L || is.na(one_blob_only)) {
    .abort("`one_blob_only` must be TRUE or FALSE", "ncnn_error")
  }
  if (!is.logical(support_inplace) || length(support_inplace) != 1L || is.na(support_inplace)) {
    .abort("`support_inplace` must be TRUE or FALSE", "ncnn_error")
  }
  self <- new.env(parent = emptyenv())
  self$forward <- forward
  self$one_blob_only <- one_blob_only
  self$support_inplace <- support_inplace
  class(self) <- "ncnn_layer"
  self
}

#' @export
print.ncnn_layer <- function(x, ...) {
  cat(sprintf("<ncnn_layer> one_blob_only = %s\n", x$one_blob_only))
  invisible(x)
}

#' A weight source that reads zeros
#'
#' Passed to `net$load_model()`, every weight reads as zero (and every weight
#' tag as plain fp32), as with ncnn's `DataReaderFromEmpty`. Useful for nets
#' made only of layers without weights, or to check a param's structure.
#'
#' @return An object of class `ncnn_datareader`.
#' @seealso [ncnn_net()]
#' @export
#' @examples
#' net <- ncnn_net(num_threads = 1)
#' net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU relu 1 1 data out\n")
#' net$load_model(ncnn_datareader_empty())
ncnn_datareader_empty <- function() {
  structure(list(kind = "empty"), class = "ncnn_datareader")
}

# Every call from Rust into R goes through here, so that nothing in user code
# leaves through Rust's frames: errors become list(FALSE, message); an
# interrupt (Ctrl-C) or the "abort" restart becomes list(NA, "interrupt" /
# "abort"), which the engine passes up unchanged and the R wrapper raises
# again in the user's call (.rs()). Warnings and messages are muffled here
# and queued; .ncnn_relay() signals them again in the user's call.
# Returns list(TRUE, value) otherwise.
.ncnn_invoke <- function(what, f, arg) {
  withRestarts(
    tryCatch(
      withCallingHandlers(
        list(TRUE, .ncnn_call(what, f, arg)),
        warning = function(w) {
          .ncnn_queue$conds[[length(.ncnn_queue$conds) + 1L]] <- w
          invokeRestart("muffleWarning")
        },
        message = function(m) {
          .ncnn_queue$conds[[length(.ncnn_queue$conds) + 1L]] <- m
          invokeRestart("muffleMessage")
        }
      ),
      error = function(e) list(FALSE, conditionMessage(e)),
      interrupt = function(e) list(NA, "interrupt")
    ),
    abort = function() list(NA, "abort")
  )
}

.ncnn_call <- function(what, f, arg) {
  switch(what,
    create = {
      v <- f()
      if (!inherits(v, "ncnn_layer")) {
        stop(sprintf(
          "the creator returned %s, not an object made by ncnn_layer()",
          .ncnn_describe(v)
        ), call. = FALSE)
      }
      list(v, v$forward, isTRUE(v$one_blob_only))
    },
    destroy = {
      f(arg)
      NULL
    },
    forward1 = .ncnn_top(f(arg), "forward()"),
    forward = {
      v <- f(arg)
      if (!is.list(v)) {
        stop("forward() of a layer with one_blob_only = FALSE must return a list of arrays",
          call. = FALSE
        )
      }
      lapply(seq_along(v), function(i) .ncnn_top(v[[i]], sprintf("top %d of forward()", i)))
    }
  )
}

# Warnings and messages raised by custom layers while the engine ran.
.ncnn_queue <- new.env(parent = emptyenv())
.ncnn_queue$conds <- list()

# Evaluate `x` (a call into the engine), then signal again, in the caller's
# context, the warnings and messages its custom layers raised, so that
# withCallingHandlers(), suppressWarnings() and tryCatch(warning =) around
# the user's call see them. Returns `x`.
.ncnn_relay <- function(x) {
  from <- length(.ncnn_queue$conds)
  x
  q <- .ncnn_queue$conds
  if (length(q) > from) {
    .ncnn_queue$conds <- q[seq_len(from)]
    for (cnd in q[seq.int(from + 1L, length(q))]) {
      if (inherits(cnd, "warning")) warning(cnd) else message(cnd)
    }
  }
  x
}

.ncnn_describe <- function(v) {
  if (is.null(v)) "NULL" else sprintf("an object of class '%s'", paste(class(v), collapse = "/"))
}

.ncnn_top <- function(v, what) {
  if (!(is.numeric(v) || is.logical(v))) {
    stop(sprintf("%s returned %s, not a numeric array", what, .ncnn_describe(v)), call. = FALSE)
  }
  d <- dim(v)
  if (!is.null(d) && (length(d) < 1L || length(d) > 4L)) {
    stop(sprintf("%s returned an array with %d dimensions; blobs have 1 to 4", what, length(d)),
      call. = FALSE
    )
  }
  storage.mode(v) <- "double"
  v
}
