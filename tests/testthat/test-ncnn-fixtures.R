# Every builtin layer case, three architectures (tools/ncnn_fixtures.py),
# the layers beyond the common set with their edge parameters
# (tools/ncnn_layer_fixtures.py) and the small networks of ncnn's benchmark
# with random weights (tools/ncnn_bench_fixtures.py --small; all 35 with
# GGMLR_NCNN_BENCH_DIR, see below), against
# outputs of the real ncnn saved by those scripts (no Python needed here).

dir <- ncnn_fixture_dir()
cases <- utils::read.delim(file.path(dir, "cases.tsv"), stringsAsFactors = FALSE)

parse_blobs <- function(s) {
  lapply(strsplit(s, ";", fixed = TRUE)[[1]], function(b) {
    # blob names may contain ':' themselves; the shape follows the last one
    at <- regexpr(":[^:]*$", b)
    list(name = substr(b, 1L, at - 1L), dim = as.integer(strsplit(substring(b, at + 1L), ",", fixed = TRUE)[[1]]))
  })
}

# Blob files: the tag "GGMLRF32", then little-endian float32 values.
read_blob <- function(file, dim) {
  con <- file(file, "rb")
  on.exit(close(con))
  stopifnot(identical(readBin(con, "raw", 8L), charToRaw("GGMLRF32")))
  v <- readBin(con, "numeric", n = prod(dim), size = 4L, endian = "little")
  array(v, dim)
}

# Relative agreement: every element within 1e-4 of the reference's scale.
expect_close <- function(got, ref, label) {
  expect_equal(dim(got), dim(ref), label = paste(label, "shape"))
  # NaN where the real ncnn makes one (an average over no values)
  expect_identical(is.nan(got), is.nan(ref), label = paste(label, "NaN positions"))
  keep <- !is.nan(ref)
  scale <- max(abs(ref[keep]), 1e-6)
  err <- max(abs(got[keep] - ref[keep]), 0) / scale
  expect_lt(err, 1e-4, label = paste(label, "relative error"))
}

run_case <- function(row, threads = 1, param = NULL, dir = ncnn_fixture_dir()) {
  ins <- parse_blobs(row$inputs)
  outs <- parse_blobs(row$outputs)
  net <- ncnn_net(num_threads = threads)
  if (is.null(param)) {
    net$load_param(file.path(dir, paste0(row$case, ".param")))
  } else {
    net$load_param_bin(param)
  }
  net$load_model(file.path(dir, paste0(row$case, ".bin")))
  # One extractor per output: in light mode (the default) an extractor
  # releases each blob once read, so a second output that needs the input
  # again is refused on the same extractor.
  fed <- function() {
    ex <- net$create_extractor()
    for (i in seq_along(ins)) {
      blob <- if (is.null(param)) ins[[i]]$name else i - 1
      ex$input(blob, read_blob(file.path(dir, sprintf("%s.%d.in", row$case, i - 1)), ins[[i]]$dim))
    }
    ex
  }
  lapply(seq_along(outs), function(i) {
    list(
      got = fed()$extract(outs[[i]]$name),
      ref = read_blob(file.path(dir, sprintf("%s.%d.out", row$case, i - 1)), outs[[i]]$dim)
    )
  })
}

for (k in seq_len(nrow(cases))) {
  row <- cases[k, ]
  test_that(paste("matches real ncnn:", row$case), {
    threads <- if (startsWith(row$case, "arch_")) c(1, 2) else 1
    for (t in threads) {
      res <- run_case(row, t)
      for (r in res) expect_close(r$got, r$ref, sprintf("%s (%d threads)", row$case, t))
    }
  })
}

test_that("the binary param of the ResNet-style net gives real ncnn's output", {
  row <- cases[cases$case == "arch_resnet", ]
  net <- ncnn_net(num_threads = 1)
  net$load_param_bin(file.path(dir, "arch_resnet.param.bin"))
  net$load_model(file.path(dir, "arch_resnet.bin"))
  layers <- net$layers()
  expect_true(all(layers$name == ""))
  # No names in a binary param: the blob indexes in layers() stand in.
  expect_equal(net$input_names(), "")
  expect_equal(layers$type[1], "Input")
  expect_equal(layers$tops[1], "0")
  expect_equal(layers$tops[nrow(layers)], "36")
  ex <- net$create_extractor()
  ex$input(0, read_blob(file.path(dir, "arch_resnet.0.in"), c(32, 32, 3)))
  got <- ex$extract(36)
  expect_close(got, read_blob(file.path(dir, "arch_resnet.0.out"), 10), "resnet from .param.bin")
})

test_that("weights load from a raw vector as from a file", {
  row <- cases[cases$case == "arch_mobilenet", ]
  net <- ncnn_net(num_threads = 1)
  net$load_param(file.path(dir, "arch_mobilenet.param"))
  bin <- file.path(dir, "arch_mobilenet.bin")
  net$load_model(readBin(bin, "raw", file.size(bin)))
  ex <- net$create_extractor()
  ex$input("data", read_blob(file.path(dir, "arch_mobilenet.0.in"), c(32, 32, 3)))
  expect_close(ex$extract("prob"), read_blob(file.path(dir, "arch_mobilenet.0.out"), 10), "mobilenet")
  expect_equal(net$input_names(), "data")
  expect_equal(net$output_names(), "prob")
})

layer_dir <- test_path("fixtures", "ncnn-layers")
layer_cases <- utils::read.delim(file.path(layer_dir, "cases.tsv"), stringsAsFactors = FALSE)
for (k in seq_len(nrow(layer_cases))) {
  row <- layer_cases[k, ]
  test_that(paste("matches real ncnn:", row$case), {
    for (r in run_case(row, 1, dir = layer_dir)) expect_close(r$got, r$ref, row$case)
  })
}

# GGMLR_NCNN_BENCH_DIR checks another set made by the same script instead,
# e.g. all 35 networks at ncnn's benchmark input sizes (without --small).
bench_dir <- Sys.getenv("GGMLR_NCNN_BENCH_DIR", test_path("fixtures", "ncnn-bench"))
bench <- utils::read.delim(file.path(bench_dir, "bench.tsv"), stringsAsFactors = FALSE)
names(bench)[1] <- "case"
for (k in seq_len(nrow(bench))) {
  row <- bench[k, ]
  test_that(paste("benchmark net matches real ncnn:", row$case, "with", row$weights, "weights"), {
    for (t in c(1, 2)) {
      for (r in run_case(row, t, dir = bench_dir)) expect_close(r$got, r$ref, sprintf("%s (%d threads)", row$case, t))
    }
  })
}
