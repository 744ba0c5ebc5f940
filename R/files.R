# Files that are data, never code, written so that a failure leaves the
# previous file intact.
#
# Container: the 8 bytes "GGMLRDAT", a little-endian int32 format version,
# the payload length (float64), the MD5 of the payload (32 hex characters),
# then the payload. The payload is a tree of plain values in a small tagged
# encoding (NULL, logical, integer, double and character vectors, lists; the
# names and dim attributes): reading it builds values and evaluates nothing,
# unlike readRDS(), which can create promises and call package code.

.file_magic <- charToRaw("GGMLRDAT")
.file_version <- 1L
.file_max_depth <- 64L

# Writes `bytes` to `path` through a temporary file in the same folder,
# renamed over `path` only when it was written completely. `write(bytes,
# con)` does the writing (tests give one that fails).
.write_file_atomic <- function(path, bytes, fn, call = sys.call(-1L), write = writeBin) {
  if (!is.character(path) || length(path) != 1L || is.na(path) || !nzchar(path)) {
    .abort(sprintf("%s(): `path` must be a file name", fn), call = call)
  }
  path <- path.expand(path)
  dir <- dirname(path)
  if (!dir.exists(dir)) {
    .abort(sprintf("%s(): the folder '%s' does not exist", fn, dir), call = call)
  }
  if (dir.exists(path)) .abort(sprintf("%s(): '%s' is a folder", fn, path), call = call)
  tmp <- tempfile(pattern = paste0(".", basename(path), "."), tmpdir = dir)
  ok <- FALSE
  on.exit(if (!ok) unlink(tmp), add = TRUE)
  res <- tryCatch({
    con <- file(tmp, open = "wb")
    tryCatch(write(bytes, con), finally = close(con))
    isTRUE(file.size(tmp) == length(bytes))
  }, error = function(e) conditionMessage(e), warning = function(w) conditionMessage(w))
  if (!isTRUE(res)) {
    .abort(sprintf("%s(): could not write '%s'%s; the previous file (if any) is unchanged", fn, path,
                   if (is.character(res)) paste0(": ", res) else " (the disk may be full)"), call = call)
  }
  if (!isTRUE(suppressWarnings(file.rename(tmp, path)))) {
    .abort(sprintf("%s(): could not replace '%s'; the previous file (if any) is unchanged", fn, path),
           call = call)
  }
  ok <- TRUE
  invisible(path)
}

.md5_raw <- function(bytes) {
  f <- tempfile()
  on.exit(unlink(f))
  writeBin(bytes, f)
  unname(tools::md5sum(f))
}

# The bytes of a data file holding `value`.
.data_file_bytes <- function(value) {
  con <- rawConnection(raw(0), "wb")
  on.exit(close(con))
  .enc_value(con, value, 0L)
  payload <- rawConnectionValue(con)
  c(.file_magic, writeBin(.file_version, raw(), size = 4L, endian = "little"),
    writeBin(as.double(length(payload)), raw(), endian = "little"),
    charToRaw(.md5_raw(payload)), payload)
}

.write_data_file <- function(value, path, fn, call = sys.call(-1L)) {
  .write_file_atomic(path, .data_file_bytes(value), fn, call = call)
}

# The value held by data-file `bytes`; errors say what is wrong.
.read_data_bytes <- function(bytes, what, fn, call = sys.call(-1L)) {
  bad <- function(why) .abort(sprintf("%s(): %s is not a readable ggmlR file: %s", fn, what, why),
                              call = call)
  hdr <- 8L + 4L + 8L + 32L
  if (length(bytes) < hdr || !identical(bytes[1:8], .file_magic)) {
    bad("it does not start with the ggmlR data tag (is it a file saved by ggml_save_model() or ggml_save_weights()?)")
  }
  ver <- readBin(bytes[9:12], "integer", size = 4L, endian = "little")
  if (!identical(ver, .file_version)) bad(sprintf("container version %d, this ggmlR reads %d", ver, .file_version))
  len <- readBin(bytes[13:20], "double", endian = "little")
  if (!is.finite(len) || len != length(bytes) - hdr) bad("it is truncated or has extra bytes")
  payload <- bytes[-seq_len(hdr)]
  if (!identical(rawToChar(bytes[21:52]), .md5_raw(payload))) bad("its checksum does not match (the file is corrupted)")
  con <- rawConnection(payload, "rb")
  on.exit(close(con))
  st <- new.env(parent = emptyenv())
  st$left <- length(payload)
  v <- tryCatch(.dec_value(con, st, 0L), ggmlR_file_error = function(e) bad(conditionMessage(e)))
  if (st$left != 0) bad("it has bytes after its content")
  v
}

.read_data_file <- function(path, fn, call = sys.call(-1L)) {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    .abort(sprintf("%s(): `path` must be a file name", fn), call = call)
  }
  path <- path.expand(path)
  if (!file.exists(path) || dir.exists(path)) .abort(sprintf("%s(): no file '%s'", fn, path), call = call)
  bytes <- tryCatch(readBin(path, "raw", n = file.size(path)), error = function(e) {
    .abort(sprintf("%s(): cannot read '%s': %s", fn, path, conditionMessage(e)), call = call)
  })
  .read_data_bytes(bytes, sprintf("'%s'", path), fn, call = call)
}

.enc_int <- function(con, v) writeBin(as.integer(v), con, size = 4L, endian = "little")

.enc_value <- function(con, x, depth) {
  if (depth > .file_max_depth) .abort("a value to save is nested too deeply", call = NULL)
  tag <- if (is.null(x)) 0L else if (is.logical(x)) 1L else if (is.integer(x) && !is.factor(x)) 2L else
    if (is.double(x)) 3L else if (is.character(x)) 4L else if (is.list(x) && !is.object(x) || is.data.frame(x)) 5L else
      .abort(sprintf("a value of class %s cannot be saved as data", paste(class(x), collapse = "/")), call = NULL)
  writeBin(as.raw(tag), con)
  if (tag == 0L) return(invisible())
  nm <- names(x)
  d <- if (tag != 5L) dim(x)
  writeBin(as.raw((!is.null(nm)) + 2L * (!is.null(d))), con)
  .enc_int(con, length(x))
  switch(tag,
    .enc_int(con, x),
    .enc_int(con, x),
    writeBin(as.double(x), con, size = 8L, endian = "little"),
    for (s in x) {
      if (is.na(s)) .enc_int(con, -1L) else {
        b <- charToRaw(enc2utf8(s))
        .enc_int(con, length(b))
        writeBin(b, con)
      }
    },
    for (el in x) .enc_value(con, if (is.data.frame(el)) as.list(el) else el, depth + 1L))
  if (!is.null(nm)) .enc_value(con, as.character(nm), depth + 1L)
  if (!is.null(d)) .enc_value(con, as.integer(d), depth + 1L)
  invisible()
}

.dec_fail <- function(msg) stop(structure(class = c("ggmlR_file_error", "error", "condition"),
                                          list(message = msg, call = NULL)))

.dec_take <- function(con, st, what, n, size) {
  need <- n * size
  if (need > st$left) .dec_fail("a length runs past the end of the file")
  st$left <- st$left - need
  v <- readBin(con, what, n = n, size = size, endian = "little")
  if (length(v) != n) .dec_fail("the file ends early")
  v
}

.dec_value <- function(con, st, depth) {
  if (depth > .file_max_depth) .dec_fail("values are nested too deeply")
  tag <- as.integer(.dec_take(con, st, "raw", 1L, 1L))
  if (tag == 0L) return(NULL)
  if (tag > 5L) .dec_fail(sprintf("unknown value tag %d", tag))
  flags <- as.integer(.dec_take(con, st, "raw", 1L, 1L))
  n <- .dec_take(con, st, "integer", 1L, 4L)
  if (is.na(n) || n < 0L) .dec_fail("a negative length")
  x <- switch(tag,
    as.logical(.dec_take(con, st, "integer", n, 4L)),
    .dec_take(con, st, "integer", n, 4L),
    .dec_take(con, st, "double", n, 8L),
    {
      if (n > st$left / 4) .dec_fail("a length runs past the end of the file")
      vapply(seq_len(n), function(i) {
        k <- .dec_take(con, st, "integer", 1L, 4L)
        if (k == -1L) return(NA_character_)
        if (is.na(k) || k < 0L) .dec_fail("a negative string length")
        b <- .dec_take(con, st, "raw", k, 1L)
        if (any(b == as.raw(0L))) .dec_fail("a string holds a NUL byte")
        s <- rawToChar(b)
        Encoding(s) <- "UTF-8"
        if (!validUTF8(s)) .dec_fail("a string is not valid UTF-8")
        s
      }, character(1L))
    },
    {
      if (n > st$left) .dec_fail("a length runs past the end of the file")
      lapply(seq_len(n), function(i) .dec_value(con, st, depth + 1L))
    })
  if (bitwAnd(flags, 1L)) {
    nm <- .dec_value(con, st, depth + 1L)
    if (!is.character(nm) || length(nm) != n) .dec_fail("names of the wrong length")
    names(x) <- nm
  }
  if (bitwAnd(flags, 2L)) {
    d <- .dec_value(con, st, depth + 1L)
    if (!is.integer(d) || anyNA(d) || any(d < 0L) || prod(as.double(d)) != n) .dec_fail("a bad dim attribute")
    dim(x) <- d
  }
  x
}
