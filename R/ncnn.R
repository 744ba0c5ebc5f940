#' An ncnn network
#'
#' Loads ncnn models (a `.param` and its `.bin` weights) and runs them, with
#' custom layers written as R functions.
#'
#' The object has these methods:
#' \describe{
#' \item{`register_custom_layer(type, creator, destroyer = NULL)`}{Registers a
#'   layer type for this net. `type` is a layer type name, or a type index as in
#'   ncnn (a builtin index overrides that builtin; `256 + i` is custom slot
#'   `i`). A builtin name overrides the builtin. `creator` is a function of no
#'   arguments returning an [ncnn_layer()]; `destroyer`, when given, receives
#'   the very object the creator returned when the net destroys the layer
#'   (`clear()`, reloading, or the net being garbage collected). The current
#'   registration for a type destroys every layer of that type.}
#' \item{`load_param(path)`, `load_param_mem(text)`, `load_param_bin(path)`}{Load
#'   the network structure from a text `.param` file, text held in a string, or
#'   a binary `.param.bin` file.}
#' \item{`load_model(source)`}{Load the weights: a `.bin` path, a raw vector, or
#'   [ncnn_datareader_empty()].}
#' \item{`clear()`}{Destroy all layers; registrations stay.}
#' \item{`input_names()`, `output_names()`}{Blob names of the inputs (tops of
#'   `Input` layers) and outputs (blobs nothing consumes).}
#' \item{`layers()`}{A data frame: name, type, type_index, custom, bottoms, tops
#'   (the last two: 0-based blob indexes, comma-separated).}
#' \item{`create_extractor()`}{An extractor with methods `input(blob, x)` and
#'   `extract(blob)`; `blob` is a name or a 0-based blob index.}
#' }
#' A binary `.param.bin` holds no names, as in ncnn: layer and blob names are
#' empty strings, and blobs are given to `input()` and `extract()` by their
#' 0-based index, which `layers()` lists (the `tops` of the `Input` layers are
#' the inputs).
#'
#' Methods return invisibly on success. Every failure is an R error of class
#' `ncnn_error` that says what failed and where; the net stays usable.
#'
#' Blobs are numeric arrays with `dim = c(w)`, `c(w, h)`, `c(w, h, c)` or
#' `c(w, h, d, c)`: w varies fastest, as in ncnn's memory order.
#'
#' @param num_threads Worker threads for builtin layers (`NULL`: one per core).
#'   Custom layers always run on the calling R thread.
#' @param light_mode Release every blob, inputs included, once the layer that
#'   consumes it has run (less memory). Use `FALSE` to extract earlier blobs
#'   after later ones from the same extractor.
#' @return An object of class `ncnn_net`.
#' @seealso [ncnn_layer()], [ncnn_datareader_empty()]
#' @export
#' @examples
#' net <- ncnn_net(num_threads = 1)
#' net$register_custom_layer("AddOne", function() ncnn_layer(function(x) x + 1))
#' net$load_param_mem(paste(
#'   "7767517", "3 3",
#'   "Input data 0 1 data",
#'   "AddOne plus 1 1 data y",
#'   "ReLU relu 1 1 y out",
#'   sep = "\n"
#' ))
#' net$load_model(ncnn_datareader_empty())
#' ex <- net$create_extractor()
#' ex$input("data", array(c(-3, -1, 0, 2), c(2, 2)))
#' ex$extract("out")
ncnn_net <- function(num_threads = NULL, light_mode = TRUE) {
  if (!is.null(num_threads) && (!is.numeric(num_threads) || length(num_threads) != 1L ||
    is.na(num_threads) || num_threads < 1 || num_threads != round(num_threads))) {
    .abort("`num_threads` must be NULL or a whole number >= 1", "ncnn_error")
  }
  if (!is.logical(light_mode) || length(light_mode) != 1L || is.na(light_mode)) {
    .abort("`light_mode` must be TRUE or FALSE", "ncnn_error")
  }
  ptr <- .rs(rs_ncnn_net_new(num_threads, light_mode, .ncnn_invoke))
  self <- new.env(parent = emptyenv())
  self$.ptr <- ptr

  self$register_custom_layer <- function(type, creator, destroyer = NULL) {
    ok_type <- (is.character(type) && length(type) == 1L && !is.na(type)) ||
      (is.numeric(type) && length(type) == 1L && !is.na(type) && type == round(type))
    if (!ok_type) {
      .abort("`type` must be a layer type name (a string) or a whole type index", "ncnn_error")
    }
    if (!is.function(creator)) {
      .abort("`creator` must be a function of no arguments returning ncnn_layer()", "ncnn_error")
    }
    if (!is.null(destroyer) && !is.function(destroyer)) {
      .abort("`destroyer` must be NULL or a function of one argument", "ncnn_error")
    }
    .rs(.ncnn_relay(rs_ncnn_register(ptr, type, creator, destroyer)))
    invisible(self)
  }
  self$load_param <- function(path) {
    text <- .ncnn_read(path, "param", binary = FALSE)
    .rs(.ncnn_relay(rs_ncnn_load_param(ptr, text, FALSE)))
    invisible(self)
  }
  self$load_param_mem <- function(text) {
    if (!is.character(text) || length(text) < 1L || anyNA(text)) {
      .abort("`text` must be the text of an ncnn param (a string)", "ncnn_error")
    }
    if (!all(.is_text(text))) {
      .abort("`text` is not valid UTF-8 text: an ncnn param is text; for a binary .param.bin use load_param_bin(), for weights load_model()", "ncnn_error")
    }
    text <- enc2utf8(text)
    .rs(.ncnn_relay(rs_ncnn_load_param(ptr, paste(text, collapse = "\n"), FALSE)))
    invisible(self)
  }
  self$load_param_bin <- function(path) {
    bytes <- .ncnn_read(path, "binary param", binary = TRUE)
    .rs(.ncnn_relay(rs_ncnn_load_param(ptr, bytes, TRUE)))
    invisible(self)
  }
  self$load_model <- function(source) {
    src <- if (inherits(source, "ncnn_datareader")) {
      NULL
    } else if (is.raw(source)) {
      source
    } else if (is.character(source) && length(source) == 1L && !is.na(source)) {
      if (!file.exists(source)) {
        .abort(sprintf("model file '%s' does not exist", source), "ncnn_error")
      }
      if (dir.exists(source)) {
        .abort(sprintf("'%s' is a folder, not a model (.bin) file", source), "ncnn_error")
      }
      normalizePath(source)
    } else {
      .abort("`source` must be a .bin path, a raw vector or ncnn_datareader_empty()", "ncnn_error")
    }
    .rs(.ncnn_relay(rs_ncnn_load_model(ptr, src)))
    invisible(self)
  }
  self$clear <- function() {
    .rs(.ncnn_relay(rs_ncnn_clear(ptr)))
    invisible(self)
  }
  self$input_names <- function() .rs(rs_ncnn_blob_names(ptr, "input"))
  self$output_names <- function() .rs(rs_ncnn_blob_names(ptr, "output"))
  self$layers <- function() {
    cols <- .rs(rs_ncnn_layers(ptr))
    as.data.frame(cols, stringsAsFactors = FALSE)
  }
  self$create_extractor <- function() .ncnn_extractor(self, .rs(rs_ncnn_extractor_new(ptr)))
  class(self) <- "ncnn_net"
  self
}

.ncnn_read <- function(path, what, binary) {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    .abort(sprintf("`path` must be the path of a %s file", what), "ncnn_error", call = sys.call(-2L))
  }
  if (!file.exists(path)) {
    .abort(sprintf("%s file '%s' does not exist", what, path), "ncnn_error", call = sys.call(-2L))
  }
  if (dir.exists(path)) {
    .abort(sprintf("'%s' is a folder, not a %s file", path, what), "ncnn_error", call = sys.call(-2L))
  }
  read <- tryCatch(readBin(path, "raw", file.size(path)), error = function(e) e, warning = function(w) w)
  if (inherits(read, "condition")) {
    .abort(sprintf("cannot read %s file '%s': %s", what, path, conditionMessage(read)),
      "ncnn_error", call = sys.call(-2L))
  }
  if (binary) return(read)
  # A text param is UTF-8 without control bytes; anything else is binary
  # data (a .bin of weights, a .param.bin) given to the wrong method.
  text <- if (any(read < as.raw(9L) | (read > as.raw(13L) & read < as.raw(32L)))) NA_character_ else rawToChar(read)
  if (is.na(text) || !validUTF8(text)) {
    .abort(sprintf(
      "'%s' is not a text param file (it holds binary data); for a binary .param.bin use load_param_bin(), for a .bin weights file load_model()",
      path), "ncnn_error", call = sys.call(-2L))
  }
  Encoding(text) <- "UTF-8"
  text
}

.ncnn_extractor <- function(net, eptr) {
  ex <- new.env(parent = emptyenv())
  # The extractor keeps its net alive.
  ex$net <- net
  ex$.ptr <- eptr
  ex$input <- function(blob, x) {
    .ncnn_check_blob(blob)
    .rs(rs_ncnn_ex_input(eptr, blob, x))
    invisible(ex)
  }
  ex$extract <- function(blob) {
    .ncnn_check_blob(blob)
    .rs(.ncnn_relay(rs_ncnn_ex_extract(eptr, blob)))
  }
  class(ex) <- "ncnn_extractor"
  ex
}

.ncnn_check_blob <- function(blob) {
  ok <- length(blob) == 1L && !is.na(blob) &&
    (is.character(blob) || (is.numeric(blob) && blob == round(blob)))
  if (!ok) {
    .abort("`blob` must be a blob name or a 0-based blob index", "ncnn_error", call = sys.call(-2L))
  }
}

#' @export
print.ncnn_net <- function(x, ...) {
  n <- nrow(x$layers())
  cat(sprintf("<ncnn_net> %d layers", n))
  if (n > 0) {
    cat(sprintf("; inputs: %s; outputs: %s",
      paste(x$input_names(), collapse = ", "), paste(x$output_names(), collapse = ", ")
    ))
  }
  cat("\n")
  invisible(x)
}

#' @export
print.ncnn_extractor <- function(x, ...) {
  cat("<ncnn_extractor>\n")
  invisible(x)
}
