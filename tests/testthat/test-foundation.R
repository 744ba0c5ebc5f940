test_that("the version is ggml's, the package's is its own", {
  expect_identical(ggml_version(), "0.11.0")
})

test_that("the CPU backend is created, named, printed and freed", {
  b <- ggml_backend_cpu_init()
  expect_s3_class(b, "ggml_backend")
  expect_identical(ggml_backend_name(b), "CPU")
  expect_output(print(b), "<ggml_backend> CPU")
  expect_invisible(ggml_backend_free(b))
  expect_output(print(b), "freed")
  expect_error(ggml_backend_name(b), "was freed", class = "ggmlR_error")
  # Freeing twice is harmless.
  expect_no_error(ggml_backend_free(b))
})

test_that("device counts agree with Vulkan discovery", {
  n_vk <- ggml_vulkan_device_count()
  expect_type(n_vk, "integer")
  expect_identical(ggml_backend_dev_count(), 1 + n_vk)  # a double, as upstream
  expect_identical(ggml_vulkan_available(), n_vk > 0L)
  expect_type(ggml_vulkan_status(), "character")
})

test_that("Vulkan is found where a driver is installed", {
  skip_if_no_vulkan()
  expect_gte(ggml_backend_dev_count(), 2L)
})

test_that("Vulkan availability is quiet without a loader", {
  # A child R process that cannot find any Vulkan loader or driver.
  rscript <- file.path(R.home("bin"), "Rscript")
  env <- c("VK_ICD_FILENAMES=/nonexistent.json", "VK_DRIVER_FILES=/nonexistent.json",
           "LD_LIBRARY_PATH=/nonexistent")
  out <- suppressWarnings(system2(rscript,
    c("-e", shQuote("cat(ggmlR::ggml_vulkan_available(), ggmlR::ggml_backend_dev_count())")),
    env = env, stdout = TRUE, stderr = TRUE
  ))
  expect_identical(out, "FALSE 1")
})

test_that("bad arguments are R errors, not crashes", {
  expect_error(ggml_backend_name("cpu"), "must be a ggml_backend", class = "ggmlR_error")
  # An object of the right class but the wrong contents is caught by the engine.
  fake <- structure(list(), class = "ggml_backend")
  expect_error(ggml_backend_name(fake), "ggml_backend object", class = "ggmlR_error")
  # A backend pointer that did not survive serialisation.
  b <- unserialize(serialize(ggml_backend_cpu_init(), NULL))
  expect_error(ggml_backend_name(b), "ggml_backend", class = "ggmlR_error")
})

test_that("engine errors and panics reach R as ordinary conditions", {
  fail_fn <- get("rs_debug_fail", envir = asNamespace("ggmlR"))
  rs <- get(".rs", envir = asNamespace("ggmlR"))
  expect_error(rs(fail_fn("error")), "deliberate engine error", class = "ggmlR_error")
  err <- tryCatch(rs(fail_fn("panic")), error = identity)
  expect_s3_class(err, "ggmlR_internal_error")
  expect_match(conditionMessage(err), "deliberate panic")
  expect_match(conditionMessage(err), "session is intact")
  # A wrong argument type inside the engine is an error too.
  expect_error(rs(fail_fn(42)), "single string", class = "ggmlR_error")
  # And the session keeps working afterwards.
  expect_identical(ggml_backend_name(ggml_backend_cpu_init()), "CPU")
})

test_that("a panic writes nothing to stderr", {
  rscript <- file.path(R.home("bin"), "Rscript")
  code <- paste(
    "f <- get('rs_debug_fail', envir = asNamespace('ggmlR'));",
    "r <- try(get('.rs', envir = asNamespace('ggmlR'))(f('panic')), silent = TRUE);",
    "cat(inherits(r, 'try-error'))"
  )
  err_file <- tempfile()
  out <- system2(rscript, c("-e", shQuote(code)), stdout = TRUE, stderr = err_file)
  expect_identical(out, "TRUE")
  expect_identical(readLines(err_file), character())
})
