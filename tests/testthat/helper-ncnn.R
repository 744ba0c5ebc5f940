# Helpers for the ncnn tests: a layer factory that records the layers it made
# and how many were destroyed, registration/loading/inference shortcuts, and
# garbage collection that also lets released callbacks go.

ncnn_factory <- function(increment) {
  f <- new.env()
  f$increment <- increment
  f$layers <- list()
  f$destroyed <- 0L
  f$create <- function() {
    layer <- ncnn_layer(function(x) x * 0 + x[1] + increment)
    f$layers[[length(f$layers) + 1L]] <- layer
    layer
  }
  f$destroy <- function(layer) {
    i <- Position(function(l) identical(l, layer), f$layers)
    if (is.na(i)) stop("destroyer got a layer this factory did not make")
    f$layers[[i]] <- NULL
    f$destroyed <- f$destroyed + 1L
  }
  f
}

ncnn_key <- function(kind, index = 0) {
  if (kind == "name") paste0("CustomLayer", index) else 256 + index
}

ncnn_register <- function(net, factory, kind, index = 0) {
  expect_invisible(net$register_custom_layer(ncnn_key(kind, index), factory$create, factory$destroy))
}

ncnn_load <- function(net, kind, index = 0) {
  if (kind == "name") {
    net$load_param_mem(sprintf(
      "7767517\n2 2\nInput data 0 1 data\nCustomLayer%d custom 1 1 data output\n", index
    ))
  } else {
    # Binary Input (16), then the registered custom layer by index.
    values <- c(7767517, 2, 2, 16, 0, 1, 0, -233, 256 + index, 1, 1, 0, 1, -233)
    path <- tempfile(fileext = ".param.bin")
    writeBin(as.integer(values), path, size = 4L, endian = "little")
    net$load_param_bin(path)
    unlink(path)
  }
  net$load_model(ncnn_datareader_empty())
}

ncnn_infer <- function(net, expected) {
  ex <- net$create_extractor()
  ex$input(0, 1)
  out <- ex$extract(1)
  expect_equal(out[1], expected)
}

# Two collections: the first runs finalizers that release preserved
# callbacks, the second frees what they held.
ncnn_gc <- function() {
  for (i in 1:2) gc(full = TRUE)
  invisible()
}

ncnn_alive <- function(ref) !is.null(rlang::wref_key(ref))

ncnn_fixture_dir <- function() test_path("fixtures", "ncnn")

# Run an R script in a fresh Rscript with this session's library paths;
# returns the exit status.
withr_env_system <- function(file, out, err) {
  rscript <- file.path(R.home("bin"), "Rscript")
  old <- Sys.getenv("R_LIBS")
  on.exit(Sys.setenv(R_LIBS = old))
  Sys.setenv(R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep))
  system2(rscript, c("--vanilla", shQuote(file)), stdout = out, stderr = err)
}
