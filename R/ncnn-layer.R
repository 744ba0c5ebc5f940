#' A custom ncnn layer written in R
#'
#' Creates the layer object that a creator registered with
#' `net$register_custom_layer()` returns. The net calls `forward` each time the
#' layer runs.
#'
#' Blobs are numeric arrays with `dim = c(w)`, `c(w, h)`, `c(w, h, c)` or
#' `c(w, h, d, c)` (w varies fastest, as in ncnn's memory order).
#'
#' When given, `load_param` runs when the param is loaded, `load_model` when
#' the weights are loaded, `create_pipeline` once every layer has its
#' weights, and `destroy_pipeline` before the layer is destroyed or its
#' weights are loaded again (only after a `create_pipeline` that succeeded).
#'
#' `load_param` receives a param dict `pd` with one method, `pd$get(id,
#' default)`: the value the param gives key `id` (0 to 31), an integer, a
#' double, a numeric vector (an array) or a string, or `default` when the key
#' is absent. A binary `.param.bin` does not record whether a value is an
#' integer or a float: an integer `default` (`0L`) reads an integer, a double
#' one a float, except that bits which are no normal float (a small or
#' negative integer) read as an integer. `pd` is the layer's own copy and may
#' be kept.
#'
#' `load_model` receives a reader `mb` with one method, `mb$load(w, type =
#' 0)`: the next `prod(w)` weights of the model file, in file order, as a
#' vector, or as an array with `dim = w` when `w` has 2 to 4 extents. Type 0
#' is a tagged array (fp32, fp16, int8 or a 256-value table, decoded as ncnn
#' decodes them; int8 weights come as an integer vector), type 1 raw fp32
#' (biases and other untagged arrays). The reader works only during the call.
#'
#' `create_pipeline` and `destroy_pipeline` receive the options, a list with
#' `num_threads`.
#'
#' @param forward A function. When `one_blob_only` is `TRUE` it receives the
#'   bottom blob (an array) and returns the top blob; otherwise it receives a
#'   list of bottom blobs and returns a list of top blobs, one per top the
#'   param declares.
#' @param one_blob_only Whether the layer has exactly one bottom and one top.
#' @param support_inplace Whether the layer may write its result over its
#'   input (recorded for compatibility; the package always passes copies).
#' @param load_param,load_model,create_pipeline,destroy_pipeline `NULL`, or
#'   a function of one argument (`pd`, `mb`, the options), called as
#'   described above. What they return is ignored; an error in one of the
#'   first three fails the load, one in `destroy_pipeline` is dropped.
#' @return An object of class `ncnn_layer` (an environment, so that a
#'   destroyer receives the identical object the creator returned and layers
#'   may keep state).
#' @seealso [ncnn_net()]
#' @export
#' @examples
#' plus_one <- ncnn_layer(function(x) x + 1)
#' plus_one$forward(array(1:4, c(2, 2)))
#'
#' # A layer with a parameter and weights: y = x * w + (key 0).
#' scale_shift <- function() {
#'   self <- ncnn_layer(function(x) x * self$w + self$shift,
#'     load_param = function(pd) self$shift <- pd$get(0, 0),
#'     load_model = function(mb) self$w <- mb$load(1, 1)
#'   )
#'   self
#' }
#' net <- ncnn_net(num_threads = 1)
#' net$register_custom_layer("ScaleShift", scale_shift)
#' net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nScaleShift s 1 1 data out 0=0.5\n")
#' net$load_model(writeBin(3, raw(), size = 4L, endian = "little"))
#' ex <- net$create_extractor()
#' ex$input("data", c(1, 2))
#' ex$extract("out")
ncnn_layer <- function(forward, one_blob_only = TRUE, support_inplace = FALSE,
                       load_param = NULL, load_model = NULL,
                       create_pipeline = NULL, destroy_pipeline = NULL) {
  if (!is.function(forward)) {
    .abort("`forward` must be a function", "ncnn_error")
  }
  if (!is.logical(one_blob_only) || length(one_blob_only) != 1L || is.na(one_blob_only)) {
    .abort("`one_blob_only` must be TRUE or FALSE", "ncnn_error")
  }
  if (!is.logical(support_inplace) || length(support_inplace) != 1L || is.na(support_inplace)) {
    .abort("`support_inplace` must be TRUE or FALSE", "ncnn_error")
  }
  callbacks <- list(
    load_param = load_param, load_model = load_model,
    create_pipeline = create_pipeline, destroy_pipeline = destroy_pipeline
  )
  for (nm in names(callbacks)) {
    if (!is.null(callbacks[[nm]]) && !is.function(callbacks[[nm]])) {
      .abort(sprintf("`%s` must be NULL or a function of one argument", nm), "ncnn_error")
    }
  }
  self <- new.env(parent = emptyenv())
  self$forward <- forward
  self$one_blob_only <- one_blob_only
  self$support_inplace <- support_inplace
  for (nm in names(callbacks)) assign(nm, callbacks[[nm]], envir = self)
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
      cb <- function(nm) if (is.function(v[[nm]])) v[[nm]] else NULL
      list(v, v$forward, isTRUE(v$one_blob_only), cb("load_param"), cb("load_model"),
           cb("create_pipeline"), cb("destroy_pipeline"))
    },
    load_param = {
      f(.ncnn_paramdict(arg))
      NULL
    },
    load_model = {
      f(.ncnn_modelbin(arg))
      NULL
    },
    create_pipeline = ,
    destroy_pipeline = {
      f(arg)
      NULL
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

# The param dict and the weight reader of a custom layer's load_param()
# and load_model(), around the engine's external pointers.
.ncnn_paramdict <- function(ptr) {
  pd <- new.env(parent = emptyenv())
  pd$get <- function(id, default = NULL) .rs(rs_ncnn_pd_get(ptr, id, default))
  class(pd) <- "ncnn_paramdict"
  pd
}

.ncnn_modelbin <- function(ptr) {
  mb <- new.env(parent = emptyenv())
  mb$load <- function(w, type = 0) .rs(rs_ncnn_mb_load(ptr, w, type))
  class(mb) <- "ncnn_modelbin"
  mb
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
