#' Scalars and single elements
#'
#' `ggml_new_f32()` and `ggml_new_i32()` create a one-element f32 or i32
#' tensor holding `value` (the context must allocate data). The `_nd`
#' functions read or write the element at 0-based coordinates `i0..i3`, the
#' `_1d` functions the element at 0-based position `i` in ggml order (`ne0`
#' fastest); views read and write the memory they view. `ggml_set_zero()`
#' sets every element to 0.
#'
#' @param ctx A `ggml_context`.
#' @param value A number.
#' @param tensor A `ggml_tensor` with data.
#' @param i0,i1,i2,i3 0-based coordinates.
#' @param i A 0-based position.
#' @return The getters return a number (an integer for the `_i32` forms);
#'   `ggml_new_f32()` and `ggml_new_i32()` a `ggml_tensor`; the setters the
#'   tensor, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' s <- ggml_new_f32(ctx, 2.5)
#' ggml_get_f32(s)
#' m <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), 1:6)
#' ggml_get_f32_nd(m, 2, 1) # column 2 of the R matrix, row 3
#' ggml_set_f32_nd(m, 0, 1, value = -1)
#' matrix(ggml_get_f32(m), 3)
#' ggml_set_f32_1d(m, 5, 60) # the last element in ggml order
#' ggml_get_f32_1d(m, 5)
#' ggml_set_zero(m)
#' ggml_get_f32(m)
#' n <- ggml_new_i32(ctx, 7L)
#' ggml_get_i32_1d(n, 0)
#' v <- ggml_set_i32(ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 2), 1:4)
#' ggml_set_i32_nd(v, 1, 1, value = 40L)
#' ggml_get_i32_nd(v, 1, 1)
#' ggml_set_i32_1d(v, 0, -1L)
#' ggml_get_i32(v)
#' ggml_free(ctx)
ggml_new_f32 <- function(ctx, value) {
  t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1)
  .element(t, 0, value, sys.call())
  t
}

#' @rdname ggml_new_f32
#' @export
ggml_new_i32 <- function(ctx, value) {
  t <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1)
  .element(t, 0, .int_value(value, sys.call()), sys.call())
  t
}

#' @rdname ggml_new_f32
#' @export
ggml_set_zero <- function(tensor) {
  .rs(rs_tensor_zero(tensor))
  invisible(tensor)
}

#' @rdname ggml_new_f32
#' @export
ggml_get_f32_nd <- function(tensor, i0, i1 = 0, i2 = 0, i3 = 0) {
  as.numeric(.element(tensor, .flat(tensor, c(i0, i1, i2, i3))))
}

#' @rdname ggml_new_f32
#' @export
ggml_set_f32_nd <- function(tensor, i0, i1 = 0, i2 = 0, i3 = 0, value) {
  .element(tensor, .flat(tensor, c(i0, i1, i2, i3)), value)
  invisible(tensor)
}

#' @rdname ggml_new_f32
#' @export
ggml_get_i32_nd <- function(tensor, i0, i1 = 0, i2 = 0, i3 = 0) {
  as.integer(.element(tensor, .flat(tensor, c(i0, i1, i2, i3))))
}

#' @rdname ggml_new_f32
#' @export
ggml_set_i32_nd <- function(tensor, i0, i1 = 0, i2 = 0, i3 = 0, value) {
  .element(tensor, .flat(tensor, c(i0, i1, i2, i3)), .int_value(value))
  invisible(tensor)
}

#' @rdname ggml_new_f32
#' @export
ggml_get_f32_1d <- function(tensor, i) as.numeric(.element(tensor, .flat(tensor, i)))

#' @rdname ggml_new_f32
#' @export
ggml_set_f32_1d <- function(tensor, i, value) {
  .element(tensor, .flat(tensor, i), value)
  invisible(tensor)
}

#' @rdname ggml_new_f32
#' @export
ggml_get_i32_1d <- function(tensor, i) as.integer(.element(tensor, .flat(tensor, i)))

#' @rdname ggml_new_f32
#' @export
ggml_set_i32_1d <- function(tensor, i, value) {
  .element(tensor, .flat(tensor, i), .int_value(value))
  invisible(tensor)
}

.int_value <- function(value, call = .user_call()) {
  force(call)
  if (!is.numeric(value) || length(value) != 1L || is.na(value) || value != round(value)) {
    .abort("`value` must be a single whole number.", call = call)
  }
  value
}

# The ggml-order position of 0-based coordinates `idx` (one or four), checked.
.flat <- function(tensor, idx, call = .user_call()) {
  force(call)
  ne <- .rs(rs_tensor_info(tensor), call = call)$ne
  if (!is.numeric(idx) || anyNA(idx) || any(idx != round(idx))) {
    .abort("element coordinates must be whole numbers.", call = call)
  }
  if (length(idx) == 1L) {
    n <- prod(ne)
    if (idx < 0 || idx >= n) {
      .abort(sprintf("position %s is outside the tensor's %s elements (positions start at 0).",
        format(idx), format(n)), call = call)
    }
    return(idx)
  }
  if (length(idx) > length(ne) && any(idx[-seq_along(ne)] != 0)) {
    .abort(sprintf("coordinates (%s) name more dimensions than the tensor's sizes (%s); coordinates start at 0.",
      paste(idx, collapse = ", "), paste(ne, collapse = ", ")), call = call)
  }
  # Coordinates of the dimensions not given (a fifth one) are 0.
  at <- c(idx, rep(0, max(0L, length(ne) - length(idx))))[seq_along(ne)]
  if (any(at < 0) || any(at >= ne)) {
    .abort(sprintf("coordinates (%s) are outside the tensor's sizes (%s); coordinates start at 0.",
      paste(idx, collapse = ", "), paste(ne, collapse = ", ")), call = call)
  }
  sum(at * cumprod(c(1, ne[-length(ne)])))
}

# Read (value missing) or write one element at ggml-order position `pos`.
.element <- function(tensor, pos, value, call = .user_call()) {
  force(call)
  if (missing(value)) return(.rs(rs_tensor_get(tensor, pos, 1), call = call))
  if (!is.numeric(value) || length(value) != 1L) {
    .abort("`value` must be a single number.", call = call)
  }
  .rs(rs_tensor_set(tensor, value, pos), call = call)
}
