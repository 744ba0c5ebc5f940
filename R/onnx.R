# ONNX model import: load an .onnx file, inspect it, run it on the CPU or a
# Vulkan device. The engine side is src/rust/core/src/models/onnx/.

.onnx_check <- function(model, call = sys.call(-1L)) {
  if (!inherits(model, "onnx_model")) {
    .abort("`model` must be an onnx_model from onnx_load()", "onnx_error", call = call)
  }
}

#' Load an ONNX model
#'
#' Reads an `.onnx` file (weights inside it or in external data files beside
#' it), checks that every operator is supported (an error lists all the
#' unsupported ones), and prepares it for [onnx_run()] on the CPU or a Vulkan
#' device. Constant subgraphs (shape arithmetic, weight transforms) are folded
#' and shapes inferred here when every input shape is known; weights are
#' uploaded once into the model's persistent pool, so later runs transfer only
#' inputs and outputs.
#'
#' @param path Path to the `.onnx` file.
#' @param device `"cpu"`, `"vulkan"` (or `"gpu"`: the best Vulkan device), or
#'   `NULL`: a Vulkan GPU when there is one, else the CPU. A CPU-type Vulkan
#'   driver (lavapipe) is used only when asked for, as it is slower than the
#'   CPU backend.
#' @param input_shapes Optional named list of integer vectors fixing the shapes
#'   of inputs with dynamic dimensions, all dimensions included (batch too),
#'   e.g. `list(image = c(1L, 3L, 224L, 224L))`. Without it, dynamic dimensions
#'   are bound at the first [onnx_run()] from the input's `dim()` (or, for one
#'   dynamic dimension, from its length); each new set of shapes is planned
#'   once and kept.
#' @param n_threads CPU threads. `NULL` reads `getOption("ggmlR.n_threads")`,
#'   else uses one less than the number of cores (at least 1).
#' @param dtype Weight precision: `"f32"` (default) or `"f16"`, which stores
#'   large matrix and convolution weights (256 elements or more) in half
#'   precision (half the memory; products are still computed and returned in
#'   f32). `"fp16"` and `"float16"` mean `"f16"`.
#' @return An object of class `onnx_model`: a list with `ptr` (the engine
#'   model), `path`, `ir_version`, `opset`, `producer`, `graph_name`, `n_nodes`,
#'   `n_weights`, `ops` (operator types in order of first use) and `dtype`.
#' @seealso [onnx_run()], [onnx_inputs()], [onnx_summary()], [onnx_device_info()]
#' @export
#' @examples
#' path <- system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR")
#' m <- onnx_load(path, device = "cpu")
#' m
#' onnx_inputs(m)
#' out <- onnx_run(m, list(x = c(0.5, -1, 2, 0.25)))
#' out$y
onnx_load <- function(path, device = NULL, input_shapes = NULL, n_threads = NULL, dtype = "f32") {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    .abort("`path` must be the path of an .onnx file (a string)", "onnx_error")
  }
  if (!file.exists(path)) {
    .abort(sprintf("the file '%s' does not exist", path), "onnx_error")
  }
  path <- normalizePath(path, mustWork = TRUE)
  if (!is.null(device) && (!is.character(device) || length(device) != 1L || is.na(device))) {
    .abort("`device` must be NULL, \"cpu\", \"vulkan\" or \"gpu\"", "onnx_error")
  }
  if (!is.null(input_shapes)) {
    if (!is.list(input_shapes) || is.null(names(input_shapes)) || any(!nzchar(names(input_shapes)))) {
      .abort("`input_shapes` must be a named list of integer vectors, e.g. list(x = c(1L, 3L, 224L, 224L))", "onnx_error")
    }
    ok <- vapply(input_shapes, function(s) is.numeric(s) && !anyNA(s) && all(s >= 0 & s == round(s)), TRUE)
    if (!all(ok)) {
      .abort(sprintf("`input_shapes$%s` must hold whole numbers >= 0", names(input_shapes)[!ok][1L]), "onnx_error")
    }
    input_shapes <- lapply(input_shapes, as.integer)
  }
  if (is.null(n_threads)) n_threads <- getOption("ggmlR.n_threads")
  if (is.null(n_threads)) {
    nc <- suppressWarnings(parallel::detectCores(logical = FALSE))
    if (is.na(nc)) nc <- 1L
    n_threads <- max(nc - 1L, 1L)
  }
  if (!is.numeric(n_threads) || length(n_threads) != 1L || is.na(n_threads) ||
      n_threads < 1 || n_threads != round(n_threads)) {
    .abort("`n_threads` must be NULL or a whole number >= 1", "onnx_error")
  }
  if (!is.character(dtype) || length(dtype) != 1L || is.na(dtype) ||
      !dtype %in% c("f32", "f16", "fp16", "float16")) {
    .abort("`dtype` must be \"f32\" or \"f16\"", "onnx_error")
  }
  if (dtype %in% c("fp16", "float16")) dtype <- "f16"
  r <- .rs(rs_onnx_load(path, device, input_shapes, as.integer(n_threads), dtype))
  info <- r$info
  structure(
    list(
      ptr = r$ptr,
      path = path,
      ir_version = info$ir_version,
      opset = info$opset_version,
      producer = info$producer,
      graph_name = info$graph_name,
      n_nodes = info$n_nodes,
      n_weights = info$n_initializers,
      ops = info$ops,
      dtype = dtype
    ),
    class = "onnx_model"
  )
}

#' Print an ONNX model
#'
#' @param x An `onnx_model` from [onnx_load()].
#' @param ... Ignored.
#' @return `x`, invisibly.
#' @export
#' @examples
#' m <- onnx_load(system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR"), device = "cpu")
#' print(m)
print.onnx_model <- function(x, ...) {
  cat("ONNX Model:", x$graph_name, "\n")
  cat("  Producer:", x$producer, "\n")
  cat("  IR version:", x$ir_version, "/ Opset:", x$opset, "\n")
  cat("  Nodes:", x$n_nodes, "/ Weights:", x$n_weights, "\n")
  if (!is.null(x$dtype) && x$dtype != "f32") cat("  Weight dtype:", toupper(x$dtype), "\n")
  cat("  Ops:", paste(x$ops, collapse = ", "), "\n")
  invisible(x)
}

#' Summary of an ONNX model
#'
#' @param model An `onnx_model` from [onnx_load()].
#' @return A list with `ir_version`, `opset_version`, `producer`, `graph_name`,
#'   `n_nodes`, `n_initializers` and `ops`.
#' @export
#' @examples
#' m <- onnx_load(system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR"), device = "cpu")
#' onnx_summary(m)$ops
onnx_summary <- function(model) {
  .onnx_check(model)
  list(
    ir_version = model$ir_version,
    opset_version = model$opset,
    producer = model$producer,
    graph_name = model$graph_name,
    n_nodes = model$n_nodes,
    n_initializers = model$n_weights,
    ops = model$ops
  )
}

#' Inputs of an ONNX model
#'
#' The names and shapes of the inputs [onnx_run()] needs (initializers are
#' not inputs).
#'
#' @param model An `onnx_model` from [onnx_load()].
#' @return A named list of integer vectors: each input's dimensions in ONNX
#'   order, -1 for a dynamic dimension not yet bound.
#' @export
#' @examples
#' m <- onnx_load(system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR"), device = "cpu")
#' onnx_inputs(m)
onnx_inputs <- function(model) {
  .onnx_check(model)
  .rs(rs_onnx_inputs(model$ptr))
}

#' Run an ONNX model
#'
#' @param model An `onnx_model` from [onnx_load()].
#' @param inputs A named list with one numeric vector or array per model
#'   input (see [onnx_inputs()]). Each is taken as the flat buffer of the
#'   ONNX tensor in row-major order (the last dimension fastest), as
#'   `as.numeric()` gives it: for a matrix `x` in its usual R orientation pass
#'   `t(x)`, for an array `a` whose `dim()` is in ONNX order pass
#'   `aperm(a, rev(seq_along(dim(a))))`. An input's `dim()`, when it has one,
#'   binds the model's dynamic dimensions. Integer and boolean inputs must
#'   hold whole numbers in their type's range.
#' @return A named list with one element per model output: the values in
#'   row-major order, with `dim` set to the ONNX shape (in ONNX order) for
#'   outputs of 2 or more dimensions. Integer and boolean outputs are numbers.
#' @export
#' @examples
#' m <- onnx_load(system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR"), device = "cpu")
#' onnx_run(m, list(x = c(1, 2, 3, 4)))
onnx_run <- function(model, inputs) {
  .onnx_check(model)
  if (!is.list(inputs) || (length(inputs) > 0L && (is.null(names(inputs)) || any(!nzchar(names(inputs)))))) {
    .abort(
      sprintf("`inputs` must be a named list of arrays; the model's inputs are: %s",
              paste(names(onnx_inputs(model)), collapse = ", ")),
      "onnx_error"
    )
  }
  bad <- !vapply(inputs, function(x) is.numeric(x) || is.logical(x), TRUE)
  if (any(bad)) {
    .abort(sprintf("`inputs$%s` must be numeric (or logical), not %s", names(inputs)[bad][1L],
                   class(inputs[[which(bad)[1L]]])[1L]), "onnx_error")
  }
  dims <- lapply(inputs, function(x) if (is.null(dim(x))) NULL else as.integer(dim(x)))
  values <- lapply(inputs, function(x) as.numeric(x))
  .rs(rs_onnx_run(model$ptr, names(inputs), unname(values), unname(dims)))
}

#' Where an ONNX model runs
#'
#' @param model An `onnx_model` from [onnx_load()].
#' @return A list: `backends` (the backend's name, e.g. `"CPU"` or
#'   `"Vulkan0"`), `n_backends`, `n_splits` (engine graph computations per
#'   run: 1 unless operators that run on the host split the graph), `n_nodes`
#'   (nodes of the engine graph once planned, else of the ONNX graph),
#'   `gpu_ops` (operator types mapped onto a Vulkan device), `cpu_ops`
#'   (operator types that run on the host), `cpu_only_ops` (a named integer
#'   vector: operator type => host runs in the last run), `engine_ops`,
#'   `planned` and `pass_bytes` (bytes of the plan's pass pool).
#' @export
#' @examples
#' m <- onnx_load(system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR"), device = "cpu")
#' onnx_device_info(m)$n_splits
onnx_device_info <- function(model) {
  .onnx_check(model)
  .rs(rs_onnx_device_info(model$ptr))
}

# Reads a serialized ONNX TensorProto (.pb, as in ONNX test data), or one
# compressed with gzip (.pb.gz).
.onnx_read_tensor <- function(path) {
  path <- normalizePath(path, mustWork = TRUE)
  if (grepl("\\.gz$", path)) {
    bytes <- memDecompress(readBin(path, "raw", file.size(path)), "gzip")
    plain <- tempfile(fileext = ".pb")
    on.exit(unlink(plain))
    writeBin(bytes, plain)
    path <- plain
  }
  .rs(rs_onnx_read_tensor(path))
}

# The operators the importer implements (sorted).
.onnx_operators <- function() .rs(rs_onnx_operators())
