# Every help page's example runs without an error, as R CMD check runs it
# (\dontrun{} skipped, \donttest{} run), each page in a fresh environment of a
# child R process so that an example that breaks the session fails this test
# instead of the run.
test_that("every help page's example runs without an error", {
  script <- tempfile(fileext = ".R")
  out <- tempfile(fileext = ".txt")
  on.exit(unlink(c(script, out)))
  writeLines(c(
    "suppressPackageStartupMessages(library(ggmlR))",
    "db <- tools::Rd_db('ggmlR')",
    sprintf("out <- %s", deparse(out)),
    "res <- character()",
    "for (n in names(db)) {",
    "  f <- tempfile(fileext = '.R')",
    "  tools::Rd2ex(db[[n]], f, commentDontrun = TRUE, commentDonttest = FALSE)",
    "  if (!file.exists(f)) next",
    "  env <- new.env(parent = globalenv())",
    "  msg <- tryCatch({ utils::capture.output(suppressWarnings(suppressMessages(",
    "    sys.source(f, envir = env)))); 'ok' }, error = function(e) conditionMessage(e))",
    "  res <- c(res, paste0(n, '\\t', gsub('[\\t\\n]', ' ', msg)))",
    "  writeLines(res, out)",
    "}"
  ), script)
  status <- withr_env_system(script, FALSE, FALSE)
  expect_equal(status, 0L)
  res <- readLines(out)
  pages <- sub("\t.*$", "", res)
  outcome <- sub("^[^\t]*\t", "", res)
  # every page of the installed help was run
  expect_setequal(pages, names(tools::Rd_db("ggmlR")))
  failed <- res[outcome != "ok"]
  expect(length(failed) == 0L,
         paste0("examples that failed:\n", paste(failed, collapse = "\n")))
})
