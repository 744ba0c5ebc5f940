# Single-operator models run by onnxruntime (tools/onnx-ort-cases.py):
# Resize with antialias, 3-D and dilated pooling with MaxPool's indices,
# 3-D Conv and ConvTranspose, BatchNormalization in training mode.

ort_index <- utils::read.delim(onnx_fixture("onnx-ort", "index.tsv"), stringsAsFactors = FALSE)

for (dev in onnx_devices()) {
  for (op in unique(ort_index$op)) {
    rows <- ort_index[ort_index$op == op, , drop = FALSE]
    test_that(sprintf("%s matches onnxruntime on %s (%d cases)", op, dev, nrow(rows)), {
      if (dev == "vulkan") skip_if_no_vulkan()
      for (i in seq_len(nrow(rows))) {
        r <- onnx_run_case(onnx_fixture("onnx-ort", rows$case[i]), dev, rows$rtol[i], rows$atol[i])
        expect(identical(r, ""), sprintf("%s: %s", rows$case[i], r))
      }
    })
  }
}

test_that("MaxPool's indices are integers into the flattened input", {
  d <- onnx_fixture("onnx-ort", "maxpool_2d_indices_order_0")
  m <- onnx_load(file.path(d, "model.onnx"))
  x <- onnx_pb(file.path(d, "test_data_set_0", "input_0.pb"))$value
  out <- onnx_run(m, list(x = x))
  idx <- as.numeric(out[[2]])
  expect_equal(idx, round(idx))
  # Each index points at the value MaxPool returned (values row-major).
  expect_equal(as.numeric(x)[idx + 1], as.numeric(out[[1]]))
})
