# The sizes given as separate arguments, each a single number (the engine
# checks the values); an error names the first that is not.
.sizes <- function(...) {
  v <- list(...)
  for (nm in names(v)) {
    if (!is.numeric(v[[nm]]) || length(v[[nm]]) != 1L) {
      .abort(sprintf("`%s` must be a single size (a whole number), not %s", nm, .describe_value(v[[nm]])))
    }
  }
  unlist(v, use.names = FALSE)
}

.new_tensor <- function(ptr) {
  class(ptr) <- "ggml_tensor"
  ptr
}

#' Create tensors
#'
#' Sizes follow ggml: `ne0` is the fastest-varying dimension, so an R matrix
#' `m` with `nrow(m)` rows is a tensor with `ne0 = nrow(m)`,
#' `ne1 = ncol(m)` holding `as.vector(m)`.
#'
#' @param ctx A `ggml_context`.
#' @param type A type code: `GGML_TYPE_F32`, `GGML_TYPE_F16`,
#'   `GGML_TYPE_BF16`, `GGML_TYPE_I32`, or a quantized type such as
#'   `GGML_TYPE_Q4_0` (then `ne0` is a multiple of its block size).
#' Tensors have up to five dimensions. The element-wise ops, the binary ops
#' (broadcasting along the fifth dimension too), the row ops (`ggml_sum_rows()`,
#' `ggml_soft_max()`, the norms, ...), copies and [ggml_concat()] (also along
#' `dim = 4`) compute five-dimensional tensors on every backend; other ops take
#' up to four and say so (fold the last two dimensions with
#' [ggml_reshape_4d()] first).
#'
#' @param n_dims Number of dimensions, 1 to 5.
#' @param ne Sizes (at least `n_dims` of them).
#' @param ne0,ne1,ne2,ne3,ne4 Sizes of the dimensions.
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4)
#' b <- ggml_new_tensor(ctx, GGML_TYPE_F16, 3, c(2, 3, 4))
#' ggml_tensor_shape(b)
#' a
#' v <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 5)
#' c3 <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 3, 4)
#' c4 <- ggml_new_tensor_4d(ctx, GGML_TYPE_BF16, 2, 3, 4, 5)
#' sapply(list(v, a, c3, c4), ggml_n_dims)
#' c5 <- ggml_new_tensor_5d(ctx, GGML_TYPE_F32, 3, 2, 2, 2, 3)
#' ggml_n_dims(c5)
#' ggml_tensor_shape(c5)
#' ggml_free(ctx)
ggml_new_tensor <- function(ctx, type = GGML_TYPE_F32, n_dims, ne) {
  if (!is.numeric(n_dims) || length(n_dims) != 1L || is.na(n_dims) || !n_dims %in% 1:5) {
    .abort(sprintf("`n_dims` must be 1, 2, 3, 4 or 5, not %s", .describe_value(n_dims)))
  }
  if (!is.numeric(ne) || anyNA(ne)) {
    .abort(sprintf("`ne` must be a numeric vector of sizes, not %s", .describe_value(ne)))
  }
  if (length(ne) < n_dims) {
    .abort(sprintf("`ne` has %d size(s) but `n_dims` is %s.", length(ne), format(n_dims)))
  }
  .new_tensor(.rs(rs_new_tensor(ctx, type, ne[seq_len(n_dims)])))
}

#' @rdname ggml_new_tensor
#' @export
ggml_new_tensor_1d <- function(ctx, type = GGML_TYPE_F32, ne0) {
  .new_tensor(.rs(rs_new_tensor(ctx, type, .sizes(ne0 = ne0))))
}

#' @rdname ggml_new_tensor
#' @export
ggml_new_tensor_2d <- function(ctx, type = GGML_TYPE_F32, ne0, ne1) {
  .new_tensor(.rs(rs_new_tensor(ctx, type, .sizes(ne0 = ne0, ne1 = ne1))))
}

#' @rdname ggml_new_tensor
#' @export
ggml_new_tensor_3d <- function(ctx, type = GGML_TYPE_F32, ne0, ne1, ne2) {
  .new_tensor(.rs(rs_new_tensor(ctx, type, .sizes(ne0 = ne0, ne1 = ne1, ne2 = ne2))))
}

#' @rdname ggml_new_tensor
#' @export
ggml_new_tensor_4d <- function(ctx, type = GGML_TYPE_F32, ne0, ne1, ne2, ne3) {
  .new_tensor(.rs(rs_new_tensor(ctx, type, .sizes(ne0 = ne0, ne1 = ne1, ne2 = ne2, ne3 = ne3))))
}

#' @rdname ggml_new_tensor
#' @export
ggml_new_tensor_5d <- function(ctx, type = GGML_TYPE_F32, ne0, ne1, ne2, ne3, ne4) {
  .new_tensor(.rs(rs_new_tensor(ctx, type, .sizes(ne0 = ne0, ne1 = ne1, ne2 = ne2, ne3 = ne3, ne4 = ne4))))
}

#' Tensor properties
#'
#' @param tensor A `ggml_tensor`.
#' @return `ggml_nelements()`, `ggml_nbytes()`: numbers.
#'   `ggml_n_dims()`: an integer (1 + the last dimension above 1).
#'   `ggml_tensor_shape()`: the four sizes (ne0..ne3), numbers; five
#'   (ne0..ne4) for a tensor of five dimensions.
#'   `ggml_tensor_type()`: the type code. `ggml_is_contiguous()`: a logical.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4)
#' ggml_nelements(a)
#' ggml_nbytes(a)
#' ggml_n_dims(a)
#' ggml_tensor_shape(a)
#' ggml_is_contiguous(ggml_transpose(ctx, a))
#' ggml_tensor_type(a) == GGML_TYPE_F32
#' ggml_free(ctx)
ggml_nelements <- function(tensor) .rs(rs_tensor_info(tensor))$nelements

#' @rdname ggml_nelements
#' @export
ggml_nbytes <- function(tensor) .rs(rs_tensor_info(tensor))$nbytes

#' @rdname ggml_nelements
#' @export
ggml_n_dims <- function(tensor) .rs(rs_tensor_info(tensor))$n_dims

#' @rdname ggml_nelements
#' @export
ggml_tensor_shape <- function(tensor) {
  ne <- as.numeric(.rs(rs_tensor_info(tensor))$ne)
  if (ne[5L] == 1) ne[1:4] else ne
}

#' @rdname ggml_nelements
#' @export
ggml_tensor_type <- function(tensor) .rs(rs_tensor_info(tensor))$type_code

#' @rdname ggml_nelements
#' @export
ggml_is_contiguous <- function(tensor) .rs(rs_tensor_info(tensor))$contiguous

#' Tensor names
#'
#' @param tensor A `ggml_tensor`.
#' @param name A string.
#' @return `ggml_set_name()`: the tensor, invisibly. `ggml_get_name()`: the
#'   name, `""` when none was set.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' w <- ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), "w")
#' ggml_get_name(w)
#' ggml_free(ctx)
ggml_set_name <- function(tensor, name) {
  .rs(rs_set_name(tensor, name))
  invisible(tensor)
}

#' @rdname ggml_set_name
#' @export
ggml_get_name <- function(tensor) .rs(rs_tensor_info(tensor))$name

#' Values of tensors with data
#'
#' Set or read all values of a tensor, in ggml element order (`ne0` fastest,
#' so an R matrix goes in as `as.vector(m)`). f16 and bf16 values are
#' converted on the way. `ggml_set_f32()` also accepts a single value, which
#' fills the tensor. Reading or writing a tensor without data, or one whose
#' context or buffer was freed, is an error.
#'
#' @param tensor A `ggml_tensor` that has data.
#' @param data Numbers: one per element, or one for all.
#' @return `ggml_get_f32()`: a numeric vector; `ggml_get_i32()`: an integer
#'   vector. The setters return the tensor, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3)
#' ggml_set_f32(a, 1:6)
#' ggml_get_f32(a)
#' i <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)
#' ggml_set_i32(i, c(2L, 0L, 1L))
#' ggml_get_i32(i)
#' ggml_free(ctx)
ggml_set_f32 <- function(tensor, data) {
  .set_values(tensor, data)
  invisible(tensor)
}

#' @rdname ggml_set_f32
#' @export
ggml_get_f32 <- function(tensor) as.numeric(.rs(rs_tensor_get(tensor, 0, NULL)))

#' @rdname ggml_set_f32
#' @export
ggml_set_i32 <- function(tensor, data) {
  .set_values(tensor, as.integer(data))
  invisible(tensor)
}

#' @rdname ggml_set_f32
#' @export
ggml_get_i32 <- function(tensor) as.integer(.rs(rs_tensor_get(tensor, 0, NULL)))

.set_values <- function(tensor, data, call = sys.call(-1L)) {
  if (!is.numeric(data) && !is.logical(data)) {
    .abort(sprintf("`data` must be numeric, not %s.", class(data)[1L]), call = call)
  }
  n <- .rs(rs_tensor_info(tensor), call = call)$nelements
  if (length(data) == 1L && n != 1) data <- rep(data, n)
  if (length(data) != n) {
    .abort(sprintf(
      "the length of `data` (%d) does not match the tensor's %s elements; give one value per element (or one for all).",
      length(data), format(n)), call = call)
  }
  .rs(rs_tensor_set(tensor, data, 0), call = call)
}

#' @export
print.ggml_tensor <- function(x, ...) {
  i <- .rs(rs_tensor_info(x))
  nd <- i$n_dims
  shape <- paste0("[", paste(i$ne[seq_len(nd)], collapse = ", "), "]")
  name <- if (nzchar(i$name)) sprintf(" '%s'", i$name) else ""
  op <- if (i$op != "NONE") sprintf(", op %s", i$op) else ""
  cat(sprintf("<ggml_tensor%s> %s %s%s\n", name, i$type_name, shape, op))
  cat(sprintf("  data: %s\n", i$location))
  invisible(x)
}

#' Shape and values of a ggml tensor as R sees them
#'
#' `dim()` gives the sizes of the tensor's dimensions, `ne0` first (as
#' [ggml_tensor_shape()], without the trailing sizes of 1 beyond
#' [ggml_n_dims()]); since `ne0` is the fastest dimension, exactly as R's
#' first, `as.array()` returns the values with that `dim`, so a tensor made
#' from an R matrix `m` comes back as `m`. `as.array()` reads tensors with
#' data in a context or in a backend buffer (f16 and bf16 are converted);
#' `as.matrix()` does the same for tensors of at most two dimensions.
#'
#' @param x A `ggml_tensor`.
#' @param ... Ignored.
#' @return `dim()`: an integer vector; `as.array()`: a numeric array (an
#'   integer array for `GGML_TYPE_I32`); `as.matrix()`: a matrix.
#' @name ggml_tensor_values
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' m <- matrix(1:6, 2, 3)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3)
#' ggml_set_f32(a, m)
#' dim(a)
#' as.array(a)
#' as.matrix(ggml_transpose(ctx, a))
#' v <- ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 2, 2, 2)
#' ggml_set_f32(v, 1:8)
#' as.array(v)[, , 2]
#' ggml_free(ctx)
NULL

#' @rdname ggml_tensor_values
#' @export
dim.ggml_tensor <- function(x) {
  i <- .rs(rs_tensor_info(x))
  as.integer(i$ne[seq_len(i$n_dims)])
}

#' @rdname ggml_tensor_values
#' @export
as.array.ggml_tensor <- function(x, ...) {
  i <- .rs(rs_tensor_info(x))
  v <- .rs(rs_tensor_get(x, 0, NULL))
  v <- if (i$type_code == GGML_TYPE_I32) as.integer(v) else as.double(v)
  array(v, dim = as.integer(i$ne[seq_len(i$n_dims)]))
}

#' @rdname ggml_tensor_values
#' @export
as.matrix.ggml_tensor <- function(x, ...) {
  a <- as.array.ggml_tensor(x)
  d <- dim(a)
  if (length(d) > 2L) {
    .abort(sprintf("the tensor has %d dimensions [%s]: use as.array() for more than two",
                   length(d), paste(d, collapse = ", ")))
  }
  matrix(a, nrow = d[1L], ncol = if (length(d) == 2L) d[2L] else 1L)
}
