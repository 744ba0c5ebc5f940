# Files written and read by the package.

# Check that `path` names a file the user can write to; `arg` and `call` name
# the user's argument and function in the error.
.check_file_path <- function(path, arg = "path", call = sys.call(-1L)) {
  if (!is.character(path) || length(path) != 1L || is.na(path) || !nzchar(path)) {
    .abort(sprintf("`%s` must be the path of a file (a single string), not %s", arg,
                   .describe_value(path)), call = call)
  }
  if (!.is_text(path)) {
    .abort(sprintf("`%s` is not valid text; give the path as a character string", arg), call = call)
  }
  path <- path.expand(enc2utf8(path))
  if (dir.exists(path)) {
    .abort(sprintf("`%s` ('%s') is a folder; give the path of a file", arg, path), call = call)
  }
  path
}

# Write the raw vector `bytes` to `path` atomically: a temporary file in the
# same folder is written, flushed to disk and renamed over `path`, so `path`
# holds either its previous contents or all of the new ones. Any failure (a
# full disk, a device such as /dev/full, a missing folder) is a ggmlR_error
# and leaves the previous file intact. For every file the package writes.
.write_file_atomic <- function(path, bytes, call = sys.call(-1L)) {
  path <- .check_file_path(path, call = call)
  if (!is.raw(bytes)) .abort("internal: .write_file_atomic() needs a raw vector", call = call)
  .rs(rs_write_atomic(path, bytes), call = call)
  invisible(path)
}

# Whether each string is text: marked Latin-1 (converted when used), or in
# the native encoding and valid UTF-8. Invalid bytes (rawToChar() of binary
# data, a binary file read as text) and "bytes" strings are not. Checked
# before enc2utf8(), which would turn invalid bytes into "<ff>" escapes.
.is_text <- function(x) {
  enc <- Encoding(x)
  enc == "latin1" | (enc != "bytes" & validUTF8(x))
}

# A short description of an R value for messages: "NA", "a list", "a number".
.describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (length(x) == 1L && is.atomic(x) && is.na(x)) return("NA")
  if (is.function(x)) return("a function")
  if (length(x) != 1L && is.atomic(x)) return(sprintf("a %s vector of length %d", typeof(x), length(x)))
  sprintf("an object of type %s", typeof(x))
}

# Data files of the Keras-style API (models, weights, marshaled models): one
# container, the saved-model format of the engine (format tag, version,
# CRC-32, a tree of plain values; reading it runs no code), written
# atomically. `fn` names the user's function in errors.
.write_data_file <- function(value, path, fn, call = sys.call(-1L)) {
  path <- .check_file_path(path, call = call)
  .rs(rs_savefile_write(path, value), call = call)
  invisible(path)
}

.read_data_file <- function(path, fn, call = sys.call(-1L)) {
  if (!is.character(path) || length(path) != 1L || is.na(path) || !nzchar(path)) {
    .abort(sprintf("%s(): `path` must be the path of a file (a single string)", fn), call = call)
  }
  path <- path.expand(path)
  if (!file.exists(path)) .abort(sprintf("%s(): there is no file '%s'", fn, path), call = call)
  .rs(rs_savefile_read(path), call = call)
}

# The container bytes of `value`, and the value of container bytes (for
# marshaled models, which travel in memory).
.data_file_bytes <- function(value) .rs(rs_savefile_encode(value))

.read_data_bytes <- function(bytes, what, fn, call = sys.call(-1L)) {
  tryCatch(.rs(rs_savefile_decode(bytes), call = call), ggmlR_error = function(e) {
    .abort(sprintf("%s(): %s cannot be read: %s", fn, what, conditionMessage(e)), call = call)
  })
}

# The MD5 of a raw vector, as 32 hex characters.
.md5_raw <- function(bytes) {
  f <- tempfile()
  on.exit(unlink(f))
  writeBin(bytes, f)
  unname(tools::md5sum(f))
}
