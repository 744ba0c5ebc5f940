# Four architectures exported from PyTorch with random weights
# (tools/onnx-architectures.py): ggmlR's outputs against onnxruntime's, on
# the CPU and on Vulkan, within 1e-4 relative to the largest output.

for (dev in onnx_devices()) {
  for (nm in c("cnn", "transformer", "lstm", "recurrent")) {
    test_that(sprintf("the %s matches onnxruntime on %s", nm, dev), {
      if (dev == "vulkan") skip_if_no_vulkan()
      m <- onnx_load(onnx_fixture("onnx-arch", paste0(nm, ".onnx")), device = dev)
      x <- onnx_pb(onnx_fixture("onnx-arch", nm, "input_0.pb"))
      want <- onnx_pb(onnx_fixture("onnx-arch", nm, "output_0.pb"))
      got <- onnx_run(m, list(x = x$value))$y
      expect_equal(dim(got), want$shape)
      rel <- max(abs(as.numeric(got) - as.numeric(want$value))) / max(abs(as.numeric(want$value)))
      expect_lt(rel, 1e-4)
      # Weights stay on the device: a second run gives the same values.
      again <- onnx_run(m, list(x = x$value))$y
      expect_identical(as.numeric(again), as.numeric(got))
      info <- onnx_device_info(m)
      expect_equal(info$n_splits, 1L)
      expect_length(info$cpu_only_ops, 0)
    })
  }
}

test_that("a Vulkan run is one queue submission", {
  skip_if_no_vulkan()
  m <- onnx_load(onnx_fixture("onnx-arch", "transformer.onnx"), device = "vulkan")
  x <- onnx_pb(onnx_fixture("onnx-arch", "transformer", "input_0.pb"))
  onnx_run(m, list(x = x$value))
  b <- ggml_vulkan_init(0L)
  before <- ggml_vulkan_backend_stats(b)$submissions
  onnx_run(m, list(x = x$value))
  expect_equal(ggml_vulkan_backend_stats(b)$submissions - before, 1)
})
