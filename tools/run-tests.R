# Runs the testthat suite against the installed package and ends with the
# line "N passed, N failed" (", N skipped" when any were skipped), counting
# expectations. Exits non-zero when anything failed or errored.
suppressPackageStartupMessages({
  library(testthat)
  library(ggmlR)
})
# Arguments: directories to run (default tests/testthat); an argument of the
# form --filter=REGEX restricts the files run.
args <- commandArgs(trailingOnly = TRUE)
filter <- NULL
if (any(f <- startsWith(args, "--filter="))) {
  filter <- sub("^--filter=", "", args[f][[1L]])
  args <- args[!f]
}
paths <- if (length(args)) args else "tests/testthat"
df <- do.call(rbind, lapply(paths, function(path) {
  cat("== ", path, "\n", sep = "")
  res <- testthat::test_dir(path,
    package = "ggmlR", load_package = "installed", filter = filter,
    reporter = testthat::ProgressReporter$new(show_praise = FALSE),
    stop_on_failure = FALSE, stop_on_warning = FALSE
  )
  as.data.frame(res)[, c("file", "test", "nb", "failed", "skipped", "error", "passed")]
}))
failed <- sum(df$failed) + sum(df$error)
skipped <- sum(df$skipped)
passed <- sum(df$passed)
line <- sprintf("%d passed, %d failed", passed, failed)
if (skipped > 0) line <- sprintf("%s, %d skipped", line, skipped)
cat("\n", line, "\n", sep = "")
quit(status = if (failed > 0) 1L else 0L, save = "no")
