# Checks a built pkgdown site: every help topic and every vignette has its
# page, no example on a reference page ended in an error, and every internal
# link (href or src that is not an absolute URL or a fragment) points at a
# file of the site.
check_site <- function(pkg = ".", site = "docs") {
  problems <- character()
  # help topics (internal ones get no page)
  for (rd in list.files(file.path(pkg, "man"), "\\.Rd$", full.names = TRUE)) {
    parsed <- tools::parse_Rd(rd)
    tags <- vapply(parsed, attr, "", "Rd_tag")
    kw <- unlist(lapply(parsed[tags == "\\keyword"], as.character))
    if ("internal" %in% kw) next
    page <- file.path(site, "reference", sub("\\.Rd$", ".html", basename(rd)))
    if (!file.exists(page)) problems <- c(problems, paste("no reference page for", basename(rd)))
  }
  for (v in list.files(file.path(pkg, "vignettes"), "\\.Rmd$")) {
    page <- file.path(site, "articles", sub("\\.Rmd$", ".html", v))
    if (!file.exists(page)) problems <- c(problems, paste("no article for", v))
  }
  pages <- list.files(site, "\\.html$", recursive = TRUE, full.names = TRUE)
  n_links <- 0L
  for (p in pages) {
    html <- paste(readLines(p, warn = FALSE), collapse = "\n")
    if (startsWith(sub(paste0("^", site, "/"), "", p), "reference/") && grepl("class=[\"']r-err", html)) {
      problems <- c(problems, paste("an example ends in an error on", p))
    }
    refs <- regmatches(html, gregexpr("(href|src)=(\"[^\"]*\"|'[^']*')", html))[[1L]]
    refs <- gsub("^(href|src)=.|.$", "", refs)
    refs <- refs[nzchar(refs) & !grepl("^([a-zA-Z][a-zA-Z0-9+.-]*:|//|#)", refs)]
    for (r in unique(refs)) {
      target <- sub("[?#].*$", "", r)
      if (!nzchar(target)) next
      target <- utils::URLdecode(target)
      path <- file.path(dirname(p), target)
      if (endsWith(target, "/")) path <- file.path(path, "index.html")
      n_links <- n_links + 1L
      if (!file.exists(path)) problems <- c(problems, sprintf("%s: broken link %s", p, r))
    }
  }
  cat(sprintf("site check: %d pages, %d internal links, %d problem(s)\n",
              length(pages), n_links, length(problems)))
  if (length(problems)) {
    writeLines(paste(" -", unique(problems)))
    stop("the site has problems", call. = FALSE)
  }
  invisible(TRUE)
}
