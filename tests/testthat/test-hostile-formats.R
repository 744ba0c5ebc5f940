# Files that declare what they do not hold: GGUF headers with huge counts,
# sizes and offsets, tensors whose type's block does not divide their rows;
# ONNX models whose tensors declare huge, negative or too many sizes, or
# more data than they carry, or that are cut short; ncnn int8 layers whose
# scales are missing or do not match. Each file is written here byte by byte
# (from a valid one, checked to load first), and each case runs in a child
# process (helper-hostile.R): a ggmlR_error from the user's function, never
# a crash, a panic or an abort.

formats_setup <- quote({
  # Little-endian bytes of a whole number 0 <= v < 2^53 (or a power of 2).
  le <- function(v, n) {
    out <- raw(n)
    for (i in seq_len(n)) {
      out[i] <- as.raw(v %% 256)
      v <- v %/% 256
    }
    out
  }
  patch <- function(b, at, bytes) {
    b[at + seq_along(bytes) - 1L] <- bytes
    b
  }
  # A valid GGUF file: an f32 [4, 3] tensor and a q8_0 [32, 2] one.
  gguf_bytes <- function() {
    f <- tempfile(fileext = ".gguf")
    gguf_write(f, metadata = list(general.architecture = "hostile"),
               tensors = list(hostile_w = matrix(1:12 / 4, 4, 3), hostile_q = matrix(seq_len(64) / 8, 32, 2)),
               tensor_types = c(hostile_q = GGML_TYPE_Q8_0))
    readBin(f, "raw", file.size(f))
  }
  # The (1-based) position of the n_dims field of a tensor's info, just
  # after its name; then ne (u64 each), the type (u32) and the offset (u64).
  info_at <- function(b, name) grepRaw(name, b, fixed = TRUE) + nchar(name)
  # Load a GGUF file, read every tensor's data and make every tensor.
  gguf_use <- function(b) {
    f <- tempfile(fileext = ".gguf")
    writeBin(b, f)
    g <- gguf_load(f)
    on.exit(gguf_free(g))
    ctx <- ggml_init(1024 * 1024)
    on.exit(ggml_free(ctx), add = TRUE)
    for (nm in gguf_tensor_names(g)) {
      invisible(gguf_tensor_data(g, nm))
      invisible(gguf_tensor(g, nm, ctx))
    }
    sort(gguf_tensor_names(g))
  }

  # Protocol buffers, enough of them for an ONNX model.
  f4 <- writeBin(c(1, 2, 3, 4), raw(), size = 4)
  varint <- function(v) {
    if (v < 0) return(c(rep(as.raw(0xff), 9), as.raw(0x01)))  # -1 as an int64
    out <- raw()
    repeat {
      low <- v %% 128
      v <- v %/% 128
      out <- c(out, as.raw(low + if (v > 0) 128 else 0))
      if (v == 0) break
    }
    out
  }
  key <- function(field, wire) varint(field * 8 + wire)
  ld <- function(field, bytes) c(key(field, 2), varint(length(bytes)), bytes)
  vint <- function(field, v) c(key(field, 0), varint(v))
  str <- function(field, s) ld(field, charToRaw(s))
  # TensorProto: dims (1), data_type (2, 1 = float), name (8), raw_data (9).
  tensor <- function(name, dims, data, dtype = 1) {
    c(unlist(lapply(dims, function(d) vint(1, d))), vint(2, dtype), str(8, name), ld(9, data))
  }
  # ValueInfoProto of a float tensor: name (1), type (2) > tensor_type (1) >
  # elem_type (1), shape (2) > dim (1) > dim_value (1).
  value_info <- function(name, dims) {
    shape <- unlist(lapply(dims, function(d) ld(1, vint(1, d))))
    c(str(1, name), ld(2, ld(1, c(vint(1, 1), ld(2, shape)))))
  }
  # y = x + w for a [2, 2] input x and an initializer w.
  onnx_bytes <- function(w = tensor("w", c(2, 2), writeBin(c(1, 2, 3, 4), raw(), size = 4)), x_dims = c(2, 2),
                         graph_len = NULL) {
    node <- c(str(1, "x"), str(1, "w"), str(2, "y"), str(4, "Add"))
    graph <- c(ld(1, node), str(2, "g"), ld(5, w), ld(11, value_info("x", x_dims)), ld(12, value_info("y", c(2, 2))))
    g <- if (is.null(graph_len)) ld(7, graph) else c(key(7, 2), varint(graph_len), graph)
    c(vint(1, 8), ld(8, c(str(1, ""), vint(2, 17))), g)
  }
  onnx_use <- function(b) {
    f <- tempfile(fileext = ".onnx")
    writeBin(b, f)
    m <- onnx_load(f, n_threads = 1)
    as.vector(onnx_run(m, list(x = matrix(c(10, 20, 30, 40), 2, 2)))[[1]])
  }

  # One ncnn layer after an input blob, on a 3x3x2 input.
  ncnn_one <- function(layer, reader = ncnn_datareader_empty()) {
    net <- ncnn_net(num_threads = 1)
    net$load_param_mem(paste0("7767517\n2 2\nInput data 0 1 data\n", layer, "\n"))
    net$load_model(reader)
    ex <- net$create_extractor()
    ex$input("data", array(stats::runif(18), c(3, 3, 2)))
    ex$extract("out")
  }
})

test_that("the crafted files are valid before they are mangled", {
  res <- hostile_run(list(
    gguf = quote(gguf_use(gguf_bytes())),
    onnx = quote(onnx_use(onnx_bytes()))
  ), setup = formats_setup)
  expect_identical(res$outcome, c("value", "value"), info = paste(res$message, collapse = "; "))
  expect_identical(res$message[1], "hostile_q hostile_w")
  # x + w, w = 1:4 read from raw little-endian floats
  expect_identical(res$message[2], "11 22 33 44")
})

test_that("GGUF headers with huge counts, sizes, offsets and wrong blocks are refused", {
  w <- function(code) substitute({
    b <- gguf_bytes()
    at <- info_at(b, "hostile_w")
    q <- info_at(b, "hostile_q")
    gguf_use(code)
  }, list(code = substitute(code)))
  cases <- list(
    n_tensors = list(code = w(patch(b, 9, le(2^52, 8))), pattern = "number of tensors is 4503599627370496"),
    n_kv = list(code = w(patch(b, 17, le(2^52, 8))), pattern = "number of metadata pairs"),
    key_length = list(code = w(patch(b, 25, le(2^50, 8))), pattern = "length of metadata key"),
    n_dims = list(code = w(patch(b, at, le(100, 4))), pattern = "has 100 dimensions"),
    dims_overflow = list(code = w(patch(b, at + 4, c(le(2^40, 8), le(2^40, 8)))), pattern = "too large to address"),
    offset_past_end = list(code = w(patch(b, at + 4 + 16 + 4, le(2^40, 8))), pattern = "past the end of the file"),
    offset_misaligned = list(code = w(patch(b, q + 4 + 16 + 4, le(1, 8))), pattern = "alignment"),
    offset_wraps = list(code = w(patch(b, at + 4 + 16 + 4, c(as.raw(0xe0), rep(as.raw(0xff), 7)))), pattern = "past the end of the file"),
    type_unknown = list(code = w(patch(b, at + 4 + 16, le(999, 4))), pattern = "type code 999"),
    # hostile_w rows of 4 values as q8_0 (blocks of 32), hostile_q's as q4_K (256)
    block_f32_as_q8 = list(code = w(patch(b, at + 4 + 16, le(8, 4))), pattern = "not a whole number of its blocks"),
    block_q8_as_q4k = list(code = w(patch(b, q + 4 + 16, le(12, 4))), pattern = "not a whole number of its blocks"),
    q8_row_33 = list(code = w(patch(b, q + 4, le(33, 8))), pattern = "not a whole number of its blocks"),
    # past the 32-byte alignment padding, into hostile_q's 68 bytes of blocks
    truncated_data = list(code = w(b[seq_len(length(b) - 50)]), pattern = "truncated")
  )
  expect_hostile_errors(cases, setup = formats_setup)
})

test_that("ONNX tensors declaring huge, negative or too many sizes, or missing data, are refused", {
  o <- function(code) substitute(onnx_use(code), list(code = substitute(code)))
  cases <- list(
    dims_huge = list(code = o(onnx_bytes(w = tensor("w", c(1e12, 1e12), f4))), pattern = "too large"),
    dims_overflow = list(code = o(onnx_bytes(w = tensor("w", c(2^62, 2^62), f4))), pattern = "too large"),
    dims_negative = list(code = o(onnx_bytes(w = tensor("w", c(-1, 4), f4))), pattern = "negative"),
    dims_rank_100 = list(code = o(onnx_bytes(w = tensor("w", rep(2, 100), f4))), pattern = "too large"),
    data_short = list(code = o(onnx_bytes(w = tensor("w", c(2, 2), writeBin(c(1, 2), raw(), size = 4)))), pattern = "needs 16"),
    data_type_unknown = list(code = o(onnx_bytes(w = tensor("w", c(2, 2), f4, dtype = 999))), pattern = "element type"),
    input_dims_huge = list(code = o(onnx_bytes(x_dims = c(2^40, 2^40))), pattern = "too large"),
    graph_length_past_end = list(code = o(onnx_bytes(graph_len = 2^40)), pattern = "malformed or truncated"),
    truncated = list(code = o({
      b <- onnx_bytes()
      b[seq_len(length(b) - 7)]
    }), pattern = "malformed or truncated")
  )
  expect_hostile_errors(cases, setup = formats_setup)
})

test_that("ncnn int8 layers with missing or mismatched scales never crash", {
  # An int8 layer over the empty reader (every weight and scale 0), or with
  # weight sizes that do not match its input: an output or a ggmlR_error,
  # never a crash or an internal error.
  res <- hostile_run(list(
    conv_int8 = quote(ncnn_one("Convolution c 1 1 data out 0=2 1=3 4=1 5=1 6=36 8=1")),
    conv_int8_requant = quote(ncnn_one("Convolution c 1 1 data out 0=2 1=3 4=1 5=1 6=36 8=101")),
    conv_int8_wrong_size = quote(ncnn_one("Convolution c 1 1 data out 0=2 1=3 4=1 5=1 6=35 8=1")),
    dw_int8 = quote(ncnn_one("ConvolutionDepthWise c 1 1 data out 0=2 1=3 4=1 5=1 6=18 7=2 8=1")),
    dw_int8_groups = quote(ncnn_one("ConvolutionDepthWise c 1 1 data out 0=2 1=3 4=1 5=1 6=18 7=3 8=1")),
    fc_int8 = quote(ncnn_one("InnerProduct f 1 1 data out 0=4 1=1 2=72 8=1")),
    fc_int8_wrong_size = quote(ncnn_one("InnerProduct f 1 1 data out 0=4 1=1 2=7 8=1")),
    fc_int8_huge = quote(ncnn_one("InnerProduct f 1 1 data out 0=4 1=1 2=2000000000 8=1"))
  ), setup = formats_setup)
  for (i in seq_len(nrow(res))) {
    r <- res[i, ]
    label <- sprintf("case '%s' (%s: %s)", r$name, r$outcome, r$message)
    expect_true(r$outcome %in% c("value", "error"), label = label)
    if (r$outcome == "error") expect_match(r$class, "ggmlR_error", label = label)
    expect_false(grepl("internal error|panicked|index out of bounds|unwrap", r$message), label = label)
  }
  # the mismatched sizes are errors
  expect_identical(res$outcome[res$name %in% c("conv_int8_wrong_size", "fc_int8_wrong_size", "fc_int8_huge")],
                   rep("error", 3), info = paste(res$name, res$message, collapse = "; "))
})

test_that("quantized tensors whose rows are not whole blocks are refused", {
  q <- quote({
    ctx <- ggml_init(1024 * 1024)
    t <- ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 2)
  })
  with_q <- function(code) substitute({ q; code }, list(q = q, code = substitute(code)))
  blocks <- "not a whole number of blocks"
  expect_hostile_errors(list(
    new_q4_0 = hcase({ ctx <- ggml_init(1024 * 1024); ggml_new_tensor_1d(ctx, GGML_TYPE_Q4_0, 33) }, "blocks of 32.*33 values"),
    new_q4_k = hcase({ ctx <- ggml_init(1024 * 1024); ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 32, 2) }, "blocks of 256"),
    quantize_row = hcase(ggml_quantize_chunk(GGML_TYPE_Q4_0, runif(66), 2, 33), "a row of 33 values"),
    quantize_short = hcase(ggml_quantize_chunk(GGML_TYPE_Q4_0, runif(10), 2, 32), "10 values were given"),
    quantize_rows_huge = hcase(ggml_quantize_chunk(GGML_TYPE_Q8_0, runif(64), 2^40, 32), "values were given for 1099511627776 rows"),
    view_part_block = list(code = with_q(ggml_view_1d(ctx, t, 16, 0)), pattern = blocks),
    view_offset = list(code = with_q(ggml_view_2d(ctx, t, 32, 2, 34, 1)), pattern = "not a multiple of the q8_0 element size"),
    reshape_part_block = list(code = with_q(ggml_reshape_2d(ctx, t, 16, 8)), pattern = blocks),
    transpose = list(code = with_q(ggml_transpose(ctx, t)), pattern = blocks),
    cpy_into_part_block = list(code = with_q({
      f <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 33, 2)
      ggml_cpy(ctx, f, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 66, 1))
    }), pattern = blocks),
    get_rows_past_end = list(code = with_q({
      i <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1)
      ggml_set_i32(i, 5L)
      y <- ggml_get_rows(ctx, t, i)
      ggml_graph_compute_with_ctx(ctx, ggml_build_forward_expand(ctx, y), 1)
    }), pattern = "row index 5 is out of range")
  ))
})
