# Contexts: reset, allocation mode, what they hold, sizing helpers.

#' Reset a context
#'
#' Makes all of a context's memory free again, as after [ggml_init()]: its
#' tensors are retired (using one afterwards is an error that names the
#' reset) and new tensors start from the beginning of its memory.
#'
#' @param ctx A `ggml_context`.
#' @return `NULL`, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1000)
#' ggml_used_mem(ctx)
#' ggml_reset(ctx)
#' ggml_used_mem(ctx)
#' ggml_free(ctx)
ggml_reset <- function(ctx) invisible(.rs(rs_ctx_control(ctx, "reset")))

#' Allocation mode of a context
#'
#' With `no_alloc = TRUE`, tensors created from now on get no memory from
#' the context (give it to them with [ggml_backend_alloc_ctx_tensors()] or a
#' graph allocator); with `FALSE` they take it from the context's memory
#' (which a context made with `no_alloc = TRUE` takes when first switched).
#'
#' @param ctx A `ggml_context`.
#' @param no_alloc `TRUE` or `FALSE`.
#' @return `ggml_set_no_alloc()`: `NULL`, invisibly. `ggml_get_no_alloc()`:
#'   a logical.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' ggml_set_no_alloc(ctx, TRUE)
#' ggml_get_no_alloc(ctx)
#' ggml_free(ctx)
ggml_set_no_alloc <- function(ctx, no_alloc) {
  if (!is.logical(no_alloc) || length(no_alloc) != 1L || is.na(no_alloc)) {
    .abort("`no_alloc` must be TRUE or FALSE.")
  }
  invisible(.rs(rs_ctx_control(ctx, if (no_alloc) "no_alloc" else "alloc")))
}

#' @rdname ggml_set_no_alloc
#' @export
ggml_get_no_alloc <- function(ctx) .rs(rs_ctx_info(ctx))$no_alloc

#' What a context holds
#'
#' `ggml_get_max_tensor_size()` is the size in bytes of the context's
#' largest tensor (0 when it has none). `ggml_print_objects()` prints each
#' tensor with its type, sizes, bytes and op. `ggml_print_mem_status()`
#' prints the context's total, used and free memory.
#'
#' @param ctx A `ggml_context`.
#' @return `ggml_get_max_tensor_size()`: bytes. `ggml_print_objects()`: a
#'   data frame of the tensors, invisibly. `ggml_print_mem_status()`:
#'   `list(total, used, free)` in bytes, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 10, 10)
#' ggml_get_max_tensor_size(ctx)
#' ggml_print_objects(ctx)
#' ggml_print_mem_status(ctx)
#' ggml_free(ctx)
ggml_get_max_tensor_size <- function(ctx) .rs(rs_ctx_objects(ctx))$max_tensor_size

#' @rdname ggml_get_max_tensor_size
#' @export
ggml_print_objects <- function(ctx) {
  o <- .rs(rs_ctx_objects(ctx))
  df <- data.frame(name = o$names, type = o$types, shape = o$shapes, bytes = o$bytes, op = o$ops,
                   stringsAsFactors = FALSE)
  cat(sprintf("%d tensor(s) in the context\n", nrow(df)))
  if (nrow(df) > 0L) print(df, row.names = FALSE)
  invisible(df)
}

#' @rdname ggml_get_max_tensor_size
#' @export
ggml_print_mem_status <- function(ctx) {
  total <- ggml_get_mem_size(ctx)
  used <- ggml_used_mem(ctx)
  free <- total - used
  pct <- function(x) if (total > 0) 100 * x / total else 0
  cat("Context memory:\n")
  cat(sprintf("  total %s\n  used  %s (%.1f%%)\n  free  %s (%.1f%%)\n",
              .fmt_bytes(total), .fmt_bytes(used), pct(used), .fmt_bytes(free), pct(free)))
  invisible(list(total = total, used = used, free = free))
}

#' Sizing contexts
#'
#' `ggml_estimate_memory()` is the context memory one tensor of these sizes
#' takes: its data, its descriptor ([ggml_tensor_overhead()]) and up to 256
#' bytes of alignment. `ggml_init_auto()` makes a context large enough for
#' the tensors whose sizes are given (each a vector of 1 to 4 sizes), plus
#' `extra_mb` megabytes (with `no_alloc = TRUE`, tensors get no memory from
#' it, see [ggml_init()]).
#'
#' @param type A type code.
#' @param ne0,ne1,ne2,ne3 Sizes.
#' @param ... Sizes of the planned tensors, one vector each.
#' @param extra_mb Megabytes to add.
#' @param no_alloc Whether the context's tensors get no memory from it.
#' @return `ggml_estimate_memory()`: bytes. `ggml_init_auto()`: a
#'   `ggml_context`.
#' @export
#' @examples
#' ggml_estimate_memory(GGML_TYPE_F32, 1000, 1000)
#' ctx <- ggml_init_auto(w = c(100, 100), b = 100)
#' ggml_get_mem_size(ctx)
#' ggml_free(ctx)
ggml_estimate_memory <- function(type = GGML_TYPE_F32, ne0, ne1 = 1, ne2 = 1, ne3 = 1) {
  ne <- c(ne0, ne1, ne2, ne3)
  if (!is.numeric(ne) || length(ne) != 4L || anyNA(ne) || any(ne < 0)) {
    .abort("`ne0` to `ne3` must be single sizes (whole numbers of at least 0).")
  }
  prod(ne) * ggml_type_size(type) + ggml_tensor_overhead() + 256
}

#' @rdname ggml_estimate_memory
#' @export
ggml_init_auto <- function(..., extra_mb = 10, type = GGML_TYPE_F32, no_alloc = FALSE) {
  sizes <- list(...)
  total <- 0
  for (i in seq_along(sizes)) {
    s <- sizes[[i]]
    if (!is.numeric(s) && !is.logical(s) || length(s) < 1L || length(s) > 4L) {
      .abort(sprintf("argument %d of `...` must give 1 to 4 sizes of a tensor.", i))
    }
    s <- c(as.numeric(s), rep(1, 4L - length(s)))
    total <- total + ggml_estimate_memory(type, s[1], s[2], s[3], s[4])
  }
  if (!is.numeric(extra_mb) || length(extra_mb) != 1L || is.na(extra_mb) || extra_mb < 0) {
    .abort("`extra_mb` must be a number of megabytes of at least 0.")
  }
  ggml_init(ceiling(total + extra_mb * 1024 * 1024), no_alloc = no_alloc)
}

#' A temporary context
#'
#' Evaluates `expr` with `ctx` bound to a new context of `mem_size` bytes,
#' freed afterwards (also on error). Return values, not tensors: the
#' context's tensors are unusable once it is freed.
#'
#' @param mem_size Bytes.
#' @param expr An expression using `ctx`.
#' @return The value of `expr`.
#' @export
#' @examples
#' ggml_with_temp_ctx(1024 * 1024, {
#'   a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), 1:3)
#'   ggml_get_f32(a) * 2
#' })
ggml_with_temp_ctx <- function(mem_size, expr) {
  ctx <- ggml_init(mem_size)
  on.exit(ggml_free(ctx), add = TRUE)
  eval(substitute(expr), envir = list(ctx = ctx), enclos = parent.frame())
}
