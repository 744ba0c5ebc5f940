# Runs the testthat suite against the installed package and ends with the
# line "N passed, N failed" (", N skipped" when any were skipped), counting
# expectations. Exits non-zero when anything failed or errored.
# Snapshot tests (expect_snapshot) run here; R CMD check runs them as CRAN
# does, which skips them.
if (!nzchar(Sys.getenv("NOT_CRAN"))) Sys.setenv(NOT_CRAN = "true")
suppressPackageStartupMessages({
  library(testthat)
  library(ggmlR)
})
# Arguments: directories to run (default tests/testthat); an argument of the
# form --filter=REGEX restricts the files run; --vulkan-backend=DIR runs DIR
# (again) with a Vulkan backend installed as the autograd device state's
# backend, so residency pools live on the device. Without a Vulkan device that
# run counts as one failure when GGMLR_REQUIRE_VULKAN is set, and is reported
# as not run otherwise.
args <- commandArgs(trailingOnly = TRUE)
filter <- NULL
if (any(f <- startsWith(args, "--filter="))) {
  filter <- sub("^--filter=", "", args[f][[1L]])
  args <- args[!f]
}
vk <- startsWith(args, "--vulkan-backend=")
vk_paths <- sub("^--vulkan-backend=", "", args[vk])
args <- args[!vk]
paths <- if (length(args) || length(vk_paths)) args else "tests/testthat"
run_dir <- function(path) {
  res <- testthat::test_dir(path,
    package = "ggmlR", load_package = "installed", filter = filter,
    reporter = testthat::ProgressReporter$new(show_praise = FALSE),
    stop_on_failure = FALSE, stop_on_warning = FALSE
  )
  as.data.frame(res)[, c("file", "test", "nb", "failed", "skipped", "error", "passed")]
}
one_failure <- function(path, why) {
  data.frame(file = path, test = why, nb = 1L, failed = 1L, skipped = FALSE,
             error = FALSE, passed = 0L)
}
run_on_vulkan <- function(path) {
  cat("== ", path, " (Vulkan backend installed for residency)\n", sep = "")
  if (!ggml_vulkan_available()) {
    why <- paste("no Vulkan device:", .rs_status())
    if (nzchar(Sys.getenv("GGMLR_REQUIRE_VULKAN"))) {
      cat("FAILED: GGMLR_REQUIRE_VULKAN is set but there is", why, "\n")
      return(one_failure(path, why))
    }
    cat("not run:", why, "\n")
    return(NULL)
  }
  state <- get(".ag_device_state", envir = asNamespace("ggmlR"))
  old <- state$backend
  state$backend <- ggml_vulkan_init(0L)
  on.exit(state$backend <- old)
  df <- run_dir(path)
  df$file <- paste0(df$file, " [vulkan]")
  df
}
.rs_status <- function() {
  tryCatch(utils::capture.output(ggml_vulkan_status())[1L], error = conditionMessage)
}
df <- do.call(rbind, c(
  lapply(paths, function(path) {
    cat("== ", path, "\n", sep = "")
    run_dir(path)
  }),
  lapply(vk_paths, run_on_vulkan)
))
failed <- sum(df$failed) + sum(df$error)
skipped <- sum(df$skipped)
passed <- sum(df$passed)
line <- sprintf("%d passed, %d failed", passed, failed)
if (skipped > 0) line <- sprintf("%s, %d skipped", line, skipped)
cat("\n", line, "\n", sep = "")
quit(status = if (failed > 0) 1L else 0L, save = "no")
