# Runs the testthat suite against the installed package and ends with the
# line "N passed, N failed" (", N skipped" when any were skipped), counting
# expectations. Exits non-zero when anything failed or errored.
suppressPackageStartupMessages({
  library(testthat)
  library(ggmlR)
})
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args)) args[[1L]] else "tests/testthat"
filter <- if (length(args) > 1L) args[[2L]] else NULL
res <- testthat::test_dir(path,
  package = "ggmlR", load_package = "installed", filter = filter,
  reporter = testthat::ProgressReporter$new(show_praise = FALSE),
  stop_on_failure = FALSE
)
df <- as.data.frame(res)
failed <- sum(df$failed) + sum(df$error)
skipped <- sum(df$skipped)
passed <- sum(df$passed)
line <- sprintf("%d passed, %d failed", passed, failed)
if (skipped > 0) line <- sprintf("%s, %d skipped", line, skipped)
cat("\n", line, "\n", sep = "")
quit(status = if (failed > 0) 1L else 0L, save = "no")
