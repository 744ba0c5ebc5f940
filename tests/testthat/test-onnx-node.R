# A subset of the ONNX node test cases (the onnx package's own cases: models
# with inputs and reference outputs), two per operator, on every device.
# tools/onnx-node-tests.py and tools/onnx-node-fixtures.R regenerate them.

index <- utils::read.delim(onnx_fixture("onnx-node", "index.tsv"), stringsAsFactors = FALSE)

for (dev in onnx_devices()) {
  test_that(sprintf("ONNX node test cases pass on %s (%d cases, %d operators)", dev,
                    nrow(index), length(unique(index$op))), {
    if (dev == "vulkan") skip_if_no_vulkan()
    bad <- character(0)
    for (i in seq_len(nrow(index))) {
      r <- tryCatch(onnx_run_case(onnx_fixture("onnx-node", onnx_case_dir(index$case[i])), dev, index$rtol[i], index$atol[i]),
                    error = function(e) paste("error:", conditionMessage(e)))
      if (nzchar(r)) bad <- c(bad, sprintf("%s (%s): %s", index$case[i], index$op[i], r))
    }
    expect(length(bad) == 0, paste(c("failing cases:", head(bad, 20)), collapse = "\n"))
  })
}
