# GGUF weight files (llama.cpp's format): reading, engine tensors over the
# mapped file, and writing.

.gguf_check <- function(x, call = sys.call(-1L)) {
  if (!inherits(x, "gguf")) {
    .abort(sprintf("Expected a gguf object (from gguf_load()), not %s.", class(x)[1L]), call = call)
  }
}

#' Read a GGUF file
#'
#' `gguf_load()` opens a GGUF file (versions 2 and 3, little-endian) and reads
#' its header: every metadata value (all GGUF value types, nested arrays
#' included), the alignment and the description of every tensor. The file
#' is memory-mapped, so tensor data is read only when asked for. A damaged
#' or truncated file gives an error that says what is wrong and at which byte.
#'
#' @param path Path to a `.gguf` file.
#' @param meta_only `TRUE` to use only the metadata and tensor descriptions:
#'   tensor data is then not available (and `gguf_tensor_info()` reports no
#'   shape, as in ggmlR).
#' @param x A `gguf` object.
#' @param ... Unused.
#' @return `gguf_load()`: an object of class `gguf`, a list with `path`,
#'   `version`, `n_tensors`, `n_kv`, `alignment`, `meta_only` and the file
#'   handle `ptr`. `print()`: `x`, invisibly.
#' @family gguf
#' @export
#' @examples
#' path <- tempfile(fileext = ".gguf")
#' gguf_write(path, list(general.name = "demo", demo.size = 4L),
#'   tensors = list(w = matrix(1:6, 2, 3)))
#' g <- gguf_load(path)
#' g
#' gguf_metadata(g)$general.name
#' gguf_tensor_data(g, "w")
#' gguf_free(g)
gguf_load <- function(path, meta_only = FALSE) {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    .abort("`path` must be the path of a GGUF file.")
  }
  if (!isTRUE(meta_only) && !isFALSE(meta_only)) .abort("`meta_only` must be TRUE or FALSE.")
  if (!file.exists(path)) .abort(sprintf("there is no file '%s'.", path))
  if (dir.exists(path)) .abort(sprintf("'%s' is a folder; `path` must be the path of a GGUF file.", path))
  path <- normalizePath(path, mustWork = TRUE)
  ptr <- .rs(rs_gguf_open(path))
  info <- .rs(rs_gguf_info(ptr))
  structure(list(
    ptr = ptr, path = path, version = info$version, n_tensors = info$n_tensors,
    n_kv = info$n_kv, alignment = info$alignment, meta_only = meta_only
  ), class = "gguf")
}

#' @rdname gguf_load
#' @export
print.gguf <- function(x, ...) {
  info <- .rs(rs_gguf_info(x$ptr))
  cat(sprintf("GGUF file: %s%s\n", basename(x$path), if (isTRUE(info$freed)) " (freed)" else ""))
  cat(sprintf("  Version:   %d\n", x$version))
  cat(sprintf("  Tensors:   %d\n", x$n_tensors))
  cat(sprintf("  Metadata:  %d key-value pairs\n", x$n_kv))
  cat(sprintf("  Alignment: %d bytes\n", x$alignment))
  if (isTRUE(x$meta_only)) cat("  meta_only: tensor data not loaded\n")
  invisible(x)
}

#' GGUF metadata
#'
#' @param x A `gguf` object from [gguf_load()].
#' @return `gguf_metadata()`: a named list of every metadata value, in file
#'   order: strings as character, booleans as logical, integers of 32 bits
#'   or fewer (signed) as integer, other numbers (uint32, int64, uint64,
#'   float32, float64) as double, arrays as vectors and arrays of arrays as
#'   lists. `gguf_metadata_types()`: a named character vector of the stored
#'   types (`"uint32"`, `"array[string]"`, ...), which [gguf_write()] takes to
#'   write the values back exactly.
#' @family gguf
#' @export
#' @examples
#' path <- tempfile(fileext = ".gguf")
#' gguf_write(path, list(n = 7L, tokens = c("a", "b")), types = c(n = "uint32"))
#' g <- gguf_load(path, meta_only = TRUE)
#' str(gguf_metadata(g))
#' gguf_metadata_types(g)
#' gguf_free(g)
gguf_metadata <- function(x) {
  .gguf_check(x)
  .rs(rs_gguf_metadata(x$ptr))
}

#' @rdname gguf_metadata
#' @export
gguf_metadata_types <- function(x) {
  .gguf_check(x)
  .rs(rs_gguf_metadata_types(x$ptr))
}

#' GGUF tensors
#'
#' `gguf_tensor_names()` lists the tensors, `gguf_tensor_info()` describes
#' one, `gguf_tensor_data()` reads its values (dequantized for quantized
#' types) into R, and `gguf_tensor()` makes it an engine tensor of a context
#' over the mapped file, without copying: a weight of any type, quantized
#' ones included, for `ggml_mul_mat()` or `ggml_get_rows()` on the CPU
#' backend. Such tensors are read-only; their memory (the file's data
#' section) is counted by the memory ledger as one user buffer and stays
#' mapped while any of them is alive, even after `gguf_free()`.
#'
#' @param x A `gguf` object from [gguf_load()].
#' @param name A tensor name.
#' @param ctx A `ggml_context` (its tensor capacity is used, not its memory).
#' @return `gguf_tensor_names()`: a character vector. `gguf_tensor_info()`:
#'   a list with `name`, `shape` (sizes, `ne0` first; `NA` with
#'   `meta_only = TRUE`), `type` ("f32", "q4_K", ...), `type_code`,
#'   `size_bytes` and `offset` (of the data in the file).
#'   `gguf_tensor_data()`: a numeric vector, or an array with `dim = shape`
#'   for two or more dimensions. `gguf_tensor()`: a `ggml_tensor`.
#' @family gguf
#' @export
#' @examples
#' path <- tempfile(fileext = ".gguf")
#' w <- matrix(rnorm(64 * 4), 64, 4)
#' gguf_write(path, tensors = list(w = w), types = NULL, tensor_types = c(w = GGML_TYPE_Q8_0))
#' g <- gguf_load(path)
#' gguf_tensor_names(g)
#' str(gguf_tensor_info(g, "w"))
#' max(abs(gguf_tensor_data(g, "w") - w))
#' ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
#' wt <- gguf_tensor(g, "w", ctx)
#' x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64)
#' y <- ggml_mul_mat(ctx, wt, x)
#' backend <- ggml_backend_cpu_init()
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
#' ggml_backend_tensor_set_data(x, rep(1, 64))
#' ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y))
#' ggml_backend_tensor_get_data(y)
#' colSums(w)
#' ggml_free(ctx)
#' gguf_free(g)
gguf_tensor_names <- function(x) {
  .gguf_check(x)
  .rs(rs_gguf_tensor_names(x$ptr))
}

#' @rdname gguf_tensor_names
#' @export
gguf_tensor_info <- function(x, name) {
  .gguf_check(x)
  info <- .rs(rs_gguf_tensor_info(x$ptr, name))
  if (isTRUE(x$meta_only)) info$shape <- NA
  info
}

#' @rdname gguf_tensor_names
#' @export
gguf_tensor_data <- function(x, name) {
  .gguf_check(x)
  if (isTRUE(x$meta_only)) {
    .abort(sprintf("'%s' was loaded with meta_only=TRUE, tensor data not available; load it with gguf_load(path, meta_only=FALSE).",
      basename(x$path)))
  }
  .rs(rs_gguf_tensor_data(x$ptr, name))
}

#' @rdname gguf_tensor_names
#' @export
gguf_tensor <- function(x, name, ctx) {
  .gguf_check(x)
  if (isTRUE(x$meta_only)) {
    .abort(sprintf("'%s' was loaded with meta_only=TRUE, tensor data not available; load it with gguf_load(path, meta_only=FALSE).",
      basename(x$path)))
  }
  .new_tensor(.rs(rs_gguf_tensor(x$ptr, name, ctx)))
}

#' Close a GGUF file
#'
#' Releases the file handle now (it is also released when `x` is garbage
#' collected). Freeing twice is harmless; using `x` afterwards is an error.
#' Engine tensors made by [gguf_tensor()] keep the mapping alive.
#'
#' @param x A `gguf` object.
#' @return `NULL`, invisibly.
#' @family gguf
#' @export
#' @examples
#' path <- tempfile(fileext = ".gguf")
#' gguf_write(path, list(a = 1))
#' g <- gguf_load(path)
#' gguf_free(g)
#' gguf_free(g)
gguf_free <- function(x) {
  .gguf_check(x)
  invisible(.rs(rs_gguf_free(x$ptr)))
}

.gguf_default_type <- function(v, key, call, element = FALSE) {
  base <- if (is.logical(v)) "bool" else if (is.integer(v)) "int32" else if (is.numeric(v)) "float64"
    else if (is.character(v)) "string" else NULL
  if (is.list(v)) {
    inner <- unique(vapply(v, .gguf_default_type, "", key = key, call = call, element = TRUE))
    if (length(inner) != 1L) {
      .abort(sprintf("metadata '%s': the vectors of a list must have one type, not %s.", key, paste(inner, collapse = ", ")), call = call)
    }
    return(sprintf("array[%s]", inner))
  }
  if (is.null(base)) .abort(sprintf("metadata '%s' is %s; GGUF values are numbers, logicals, strings or lists of them.", key, class(v)[1L]), call = call)
  # The elements of a list are arrays, whatever their length.
  if (length(v) == 1L && !element) base else sprintf("array[%s]", base)
}

#' Write a GGUF file
#'
#' Writes metadata and tensors as a GGUF file (version 3, little-endian)
#' that llama.cpp and the `gguf` Python package read. Values keep the types
#' given in `types` (as [gguf_metadata_types()] reports them), else a
#' logical is a bool, an integer an int32, a double a float64 and a string a
#' string, with vectors of other lengths than 1 written as arrays and lists
#' of vectors as arrays of arrays. Tensors are R numbers (written as f32, or
#' as the type in `tensor_types`, quantizing when it is a quantized type) or
#' engine tensors (`ggml_tensor`, written with their type and bytes). The
#' file is written beside `path` and renamed when complete.
#'
#' @param path Where to write.
#' @param metadata A named list of values.
#' @param tensors A named list of numeric vectors / matrices / arrays (`dim`
#'   gives the sizes, `ne0` first) or `ggml_tensor`s.
#' @param types `NULL` or a named character vector of GGUF value types for
#'   some metadata keys: "uint8", "int8", "uint16", "int16", "uint32",
#'   "int32", "uint64", "int64", "float32", "float64", "bool", "string", or
#'   `"array[<type>]"` (nested: `"array[array[int32]]"`).
#' @param tensor_types `NULL` or a named vector of type codes for some R
#'   tensors (`GGML_TYPE_F16`, `GGML_TYPE_Q4_K`, ...).
#' @param alignment Tensor data alignment in bytes (a power of 2; other than
#'   32 it is stored as `general.alignment`).
#' @return `path`, invisibly.
#' @family gguf
#' @export
#' @examples
#' path <- tempfile(fileext = ".gguf")
#' gguf_write(path,
#'   metadata = list(general.architecture = "demo", demo.block_count = 2L,
#'     demo.eps = 1e-5, tokenizer.tokens = c("<s>", "a", "b")),
#'   tensors = list(emb = matrix(rnorm(32 * 3), 32, 3)),
#'   types = c(demo.block_count = "uint32", demo.eps = "float32"),
#'   tensor_types = c(emb = GGML_TYPE_Q8_0))
#' g <- gguf_load(path)
#' gguf_metadata_types(g)
#' gguf_tensor_info(g, "emb")$type
#' gguf_free(g)
gguf_write <- function(path, metadata = list(), tensors = list(), types = NULL,
                       tensor_types = NULL, alignment = 32L) {
  call <- sys.call()
  if (!is.character(path) || length(path) != 1L || is.na(path)) .abort("`path` must be a file path.")
  if (!is.list(metadata) || (length(metadata) && (is.null(names(metadata)) || any(names(metadata) == "")))) {
    .abort("`metadata` must be a named list.")
  }
  if (!is.list(tensors) || (length(tensors) && (is.null(names(tensors)) || any(names(tensors) == "")))) {
    .abort("`tensors` must be a named list.")
  }
  keys <- names(metadata)
  tys <- vapply(keys, function(k) {
    if (!is.null(types) && !is.na(types[k])) unname(types[k]) else .gguf_default_type(metadata[[k]], k, call)
  }, "")
  specs <- lapply(names(tensors), function(nm) {
    v <- tensors[[nm]]
    if (inherits(v, "ggml_tensor")) {
      i <- .rs(rs_tensor_info(v), call = call)
      return(list(name = nm, type = i$type_code, ne = i$ne[seq_len(i$n_dims)], data = .rs(rs_tensor_bytes(v), call = call)))
    }
    if (!is.numeric(v) && !is.logical(v)) {
      .abort(sprintf("tensor '%s' is %s; give numbers or a ggml_tensor.", nm, class(v)[1L]), call = call)
    }
    type <- if (!is.null(tensor_types) && !is.na(tensor_types[nm])) tensor_types[[nm]] else GGML_TYPE_F32
    ne <- if (is.null(dim(v))) length(v) else dim(v)
    list(name = nm, type = as.integer(type), ne = ne, data = as.numeric(v))
  })
  .rs(rs_gguf_write(path, metadata, unname(tys), specs, alignment))
  invisible(path)
}
