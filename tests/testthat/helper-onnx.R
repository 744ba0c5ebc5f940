# ONNX test helpers: fixtures written by tools/ scripts (the onnx package's
# node test cases, three architectures run by onnxruntime), read with the
# package's own TensorProto reader.

onnx_fixture <- function(...) test_path("fixtures", ...)

# The folder of a node test case: R CMD build leaves out folders whose names
# end in "old", so such a case's folder gets a trailing "_"
# (tools/onnx-node-fixtures.R writes them so).
onnx_case_dir <- function(case) ifelse(grepl("[Oo]ld$", case), paste0(case, "_"), case)

onnx_devices <- function() {
  devs <- "cpu"
  if (ggml_vulkan_available() || nzchar(Sys.getenv("GGMLR_REQUIRE_VULKAN"))) devs <- c(devs, "vulkan")
  devs
}

# A TensorProto file as an array with dim() in ONNX order (row-major values).
# The fixtures are stored compressed (`path`.gz): uncompressed, some of them
# look like executables to file(1), which R CMD check reports.
onnx_pb <- function(path) {
  if (!file.exists(path) && file.exists(paste0(path, ".gz"))) path <- paste0(path, ".gz")
  t <- ggmlR:::.onnx_read_tensor(path)
  v <- t$value
  if (length(t$shape) >= 1) dim(v) <- t$shape
  list(name = t$name, value = v, shape = t$shape)
}

# numpy's assert_allclose: |got - want| <= atol + rtol * |want|, NaN == NaN.
onnx_close <- function(got, want, rtol, atol) {
  a <- as.numeric(got)
  e <- as.numeric(want)
  if (length(a) != length(e)) return(FALSE)
  ok <- (is.na(a) & is.na(e)) | (!is.na(a) & !is.na(e) & ((!is.finite(e) & a == e) | abs(a - e) <= atol + rtol * abs(e)))
  all(ok)
}

# Runs one node test case folder on `device`; returns "" or what differs.
onnx_run_case <- function(dir, device, rtol, atol) {
  m <- onnx_load(file.path(dir, "model.onnx"), device = device, n_threads = 1)
  for (s in list.files(dir, pattern = "^test_data_set_", full.names = TRUE)) {
    ins <- list.files(s, pattern = "^input_", full.names = TRUE)
    ins <- ins[order(as.integer(gsub("\\D", "", basename(ins))))]
    inputs <- list()
    for (f in ins) {
      t <- onnx_pb(f)
      inputs[[t$name]] <- t$value
    }
    got <- onnx_run(m, inputs)
    outs <- list.files(s, pattern = "^output_", full.names = TRUE)
    outs <- outs[order(as.integer(gsub("\\D", "", basename(outs))))]
    for (j in seq_along(outs)) {
      want <- onnx_pb(outs[[j]])
      g <- got[[j]]
      if (!onnx_close(g, want$value, rtol, atol)) {
        return(sprintf("output %d: got %s, expected %s", j,
                       paste(format(head(as.numeric(g)), digits = 4), collapse = " "),
                       paste(format(head(as.numeric(want$value)), digits = 4), collapse = " ")))
      }
    }
  }
  ""
}
