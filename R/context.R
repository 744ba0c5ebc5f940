#' Contexts
#'
#' A context holds tensor descriptors. Each tensor takes
#' `ggml_tensor_overhead()` bytes of the context's `mem_size`; with
#' `no_alloc = FALSE` the tensors' data is taken from the context too, with
#' `no_alloc = TRUE` it comes later from a backend buffer
#' ([ggml_backend_alloc_ctx_tensors()]). Running out of room is an R error.
#'
#' `ggml_free()` frees the context: its tensors can no longer be used (doing so
#' is an error), and its own data is released.
#'
#' @param mem_size Capacity in bytes.
#' @param no_alloc `TRUE` to create tensor descriptors only.
#' @param ctx A `ggml_context`.
#' @return `ggml_init()`: a `ggml_context`. `ggml_get_mem_size()`,
#'   `ggml_used_mem()`: bytes (numeric). `ggml_free()`: `NULL`, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
#' ggml_used_mem(ctx)
#' ggml_get_mem_size(ctx)
#' ctx
#' ggml_free(ctx)
ggml_init <- function(mem_size = 16 * 1024 * 1024, no_alloc = FALSE) {
  ptr <- .rs(rs_init(mem_size, no_alloc))
  class(ptr) <- "ggml_context"
  ptr
}

#' @rdname ggml_init
#' @export
ggml_free <- function(ctx) invisible(.rs(rs_free(ctx)))

#' @rdname ggml_init
#' @export
ggml_get_mem_size <- function(ctx) .rs(rs_ctx_info(ctx))$mem_size

#' @rdname ggml_init
#' @export
ggml_used_mem <- function(ctx) .rs(rs_ctx_info(ctx))$used

#' Memory overheads
#'
#' `ggml_tensor_overhead()` is the number of bytes one tensor descriptor takes
#' in a context; size contexts made with `no_alloc = TRUE` as
#' `n * ggml_tensor_overhead()`. `ggml_graph_overhead()` is the size ggml
#' reserves for a graph (graphs here are not taken from a context).
#'
#' @return Bytes, a number.
#' @export
#' @examples
#' ctx <- ggml_init(10 * ggml_tensor_overhead(), no_alloc = TRUE)
#' ggml_tensor_overhead()
#' ggml_graph_overhead()
#' ggml_free(ctx)
ggml_tensor_overhead <- function() .rs(rs_overheads())$tensor

#' @rdname ggml_tensor_overhead
#' @export
ggml_graph_overhead <- function() .rs(rs_overheads())$graph

#' @export
print.ggml_context <- function(x, ...) {
  info <- .rs(rs_ctx_info(x))
  if (info$freed) {
    cat("<ggml_context> (freed)\n")
  } else {
    cat(sprintf("<ggml_context> %d tensor(s), %s of %s used%s\n",
      info$n_tensors, .fmt_bytes(info$used), .fmt_bytes(info$mem_size),
      if (info$no_alloc) " (no_alloc)" else ""))
  }
  invisible(x)
}

.fmt_bytes <- function(n) {
  units <- c("B", "KiB", "MiB", "GiB", "TiB")
  i <- 1L
  while (n >= 1024 && i < length(units)) {
    n <- n / 1024
    i <- i + 1L
  }
  if (i == 1L) sprintf("%d B", as.integer(n)) else sprintf("%.1f %s", n, units[i])
}
