# Where the engine's messages and internal-failure reports go, and tensors'
# op parameter blocks.

#' Logging and internal failures
#'
#' The engine reports what a user may want to know (a scheduler moving a
#' node to another backend, a meta device's split function failing) through
#' its log. With R logging (the default once the package is loaded) the
#' messages are printed on R's console when the call that produced them
#' returns: information on the output, warnings and errors on the message
#' stream; debug messages too when `options(ggmlR.log_level = "debug")` is
#' set before `ggml_log_set_r()`. `ggml_log_set_default()` sends warnings and
#' errors to the process's standard error instead and drops the rest.
#'
#' The engine never aborts the R session: where ggml would abort (an
#' internal failure), the operation is abandoned with an R error of class
#' `ggmlR_internal_error` either way, whose message carries the report. With
#' the R abort handler (the default) that error is all; with
#' `ggml_set_abort_callback_default()` the report also goes to the process's
#' standard error, as ggml's default does.
#'
#' @return The setters: `NULL`, invisibly. The queries: a logical.
#' @export
#' @examples
#' ggml_log_is_r_enabled()
#' ggml_log_set_default()
#' ggml_log_set_r()
#' ggml_set_abort_callback_default()
#' ggml_set_abort_callback_r()
#' ggml_abort_is_r_enabled()
ggml_log_set_r <- function() {
  level <- getOption("ggmlR.log_level", "info")
  if (!is.character(level) || length(level) != 1L || !level %in% c("debug", "info", "warn", "error")) {
    .abort("options(ggmlR.log_level =) must be one of \"debug\", \"info\", \"warn\", \"error\".")
  }
  .rs(rs_log_control("r", level))
  invisible(NULL)
}

#' @rdname ggml_log_set_r
#' @export
ggml_log_set_default <- function() {
  .rs(rs_log_control("default", "info"))
  invisible(NULL)
}

#' @rdname ggml_log_set_r
#' @export
ggml_log_is_r_enabled <- function() .rs(rs_log_control("query", "info"))$log_r

#' @rdname ggml_log_set_r
#' @export
ggml_set_abort_callback_r <- function() {
  .rs(rs_log_control("abort_r", "info"))
  invisible(NULL)
}

#' @rdname ggml_log_set_r
#' @export
ggml_set_abort_callback_default <- function() {
  .rs(rs_log_control("abort_default", "info"))
  invisible(NULL)
}

#' @rdname ggml_log_set_r
#' @export
ggml_abort_is_r_enabled <- function() .rs(rs_log_control("query", "info"))$abort_r

#' Op parameters
#'
#' ggml keeps 64 bytes of op parameters on every tensor; they hold the
#' numeric parameters of the op that computes it (the scale of
#' `ggml_scale()`, the bounds of `ggml_clamp()`, the unary op code, ...) as
#' 32-bit values in ggml's order. They can be read and written, as 16 slots
#' of 32 bits (`_i32`, `_f32`, `index` 0 to 15) or as raw bytes; writing
#' them changes what is stored, not how the op computes (each op keeps the
#' parameters it was built with).
#'
#' @param tensor A `ggml_tensor`.
#' @param params A raw vector of at most 64 bytes, written from the start.
#' @param index Slot, 0 to 15.
#' @param value An integer (`_i32`) or number (`_f32`).
#' @return The getters: a raw vector of 64 bytes, an integer or a number.
#'   The setters: `NULL`, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' y <- ggml_clamp(ctx, x, -1, 2)
#' ggml_get_op_params_f32(y, 1)
#' ggml_set_op_params_f32(x, 1, 0.5)
#' ggml_set_op_params(x, as.raw(c(1, 0, 0, 0)))
#' ggml_set_op_params_i32(x, 0, 42L)
#' ggml_get_op_params_i32(x, 0)
#' ggml_get_op_params(x)[1:4]
#' ggml_free(ctx)
ggml_get_op_params <- function(tensor) .rs(rs_tensor_op_params(tensor))

.op_slot <- function(index, call = sys.call(-1L)) {
  if (!is.numeric(index) || length(index) != 1L || is.na(index) || index != trunc(index) ||
      index < 0 || index > 15) {
    .abort(sprintf("`index` must be an op parameter slot from 0 to 15, not %s.", .describe_value(index)),
      call = call)
  }
  index
}

#' @rdname ggml_get_op_params
#' @export
ggml_set_op_params <- function(tensor, params) {
  if (!is.raw(params)) {
    if (!is.numeric(params) || anyNA(params) || any(params < 0 | params > 255)) {
      .abort("`params` must be a raw vector (or byte values from 0 to 255).")
    }
    params <- as.raw(params)
  }
  invisible(.rs(rs_tensor_set_op_params(tensor, 0, params)))
}

#' @rdname ggml_get_op_params
#' @export
ggml_get_op_params_i32 <- function(tensor, index) {
  i <- .op_slot(index)
  readBin(ggml_get_op_params(tensor)[4 * i + 1:4], "integer", size = 4L, endian = .Platform$endian)
}

#' @rdname ggml_get_op_params
#' @export
ggml_set_op_params_i32 <- function(tensor, index, value) {
  i <- .op_slot(index)
  if (!is.numeric(value) || length(value) != 1L || is.na(value) || value != trunc(value) ||
      abs(value) > .Machine$integer.max) {
    .abort("`value` must be a single 32-bit integer.")
  }
  bytes <- writeBin(as.integer(value), raw(), size = 4L, endian = .Platform$endian)
  invisible(.rs(rs_tensor_set_op_params(tensor, 4 * i, bytes)))
}

#' @rdname ggml_get_op_params
#' @export
ggml_get_op_params_f32 <- function(tensor, index) {
  i <- .op_slot(index)
  readBin(ggml_get_op_params(tensor)[4 * i + 1:4], "double", size = 4L, endian = .Platform$endian)
}

#' @rdname ggml_get_op_params
#' @export
ggml_set_op_params_f32 <- function(tensor, index, value) {
  i <- .op_slot(index)
  if (!is.numeric(value) || length(value) != 1L) .abort("`value` must be a single number.")
  bytes <- writeBin(as.numeric(value), raw(), size = 4L, endian = .Platform$endian)
  invisible(.rs(rs_tensor_set_op_params(tensor, 4 * i, bytes)))
}
