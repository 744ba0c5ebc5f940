# Builds the pkgdown site of the installed package into docs/ and checks it
# (tools/check-site.R). Run by `make site` after `make install`.
build_site <- function(dest = "docs") {
  unlink(dest, recursive = TRUE)
  # No look-ups on CRAN or the web: the site builds from the package alone.
  options(pkgdown.internet = FALSE)
  # The home page is README.md with its links to the vignettes' sources
  # pointing at their articles instead (pkgdown/index.md, for the build only).
  dir.create("pkgdown", showWarnings = FALSE)
  on.exit(unlink("pkgdown", recursive = TRUE), add = TRUE)
  readme <- readLines("README.md")
  writeLines(gsub("\\]\\(vignettes/([A-Za-z0-9_-]+)\\.Rmd\\)", "](articles/\\1.html)", readme),
             file.path("pkgdown", "index.md"))
  pkgdown::build_site(".", override = list(destination = dest), install = FALSE,
                      new_process = FALSE, preview = FALSE, devel = FALSE)
}
args <- commandArgs(trailingOnly = TRUE)
dest <- if (length(args)) args[[1L]] else "docs"
build_site(dest)
source(file.path("tools", "check-site.R"))
check_site(".", dest)
