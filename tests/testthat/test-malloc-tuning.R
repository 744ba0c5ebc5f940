test_that("the allocator tuning applies on Linux with glibc and is harmless to repeat", {
  skip_if_not(identical(Sys.info()[["sysname"]], "Linux"), "glibc allocator settings are Linux-only")
  glibc <- tryCatch(grepl("GNU|glibc", system("ldd --version 2>&1", intern = TRUE)[1L], ignore.case = TRUE),
                    error = function(e) FALSE)
  skip_if_not(glibc, "not a glibc system")
  expect_true(ggmlR:::rs_malloc_tune())
  # memory still behaves: a large ag op after the tuning gives base R's result
  m <- matrix(seq_len(600 * 700) / 1e5, 600, 700)
  expect_equal(ag_matmul(ag_tensor(t(m)), ag_tensor(m))$data, crossprod(m), tolerance = 1e-10)
})
