# The documentation a user reaches from R: every export appears in the
# example of its own help page, and ?ggmlR is a real overview.

rd_db <- tools::Rd_db("ggmlR")
rd_field <- function(rd, tag) rd[vapply(rd, attr, "", "Rd_tag") == tag]
rd_text <- function(x) paste(unlist(x), collapse = "")

test_that("every export appears in the example of its own help page", {
  pages <- lapply(rd_db, function(rd) list(
    aliases = vapply(rd_field(rd, "\\alias"), rd_text, ""),
    examples = rd_text(rd_field(rd, "\\examples"))
  ))
  exports <- getNamespaceExports("ggmlR")
  exports <- sort(exports[!startsWith(exports, ".__")])   # S4 method tables
  missing <- character()
  for (e in exports) {
    own <- Filter(function(p) e %in% p$aliases, pages)
    pattern <- paste0("(^|[^A-Za-z0-9._])", gsub(".", "\\.", e, fixed = TRUE), "([^A-Za-z0-9._]|$)")
    if (!length(own) || !grepl(pattern, own[[1]]$examples)) missing <- c(missing, e)
  }
  expect_identical(missing, character(), info = paste(missing, collapse = ", "))
  expect_gt(length(exports), 150)
})

test_that("?ggmlR is an overview page, not an internal one", {
  rd <- rd_db[["ggmlR-package.Rd"]]
  expect_false(is.null(rd))
  keywords <- vapply(rd_field(rd, "\\keyword"), rd_text, "")
  expect_false("internal" %in% keywords)
  expect_match(rd_text(rd_field(rd, "\\examples")), "with_grad_tape")
  text <- rd_text(rd)
  vignettes <- c("ggmlR", "autograd", "memory", "vulkan", "ncnn")
  for (v in vignettes) expect_match(text, sprintf('vignette("%s")', v), fixed = TRUE)
  # an install from the source tarball carries the built vignettes
  built <- vignette(package = "ggmlR")$results
  if (nrow(built)) expect_true(all(vignettes %in% built[, "Item"]))
})

test_that("DESCRIPTION: a version above 0.7.9, real authors, URL and BugReports", {
  expect_true(packageVersion("ggmlR") > "0.7.9")
  expect_identical(packageVersion("ggmlR")$minor, 8L)
  d <- packageDescription("ggmlR")
  authors <- eval(parse(text = d[["Authors@R"]]))
  expect_true(any(vapply(authors, function(p) "cre" %in% p$role, logical(1L))))
  expect_false(any(grepl("example\\.(org|com)", format(authors, include = "email"))))
  expect_match(d$URL, "^https://")
  expect_match(d$BugReports, "^https://.*/issues$")
  expect_match(d$Description, "0.7.9")
  expect_true(all(c("knitr", "rmarkdown") %in% trimws(strsplit(d$Suggests, ",\\s*")[[1]])))
  expect_identical(d$VignetteBuilder, "knitr")
})
