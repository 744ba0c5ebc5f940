# Copies a small subset of the ONNX node test cases (written by
# tools/onnx-node-tests.py, results from tools/onnx-node-run.R) into
# tests/testthat/fixtures/onnx-node: per operator, the smallest passing cases
# (at most 2, each under 16 KiB), so the package's tests run them without
# Python.
#   Rscript tools/onnx-node-fixtures.R [DIR] [RESULTS.tsv]
args <- commandArgs(trailingOnly = TRUE)
dir <- if (length(args) >= 1) args[[1]] else "/tmp/onnx-node"
res <- utils::read.delim(if (length(args) >= 2) args[[2]] else "/tmp/node-cpu.tsv", stringsAsFactors = FALSE)
out <- file.path("tests", "testthat", "fixtures", "onnx-node")
unlink(out, recursive = TRUE)
dir.create(out, recursive = TRUE)
size <- function(d) sum(file.info(list.files(file.path(dir, d), recursive = TRUE, full.names = TRUE))$size)
ok <- res[res$status == "pass", ]
ok$bytes <- vapply(ok$case, size, 1)
ok <- ok[ok$bytes < 16384, ]
keep <- unlist(lapply(split(ok, ok$op), function(x) head(x$case[order(x$bytes)], 2)))
# R CMD build leaves out folders whose names end in "old": such a case's
# folder gets a trailing "_" (tests/testthat/helper-onnx.R's onnx_case_dir()).
case_dir <- function(case) ifelse(grepl("[Oo]ld$", case), paste0(case, "_"), case)
for (k in keep) {
  file.copy(file.path(dir, k), out, recursive = TRUE)
  if (case_dir(k) != k) file.rename(file.path(out, k), file.path(out, case_dir(k)))
}
# The tensors are stored compressed: uncompressed, some of them look like
# executables to file(1), which R CMD check reports.
for (f in list.files(out, pattern = "\\.pb$", recursive = TRUE, full.names = TRUE)) {
  con <- gzfile(paste0(f, ".gz"), "wb", compression = 9)
  writeBin(readBin(f, "raw", file.size(f)), con)
  close(con)
  unlink(f)
}
idx <- ok[ok$case %in% keep, c("case", "op")]
index <- utils::read.delim(file.path(dir, "index.tsv"), stringsAsFactors = FALSE)
idx <- merge(idx, index[, c("case", "rtol", "atol")], by = "case")
utils::write.table(idx, file.path(out, "index.tsv"), sep = "\t", quote = FALSE, row.names = FALSE)
cat(sprintf("copied %d cases of %d operators (%.0f KiB)\n", length(keep), length(unique(idx$op)),
            sum(ok$bytes[ok$case %in% keep]) / 1024))
