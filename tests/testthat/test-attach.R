# Attaching the package is silent and masks nothing: checked in a child R
# process, as a user's session sees it.

rscript <- function(code) {
  out <- tempfile()
  err <- tempfile()
  on.exit(unlink(c(out, err)))
  libs <- paste(.libPaths(), collapse = .Platform$path.sep)
  status <- system2(file.path(R.home("bin"), "Rscript"), c("--no-init-file", "-e", shQuote(code)),
                    stdout = out, stderr = err, env = paste0("R_LIBS=", shQuote(libs)))
  list(status = status, stdout = readLines(out), stderr = readLines(err))
}

test_that("Rscript -e 'library(ggmlR)' writes nothing to stdout or stderr", {
  r <- rscript("library(ggmlR)")
  expect_identical(r$status, 0L)
  expect_identical(r$stderr, character())
  expect_identical(r$stdout, character())
})

test_that("library(ggmlR) masks nothing, and `%*%` on tensors goes through base's operator", {
  r <- rscript(paste(
    "library(ggmlR)",
    "cat(find('%*%'), sep = '\\n')",
    "cat(length(conflicts(detail = TRUE)$`package:ggmlR`), '\\n')",
    "x <- ag_tensor(diag(2)) %*% matrix(1:4, 2)",
    "cat(class(x), dim(x), '\\n')",
    "x",
    sep = "; "))
  expect_identical(r$status, 0L)
  expect_identical(r$stderr, character())
  expect_identical(r$stdout[1:3], c("package:base", "0 ", "ag_tensor 2 2 "))
  # auto-printing a tensor (an S4 object before R 4.4) shows print()'s format
  expect_identical(r$stdout[4], "<ag_tensor 2x2> cpu f64")
})

test_that("under R CMD check --as-cran the engine takes at most two threads by default", {
  code <- paste(
    "library(ggmlR)",
    "b <- ggml_backend_cpu_init()",
    "cat(Sys.getenv('RAYON_NUM_THREADS'), ggmlR:::rs_backend_n_threads(b), '\\n')",
    sep = "; ")
  run <- function(env) {
    out <- tempfile()
    on.exit(unlink(out))
    libs <- paste(.libPaths(), collapse = .Platform$path.sep)
    system2(file.path(R.home("bin"), "Rscript"), c("-e", shQuote(code)), stdout = out, stderr = FALSE,
            env = c(paste0("R_LIBS=", shQuote(libs)), env))
    strsplit(trimws(readLines(out)), " ")[[1]]
  }
  limited <- run(c("_R_CHECK_LIMIT_CORES_=TRUE", "RAYON_NUM_THREADS="))
  expect_identical(limited[1], "2")
  expect_lte(as.integer(limited[2]), 2L)
  # the user's own setting wins
  expect_identical(run(c("_R_CHECK_LIMIT_CORES_=TRUE", "RAYON_NUM_THREADS=1"))[1], "1")
  # outside a check nothing is set
  expect_identical(length(run(c("_R_CHECK_LIMIT_CORES_=", "RAYON_NUM_THREADS="))), 1L)
})
