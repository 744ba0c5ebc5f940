# ncnn_release_cache() frees the blob memory that inference keeps for reuse.

test_that("ncnn_release_cache() frees the kept blob memory and reports it", {
  net <- ncnn_net(num_threads = 1)
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU relu 1 1 data out\n")
  net$load_model(ncnn_datareader_empty())
  x <- array(seq(-1, 1, length.out = 128 * 128), c(128, 128))
  ex <- net$create_extractor()
  ex$input("data", x)
  y <- ex$extract("out")
  expect_equal(y, pmax(x, 0), tolerance = 1e-6)
  rm(ex, y)
  gc()
  # The input blob (128 x 128 floats) went back to the cache.
  kept <- ag_memory_stats()$ncnn_cache_bytes
  expect_gte(kept, 128 * 128 * 4)
  released <- ncnn_release_cache()
  expect_equal(released, kept)
  expect_equal(ag_memory_stats()$ncnn_cache_bytes, 0)
  expect_invisible(ncnn_release_cache())
  expect_equal(ncnn_release_cache(), 0)
  # Inference still works afterwards.
  ex <- net$create_extractor()
  ex$input("data", -x)
  expect_equal(ex$extract("out"), pmax(-x, 0), tolerance = 1e-6)
})
