#' Memory statistics of the engine
#'
#' The byte ledger sees every buffer allocated on every backend, CPU and
#' Vulkan alike. This reports its figures: live bytes and buffers of the
#' residency pools ("pass": activations and gradients of device `"gpu"`,
#' freed at every tape reset; "persistent": resident weights and optimizer
#' state) and of buffers and contexts allocated directly (`user`: from
#' [ggml_init()] with memory and [ggml_backend_alloc_ctx_tensors()]), the
#' peak, and the bytes and calls of uploads (host to buffer) and downloads.
#' `ncnn_cache_bytes` is host memory of finished ncnn blobs kept for reuse by
#' the next inference (at most 256 MB).
#'
#' What the ledger does not cover: values and gradients of `"cpu"` tensors
#' (and of every tensor R holds a copy of) live in ordinary heap memory,
#' freed when the last reference goes (for an `ag_tensor` that R still
#' holds, when R collects it); so training on `"cpu"` leaves the ledger at
#' zero. On Linux with glibc the package asks the C library, when it is
#' loaded, to keep up to 64 MiB of freed heap memory for reuse and to serve
#' blocks of up to 32 MiB from the heap: a training step then reuses the
#' memory of the previous one instead of taking it back from the kernel page
#' by page. Set `options(ggmlR.malloc_tuning = FALSE)` before loading the
#' package to keep the C library's defaults.
#'
#' @return A one-row data frame of class `ag_memory_stats` with every figure
#'   (`pass_bytes`, `persistent_bytes`, `user_bytes`, `total_bytes`,
#'   `peak_bytes`, the buffer counts, `upload_bytes`, `upload_calls`,
#'   `download_bytes`, `download_calls` and their split by pool,
#'   `ncnn_cache_bytes`, `allocations`, `refusals`, `limit`). It prints as a
#'   short summary; `as.data.frame()` or `$` give the figures.
#' @seealso [ag_memory_limit()]
#' @export
#' @examples
#' ag_memory_stats()
#' ctx <- ggml_init(1024 * 1024)
#' ag_memory_stats()$user_bytes
#' ggml_free(ctx)
#' names(as.data.frame(ag_memory_stats()))
ag_memory_stats <- function() {
  s <- as.data.frame(.rs(rs_ledger_stats()))
  class(s) <- c("ag_memory_stats", "data.frame")
  s
}

#' @export
print.ag_memory_stats <- function(x, ...) {
  needed <- c("total_bytes", "total_buffers", "peak_bytes", "limit", "refusals", "ncnn_cache_bytes",
              paste0(c("pass", "persistent", "user"), "_bytes"), paste0(c("pass", "persistent", "user"), "_buffers"),
              paste0(c("upload", "download"), "_bytes"), paste0(c("upload", "download"), "_calls"))
  # a subset or several rows print as the data frame they are
  if (nrow(x) != 1L || !all(needed %in% names(x))) return(print(as.data.frame(x), ...))
  b <- .ag_bytes
  lim <- if (is.finite(x$limit)) b(x$limit) else "none"
  cat(sprintf("<ag_memory_stats> live %s (%s), peak %s, budget %s\n", b(x$total_bytes),
              .ag_count_words(x$total_buffers, "buffer"), b(x$peak_bytes), lim))
  pools <- data.frame(
    pool = c("pass", "persistent", "user"),
    live = c(b(x$pass_bytes), b(x$persistent_bytes), b(x$user_bytes)),
    buffers = c(x$pass_buffers, x$persistent_buffers, x$user_buffers),
    holds = c("\"gpu\" activations and gradients, per tape",
              "resident weights, optimizer state",
              "ggml_init(), ggml_backend_alloc_*()"))
  out <- utils::capture.output(print(pools, row.names = FALSE, right = FALSE))
  cat(paste0("  ", sub("\\s+$", "", out)), sep = "\n")
  cat(sprintf("  uploads %s (%s), downloads %s (%s)\n",
              b(x$upload_bytes), .ag_count_words(x$upload_calls, "call"),
              b(x$download_bytes), .ag_count_words(x$download_calls, "call")))
  cat(sprintf("  ncnn cache %s%s\n", b(x$ncnn_cache_bytes),
              if (x$refusals > 0) sprintf("; %s refused by the budget", .ag_count_words(x$refusals, "allocation")) else ""))
  cat("  \"cpu\" tensors are R heap memory, not in the ledger (see ?ag_memory_stats)\n")
  cat("  as.data.frame() or $ give all", ncol(x), "figures\n")
  invisible(x)
}

#' @export
as.data.frame.ag_memory_stats <- function(x, ...) {
  class(x) <- "data.frame"
  x
}

# Bytes in IEC units: "0 B", "512 B", "1.5 KiB", "3.0 MiB".
.ag_bytes <- function(n) {
  if (is.na(n)) return("NA")
  units <- c("B", "KiB", "MiB", "GiB", "TiB")
  k <- if (n < 1024) 1L else min(length(units), floor(log(n, 1024)) + 1L)
  if (k == 1L) sprintf("%d B", as.integer(n)) else sprintf("%.1f %s", n / 1024^(k - 1L), units[k])
}

#' Memory budget
#'
#' Get or set the budget that every buffer allocation is checked against:
#' an allocation that would take the ledger's live bytes past it is refused
#' with an error before anything is allocated.
#'
#' @param bytes `NULL` to get the budget; a positive number of bytes, or
#'   `Inf` for no budget, to set it.
#' @return The budget in bytes (`Inf`: none); when setting, the previous one,
#'   invisibly.
#' @export
#' @examples
#' ag_memory_limit()
#' old <- ag_memory_limit(512 * 1024^2)
#' ag_memory_limit()
#' ag_memory_limit(old)
ag_memory_limit <- function(bytes = NULL) .ag_tape_mem_limit(bytes)
