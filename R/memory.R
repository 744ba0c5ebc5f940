#' Memory statistics of the engine
#'
#' The byte ledger sees every buffer allocated on every backend. This reports
#' its figures: live bytes and buffers of the residency pools ("pass":
#' activations and gradients, freed at every tape reset; "persistent":
#' resident weights and optimizer state) and of buffers allocated directly
#' (`user`), the peak, the bytes and calls of uploads (host to buffer) and
#' downloads, and of copies from one buffer to another (`copy_bytes`,
#' `copy_calls`: a scheduler's copies between backends, for one).
#' `ncnn_cache_bytes` is host memory of finished ncnn blobs kept for reuse by
#' the next inference (at most 256 MB).
#'
#' Host memory outside the ledger: values and gradients of `"cpu"` tensors
#' live in ordinary heap memory, freed when the last reference goes (for an
#' `ag_tensor` that R still holds, when R collects it). On Linux with glibc the
#' package asks the C library, when it is loaded, to keep up to 64 MiB of
#' freed heap memory for reuse and to serve blocks of up to 32 MiB from the
#' heap: a training step then reuses the memory of the previous one instead of
#' taking it back from the kernel page by page. Set
#' `options(ggmlR.malloc_tuning = FALSE)` before loading the package to keep
#' the C library's defaults.
#'
#' @return A one-row data frame.
#' @seealso [ag_memory_limit()]
#' @export
#' @examples
#' ag_memory_stats()
#' ctx <- ggml_init(1024 * 1024)
#' ag_memory_stats()$user_bytes
#' ggml_free(ctx)
ag_memory_stats <- function() {
  s <- .rs(rs_ledger_stats())
  as.data.frame(s)
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
