# Hostile cases run in a child R process, so that a crash, an abort or a hang
# fails the cases concerned instead of ending the whole test run.
#
# hostile_run(cases, setup) evaluates each case (a quoted expression) in a
# child Rscript, one after another, each in its own environment in which
# `setup` ran first. The child logs the start and the outcome of every
# case to a file as it goes; when it dies or hangs, the case that started and
# did not finish is reported as "crashed" / "hung" and the remaining cases run
# in a new child. Returns a data frame: name, outcome ("value", "error",
# "interrupt", "crashed", "hung"), class (the condition's classes, "/"-joined,
# or the value's class), message.

hostile_rscript <- function() file.path(R.home("bin"), "Rscript")

hostile_child_script <- function(cases_file, setup_file, log_file) {
  sprintf('
suppressPackageStartupMessages(library(ggmlR))
cases <- readRDS(%s)
setup <- readRDS(%s)
log <- file(%s, open = "a")
put <- function(...) { cat(..., "\\n", sep = "", file = log); flush(log) }
clean <- function(s) gsub("[\\t\\n\\r]+", " ", paste(s, collapse = " "))
for (nm in names(cases)) {
  put("START\\t", nm)
  res <- withCallingHandlers(
    tryCatch({
      env <- new.env(parent = globalenv())
      if (!is.null(setup)) eval(setup, env)
      v <- eval(cases[[nm]], env)
      c("value", clean(class(v)), clean(if (is.atomic(v) && length(v) <= 8) as.character(v) else ""))
    },
    error = function(e) c("error", clean(class(e)), clean(conditionMessage(e))),
    interrupt = function(e) c("interrupt", clean(class(e)), "")),
    warning = function(w) invokeRestart("muffleWarning"),
    message = function(m) invokeRestart("muffleMessage"))
  put("DONE\\t", nm, "\\t", res[1], "\\t", res[2], "\\t", res[3])
}
put("END")
', deparse(cases_file), deparse(setup_file), deparse(log_file))
}

hostile_run <- function(cases, setup = NULL, timeout = 120, env = character()) {
  stopifnot(is.list(cases), !is.null(names(cases)), !anyDuplicated(names(cases)))
  # For reports: HOSTILE_COUNT_FILE collects the number of cases run.
  count_file <- Sys.getenv("HOSTILE_COUNT_FILE")
  if (nzchar(count_file)) cat(length(cases), "\n", file = count_file, append = TRUE)
  dir <- tempfile("hostile")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  out <- data.frame(name = names(cases), outcome = NA_character_, class = NA_character_,
                    message = NA_character_, stringsAsFactors = FALSE)
  todo <- names(cases)
  for (attempt in seq_len(length(cases) + 1L)) {
    if (!length(todo)) break
    cf <- file.path(dir, "cases.rds"); sf <- file.path(dir, "setup.rds")
    lf <- file.path(dir, sprintf("log%d.txt", attempt)); rf <- file.path(dir, "child.R")
    saveRDS(cases[todo], cf)
    saveRDS(setup, sf)
    writeLines(hostile_child_script(cf, sf, lf), rf)
    libs <- paste(.libPaths(), collapse = .Platform$path.sep)
    status <- suppressWarnings(system2(hostile_rscript(), c("--vanilla", shQuote(rf)),
      stdout = file.path(dir, "out.txt"), stderr = file.path(dir, "err.txt"),
      env = c(paste0("R_LIBS=", libs), env), timeout = timeout))
    lines <- if (file.exists(lf)) readLines(lf, warn = FALSE, encoding = "bytes") else character()
    started <- NULL
    for (ln in lines) {
      f <- strsplit(ln, "\t", fixed = TRUE, useBytes = TRUE)[[1L]]
      if (f[1L] == "START") started <- f[2L]
      if (f[1L] == "DONE") {
        i <- match(f[2L], out$name)
        out$outcome[i] <- f[3L]
        out$class[i] <- if (length(f) >= 4L) f[4L] else ""
        out$message[i] <- if (length(f) >= 5L) f[5L] else ""
        started <- NULL
      }
    }
    todo <- out$name[is.na(out$outcome)]
    if ("END" %in% lines || !length(todo)) break
    # The child died or hung inside `started` (or before the first case).
    culprit <- if (is.null(started)) todo[1L] else started
    err <- tail(readLines(file.path(dir, "err.txt"), warn = FALSE), 3L)
    i <- match(culprit, out$name)
    out$outcome[i] <- if (identical(status, 124L)) "hung" else "crashed"
    out$class[i] <- paste("exit status", status)
    out$message[i] <- paste(err, collapse = " | ")
    todo <- setdiff(todo, culprit)
  }
  out
}

# Expect every case of `res` to have ended as `outcome` with a condition of
# `class` whose message matches `pattern` and contains no internal failure.
expect_hostile <- function(res, outcome = "error", class = "ggmlR_error", pattern = NULL) {
  for (i in seq_len(nrow(res))) {
    r <- res[i, ]
    label <- sprintf("case '%s' (%s: %s)", r$name, r$outcome, r$message)
    expect_identical(r$outcome, outcome, label = label)
    if (!is.null(class)) expect_true(class %in% strsplit(r$class, " ")[[1L]], label = paste(label, r$class))
    expect_false(grepl("internal error|panicked|unwrap|index out of bounds|RUST_BACKTRACE", r$message),
                 label = label)
    if (!is.null(pattern)) expect_match(r$message, pattern, label = label)
  }
}

# Run `cases` (a named list of quoted expressions) and expect each to fail
# with a ggmlR_error whose message matches the case's own pattern: the
# cases are list(code = quote(...), pattern = "regex").
expect_hostile_errors <- function(cases, setup = NULL, class = "ggmlR_error", timeout = 120) {
  res <- hostile_run(lapply(cases, `[[`, "code"), setup = setup, timeout = timeout)
  for (nm in names(cases)) {
    expect_hostile(res[res$name == nm, ], class = class, pattern = cases[[nm]]$pattern)
  }
  invisible(res)
}

# One hostile case: the code (unevaluated) and the pattern its error matches.
hcase <- function(code, pattern = NULL) list(code = substitute(code), pattern = pattern)
