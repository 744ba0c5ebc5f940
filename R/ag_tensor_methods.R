# What R users reach for on a tensor: printing, shape, coercion, indexing,
# binding and the Math and Summary groups. Whatever has a backward rule in the
# engine is recorded on the tape like the ag_* op it runs.

#' Print a tensor
#'
#' The header gives the shape, the device and how the values are stored
#' (`"cpu"` tensors hold doubles, `f64`; on `"gpu"` a resident tensor shows
#' its device storage type, a parameter the type it will be stored in, and
#' results `f32`), then whether it requires a gradient and the op that made
#' it. The values follow as an R matrix, truncated as R truncates nothing
#' but a tensor often needs: at most `max_rows` rows and as many columns as
#' fit the console width; a last line says how much was left out. A gradient,
#' when there is one, is printed the same way.
#'
#' @param x An `ag_tensor`.
#' @param max_rows Most rows to show (`getOption("ggmlR.print_max_rows")`,
#'   default 10).
#' @param max_cols Most columns to show; `NULL` (the default): as many as fit
#'   `getOption("width")`.
#' @param ... Passed to [print()] for the matrix (e.g. `digits`).
#' @return `x`, invisibly.
#' @export
#' @examples
#' x <- ag_tensor(matrix(1:6, 2, 3))
#' x
#' print(ag_tensor(matrix(rnorm(3 * 150), 3, 150)), digits = 3)
#' w <- ag_param(matrix(1, 2, 2))
#' with_grad_tape(loss <- ag_sum(w * w))
#' backward(loss)
#' w
print.ag_tensor <- function(x, max_rows = getOption("ggmlR.print_max_rows", 10L),
                            max_cols = NULL, ...) {
  d <- x$shape
  flags <- c(
    if (isTRUE(x$requires_grad)) "requires_grad",
    if (!is.null(x$grad_fn)) paste0("grad_fn: ", x$grad_fn)
  )
  cat(sprintf("<ag_tensor %dx%d> %s%s\n", d[1L], d[2L], .ag_storage_label(x),
              if (length(flags)) paste0(", ", paste(flags, collapse = ", ")) else ""))
  .ag_print_matrix(.ag_data(x), max_rows, max_cols, ...)
  g <- x$grad
  if (!is.null(g)) {
    cat("grad:\n")
    .ag_print_matrix(g, max_rows, max_cols, ...)
  }
  invisible(x)
}

# "cpu f64", "gpu f16", ...: where the values are and how they are stored.
.ag_storage_label <- function(x) {
  if (!identical(x$device, "gpu")) return("cpu f64")
  type <- if (!is.null(x$ptr) && isTRUE(tryCatch(.ag_ptr_is_live(x), error = function(e) FALSE))) {
    ggml_type_name(ggml_tensor_type(x$ptr))
  } else if (isTRUE(x$requires_grad) && is.null(x$grad_fn)) {
    x$dtype %||% "f32"
  } else {
    "f32"
  }
  paste("gpu", type)
}

# Prints the top-left corner of `m` that fits: `max_rows` rows and the columns
# that fit the console width (or `max_cols`), then what was left out.
.ag_print_matrix <- function(m, max_rows, max_cols = NULL, ...) {
  max_rows <- max(1L, as.integer(max_rows %||% 10L))
  nr <- nrow(m)
  nc <- ncol(m)
  rows <- seq_len(min(nr, max_rows))
  shown <- m[rows, , drop = FALSE]
  if (is.null(max_cols)) {
    # R's labels, "[i,]" and "[,j]", and each column formatted on its own.
    widths <- vapply(seq_len(nc), function(j) {
      max(nchar(format(shown[, j], ...)), nchar(sprintf("[,%d]", j)))
    }, numeric(1L)) + 1
    room <- getOption("width", 80L) - nchar(sprintf("[%d,]", length(rows)))
    keep <- max(1L, sum(cumsum(widths) < room))  # as R: a line stays under the width
  } else {
    keep <- max(1L, as.integer(max_cols))
  }
  keep <- min(keep, nc)
  print(shown[, seq_len(keep), drop = FALSE], ...)
  more <- c(if (nr > length(rows)) sprintf("%d more row%s", nr - length(rows), if (nr - length(rows) == 1L) "" else "s"),
            if (nc > keep) sprintf("%d more column%s", nc - keep, if (nc - keep == 1L) "" else "s"))
  if (length(more)) {
    cat(sprintf("# ... with %s (as.matrix() gives every value)\n", paste(more, collapse = " and ")))
  }
  invisible(m)
}

#' Shape, length and values of a tensor
#'
#' `dim()` is `c(nrow, ncol)`, `length()` the number of elements, and
#' `as.matrix()`, `as.array()` and `as.double()` copy the values into R (the
#' same as `x$data`).
#'
#' @param x An `ag_tensor`.
#' @param ... Ignored.
#' @return `dim()`: two integers; `length()`: an integer; `as.matrix()`,
#'   `as.array()`: a numeric matrix; `as.double()`: a numeric vector.
#' @name ag_tensor_values
#' @examples
#' x <- ag_tensor(matrix(1:6, 2, 3))
#' dim(x)
#' length(x)
#' as.matrix(x)
#' as.array(x)
#' as.double(x)
NULL

#' @rdname print.ag_tensor
#' @param object An `ag_tensor`.
#' @export
str.ag_tensor <- function(object, ...) {
  d <- object$shape
  cat(sprintf("<ag_tensor %dx%d> %s%s\n", d[1L], d[2L], .ag_storage_label(object),
              if (isTRUE(object$requires_grad)) ", requires_grad" else ""))
  utils::str(.ag_data(object), ...)
  invisible()
}

#' @rdname ag_tensor_values
#' @export
dim.ag_tensor <- function(x) as.integer(x$shape)

#' @rdname ag_tensor_values
#' @export
length.ag_tensor <- function(x) as.integer(prod(x$shape))

#' @rdname ag_tensor_values
#' @export
as.matrix.ag_tensor <- function(x, ...) .ag_data(x)

#' @rdname ag_tensor_values
#' @export
as.array.ag_tensor <- function(x, ...) .ag_data(x)

#' @rdname ag_tensor_values
#' @export
as.double.ag_tensor <- function(x, ...) as.double(.ag_data(x))

#' Index, transpose and bind tensors
#'
#' `x[i, j]` selects rows and columns (positive, negative or logical indices,
#' as for a matrix), `x[i]` elements in column-major order (also with a
#' logical matrix such as `x[x$data > 0]`, or a two-column matrix of
#' positions), `t(x)` transposes, and `rbind()` / `cbind()` stack tensors
#' (and matrices or vectors) by rows or columns. All of them are recorded on
#' the tape, so gradients flow back into the selected elements. Results are
#' always matrices: `x[1, ]` is a `[1, ncol]` tensor and `x[i]` a column
#' (`drop` is ignored). An index past the end, a missing value or a name is
#' an error, and parts of a tensor cannot be assigned (`x[i] <- v`): set
#' `x$data` instead.
#'
#' @param x An `ag_tensor`.
#' @param i,j Indices.
#' @param drop Ignored: results keep two dimensions.
#' @param value Not supported.
#' @param ... Tensors, matrices or vectors (`rbind`, `cbind`); unused
#'   otherwise.
#' @param deparse.level Ignored.
#' @return An `ag_tensor`.
#' @name ag_tensor_index
#' @examples
#' x <- ag_param(matrix(1:12, 3, 4))
#' x[2, ]
#' x[-1, c(TRUE, FALSE)]
#' x[c(1, 12)]
#' t(x)
#' rbind(x, matrix(0, 1, 4))
#' cbind(x, x)
#' with_grad_tape(loss <- sum(x[1:2, 3]))
#' backward(loss)
#' x$grad
NULL

#' @rdname ag_tensor_index
#' @export
`[.ag_tensor` <- function(x, i, j, ..., drop = FALSE) {
  n_idx <- nargs() - 1L - !missing(drop)
  d <- x$shape
  if (n_idx <= 1L) {
    if (missing(i)) return(x)
    if (is.matrix(i) && is.numeric(i) && ncol(i) == 2L) {
      r <- .ag_index(i[, 1L], d[1L], "row")
      c <- .ag_index(i[, 2L], d[2L], "column")
      pos <- (c - 1L) * d[1L] + r
    } else {
      pos <- .ag_index(i, d[1L] * d[2L], "element")
    }
    flat <- .ag_op("gather", list(ag_reshape(x, 1, d[1L] * d[2L])), idx = pos - 1L)
    return(ag_reshape(flat, length(pos), 1))
  }
  if (n_idx != 2L) .abort("an ag_tensor has two dimensions: index it as x[i, j] or x[i]")
  out <- x
  if (!missing(j)) {
    cols <- .ag_index(j, d[2L], "column")
    if (!identical(cols, seq_len(d[2L]))) out <- .ag_op("gather", list(out), idx = cols - 1L)
  }
  if (!missing(i)) {
    rows <- .ag_index(i, d[1L], "row")
    if (!identical(rows, seq_len(d[1L]))) {
      out <- if (length(rows) > 1L && all(diff(rows) == 1L) || length(rows) == 1L) {
        .ag_op("slice_rows", list(out), c(rows[1L] - 1L, rows[length(rows)]))
      } else {
        ag_transpose(.ag_op("gather", list(ag_transpose(out)), idx = rows - 1L))
      }
    }
  }
  out
}

# Positions (1-based) selected by an R index over `n` places.
.ag_index <- function(i, n, what, call = sys.call(-1L)) {
  if (is.character(i) || is.factor(i)) {
    .abort(sprintf("%s indices must be numbers or logicals: an ag_tensor has no names", what), call = call)
  }
  if (is_ag_tensor(i)) i <- .ag_data(i)
  if (!(is.numeric(i) || is.logical(i))) {
    .abort(sprintf("%s indices must be numbers or logicals, not %s", what, class(i)[1L]), call = call)
  }
  if (anyNA(i)) .abort(sprintf("%s indices must not be NA", what), call = call)
  if (is.logical(i) && length(i) > n) {
    .abort(sprintf("a logical %s index has %d values but there are %d %ss", what, length(i), n, what), call = call)
  }
  if (is.numeric(i) && length(i) && max(i) > n) {
    .abort(sprintf("%s index %s is out of bounds: there are %d %ss", what, format(max(i)), n, what), call = call)
  }
  pos <- tryCatch(seq_len(n)[i], error = function(e) {
    .abort(sprintf("%s indices: %s", what, conditionMessage(e)), call = call)
  })
  if (!length(pos)) .abort(sprintf("the %s index selects nothing: a tensor needs at least one %s", what, what), call = call)
  pos
}

#' @rdname ag_tensor_index
#' @export
`[<-.ag_tensor` <- function(x, i, j, ..., value) {
  .abort(paste0("parts of an ag_tensor cannot be assigned (the tape records whole values): ",
                "change a copy, m <- x$data; m[i, j] <- value, and set x$data <- m"))
}

#' @rdname ag_tensor_index
#' @export
t.ag_tensor <- function(x) ag_transpose(x)

#' @rdname ag_tensor_index
#' @export
rbind.ag_tensor <- function(..., deparse.level = 1) .ag_bind(list(...), by_rows = TRUE)

#' @rdname ag_tensor_index
#' @export
cbind.ag_tensor <- function(..., deparse.level = 1) .ag_bind(list(...), by_rows = FALSE)

# rbind: tensors, matrices and vectors (a vector is one row) with as many
# columns each, stacked with the engine's concat_rows; cbind goes through the
# transposes.
.ag_bind <- function(args, by_rows, call = sys.call(-1L)) {
  fn <- if (by_rows) "rbind" else "cbind"
  args <- args[!vapply(args, is.null, logical(1L))]
  parts <- lapply(seq_along(args), function(k) {
    a <- args[[k]]
    if (is_ag_tensor(a)) return(if (by_rows) a else ag_transpose(a))
    if (!(is.numeric(a) || is.logical(a))) {
      .abort(sprintf("%s(): argument %d must be an ag_tensor, a numeric matrix or a vector, not %s",
                     fn, k, class(a)[1L]), call = call)
    }
    m <- if (is.null(dim(a))) matrix(as.double(a), nrow = 1L) else .ag_num(a, "argument", call = call)
    if (!by_rows && !is.null(dim(a))) m <- t(m)
    m
  })
  width <- vapply(parts, function(p) if (is_ag_tensor(p)) p$shape[2L] else ncol(p), integer(1L))
  if (any(width != width[1L])) {
    k <- which(width != width[1L])[1L]
    .abort(sprintf("%s(): every argument needs %d %s, but argument %d has %d",
                   fn, width[1L], if (by_rows) "columns" else "rows", k, width[k]), call = call)
  }
  if (!any(vapply(parts, is_ag_tensor, logical(1L)))) parts[[1L]] <- ag_tensor(parts[[1L]])
  out <- if (length(parts) == 1L) parts[[1L]] else .ag_op("concat_rows", parts)
  if (by_rows) out else ag_transpose(out)
}

#' Math and Summary functions on tensors
#'
#' The Math group on an `ag_tensor` returns an `ag_tensor`. `exp`, `log`
#' (with any `base`), `log2`, `log10`, `log1p` (as `log(1 + x)`), `expm1`
#' (as `exp(x) - 1`), `sqrt`, `abs` and `tanh` run engine ops and are
#' recorded on the tape. `sign`, `floor`, `ceiling`, `trunc`, `round` and
#' `signif` are piecewise constant: their result is a constant tensor (its
#' gradient is zero). The rest of the group (`sin`, `cos`, `cumsum`,
#' `gamma`, ...) has no backward rule: it computes R's function on the values
#' and returns a constant tensor, and refuses, with an error, a tensor that
#' needs a gradient while a tape is recording.
#'
#' In the Summary group `sum()` is [ag_sum()] (recorded; several arguments
#' are summed together) and `mean()` is [ag_mean()]; `max`, `min`, `range`,
#' `prod`, `any` and `all` return R values computed from the data (not
#' recorded).
#'
#' @param x An `ag_tensor`.
#' @param ... Further arguments of the R function (`base` for `log`,
#'   `digits` for `round` and `signif`); for the Summary group, the values
#'   to summarise.
#' @param na.rm Remove missing values (for the R-value summaries).
#' @return An `ag_tensor`; for `max`, `min`, `range`, `prod`, `any`, `all` an
#'   R number or logical.
#' @name ag_tensor_math
#' @examples
#' x <- ag_param(matrix(c(0.5, 1, 2, 4), 2, 2))
#' log(x, base = 2)
#' sqrt(x)
#' round(exp(x), 1)
#' max(x)
#' with_grad_tape(loss <- mean(abs(log(x))) + sum(x))
#' backward(loss)
#' x$grad
NULL

#' @rdname ag_tensor_math
#' @export
Math.ag_tensor <- function(x, ...) {
  switch(.Generic,
    exp = ag_exp(x),
    log = {
      extra <- list(...)
      if (length(extra)) ag_log(x) / log(extra[[1L]]) else ag_log(x)
    },
    log2 = ag_log(x) / log(2),
    log10 = ag_log(x) / log(10),
    log1p = ag_log(x + 1),
    expm1 = ag_exp(x) - 1,
    sqrt = ag_pow(x, 0.5),
    abs = ag_relu(x) + ag_relu(-x),
    tanh = ag_tanh(x),
    sign = , floor = , ceiling = , trunc = , round = , signif =
      .ag_constant_like(x, get(.Generic, envir = baseenv())(.ag_data(x), ...)),
    {
      if (isTRUE(x$requires_grad) && isTRUE(.rs(rs_ag_tape("enabled")))) {
        .abort(sprintf(paste0(
          "%s() has no backward rule for ag_tensors, and this tensor needs a gradient on the ",
          "recording tape: compose it from recorded ops (exp, log, tanh, ag_* functions), ",
          "or use %s(x$data) for a value that is not differentiated"), .Generic, .Generic))
      }
      .ag_constant_like(x, get(.Generic, envir = baseenv())(.ag_data(x), ...))
    }
  )
}

# A tensor (no gradient) on x's device holding `value` in x's shape.
.ag_constant_like <- function(x, value) {
  ag_tensor(matrix(as.double(value), x$shape[1L], x$shape[2L]), device = x$device,
            dtype = x$dtype %||% "f32")
}

#' @rdname ag_tensor_math
#' @export
Summary.ag_tensor <- function(..., na.rm = FALSE) {
  args <- list(...)
  if (.Generic == "sum") {
    tensors <- Filter(is_ag_tensor, args)
    rest <- Filter(Negate(is_ag_tensor), args)
    out <- Reduce(`+`, lapply(tensors, ag_sum))
    if (length(rest)) out <- out + sum(unlist(rest), na.rm = na.rm)
    return(out)
  }
  values <- lapply(args, function(a) if (is_ag_tensor(a)) .ag_data(a) else a)
  do.call(get(.Generic, envir = baseenv()), c(values, list(na.rm = na.rm)))
}

#' @rdname ag_tensor_math
#' @export
mean.ag_tensor <- function(x, ...) {
  if (length(list(...))) {
    .abort("mean() of an ag_tensor takes no further arguments: use mean(x$data, ...) for trim or na.rm")
  }
  ag_mean(x)
}
