#' Release the memory ncnn inference keeps for reuse
#'
#' Blob memory of finished ncnn inferences is kept (up to 256 MB, reported as
#' `ncnn_cache_bytes` by [ag_memory_stats()]) so that the next inference
#' reuses warm buffers. `ncnn_release_cache()` frees it now, for example after
#' the last inference of a session part; later inferences simply allocate
#' again.
#'
#' @return The number of bytes released, invisibly.
#' @seealso [ncnn_net()], [ag_memory_stats()]
#' @export
#' @examples
#' net <- ncnn_net(num_threads = 1)
#' net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU relu 1 1 data out\n")
#' net$load_model(ncnn_datareader_empty())
#' ex <- net$create_extractor()
#' ex$input("data", array(runif(64 * 64) - 0.5, c(64, 64)))
#' y <- ex$extract("out")
#' rm(ex, y)
#' ag_memory_stats()$ncnn_cache_bytes
#' ncnn_release_cache()
#' ag_memory_stats()$ncnn_cache_bytes
ncnn_release_cache <- function() {
  invisible(.rs(rs_ncnn_release_cache()))
}
