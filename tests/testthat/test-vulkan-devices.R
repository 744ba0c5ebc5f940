test_that("device queries work, or say why not, without a device", {
  devs <- ggml_vulkan_list_devices()
  expect_s3_class(devs, "data.frame")
  expect_identical(names(devs), c("index", "name", "type", "driver", "memory", "f16"))
  expect_identical(nrow(devs), ggml_vulkan_device_count())
  expect_output(s <- ggml_vulkan_status(), "Vulkan")
  expect_type(s, "character")
  n <- ggml_vulkan_device_count()
  expect_error(ggml_vulkan_device_description(n), "Vulkan", class = "ggmlR_error")
  expect_error(ggml_vulkan_device_memory(-1), "device", class = "ggmlR_error")
  expect_error(ggml_vulkan_device_caps("a"), "device", class = "ggmlR_error")
  expect_error(ggml_vulkan_device_caps(1.5), "device", class = "ggmlR_error")
})

test_that("each Vulkan device is described consistently", {
  skip_if_no_vulkan()
  devs <- ggml_vulkan_list_devices()
  expect_identical(devs$index, seq_len(nrow(devs)) - 1L)
  expect_true(all(devs$type %in% c("discrete", "integrated", "virtual", "cpu", "other")))
  expect_true(all(devs$memory > 0))
  for (i in devs$index) {
    expect_identical(ggml_vulkan_device_description(i), devs$name[i + 1L])
    mem <- ggml_vulkan_device_memory(i)
    expect_named(mem, c("free", "total"))
    expect_identical(mem$total, devs$memory[i + 1L])
    expect_true(mem$free >= 0 && mem$free <= mem$total)
    caps <- ggml_vulkan_device_caps(i)
    expect_identical(names(caps)[1:16], c(
      "coopmat_support", "coopmat1_fa_support", "fp16", "bf16", "integer_dot_product",
      "subgroup_size", "subgroup_min_size", "subgroup_max_size", "subgroup_no_shmem",
      "wavefronts_per_simd", "arch", "coopmat_m", "coopmat_n", "coopmat_k",
      "supports_256_push_constants", "max_push_constants_size"
    ))
    expect_identical(caps$fp16, devs$f16[i + 1L])
    expect_identical(caps$type, devs$type[i + 1L])
    expect_type(caps$subgroup_size, "integer")
    expect_gte(caps$max_push_constants_size, 128L)
    expect_length(caps$max_compute_work_group_count, 3L)
    expect_true(caps$max_memory_allocation_count > 0L)
  }
})

test_that("lavapipe is recognised as a CPU-type device sharing host memory", {
  skip_if_no_vulkan()
  devs <- ggml_vulkan_list_devices()
  lvp <- which(grepl("llvmpipe", devs$name))
  skip_if(length(lvp) == 0L, "no lavapipe device")
  expect_identical(devs$type[lvp[1]], "cpu")
  expect_true(ggml_vulkan_device_caps(devs$index[lvp[1]])$unified_memory)
})

test_that("device queries are quiet and sensible without a loader", {
  rscript <- file.path(R.home("bin"), "Rscript")
  env <- c("VK_ICD_FILENAMES=/nonexistent.json", "VK_DRIVER_FILES=/nonexistent.json",
           "LD_LIBRARY_PATH=/nonexistent")
  code <- paste(
    "d <- ggmlR::ggml_vulkan_list_devices();",
    "e <- tryCatch(ggmlR::ggml_vulkan_device_memory(0), error = conditionMessage);",
    "cat(nrow(d), grepl('Vulkan', e))"
  )
  out <- suppressWarnings(system2(rscript, c("-e", shQuote(code)),
                                  env = env, stdout = TRUE, stderr = TRUE))
  expect_identical(out, "0 TRUE")
})
