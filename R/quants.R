# Quantized block formats: ggml's quantize_*, quantize_row_*_ref and
# dequantize_row_* functions, made from one definition per family.

.quant_types <- c(
  q4_0 = 2L, q4_1 = 3L, q5_0 = 6L, q5_1 = 7L, q8_0 = 8L, q8_1 = 9L,
  q2_K = 10L, q3_K = 11L, q4_K = 12L, q5_K = 13L, q6_K = 14L, q8_K = 15L,
  iq2_xxs = 16L, iq2_xs = 17L, iq3_xxs = 18L, iq1_s = 19L, iq4_nl = 20L,
  iq3_s = 21L, iq2_s = 22L, iq4_xs = 23L, iq1_m = 29L,
  tq1_0 = 34L, tq2_0 = 35L, mxfp4 = 39L, nvfp4 = 40L, q1_0 = 41L
)

.quantizer <- function(type) {
  force(type)
  function(src_data, n_rows = 1L, n_per_row = length(src_data) / n_rows, imatrix = NULL) {
    .values_arg(src_data, "src_data")
    if (!is.null(imatrix) && !is.numeric(imatrix)) {
      .abort("`imatrix` must be NULL or a numeric vector with one importance per column.")
    }
    .rs(rs_quantize(type, as.numeric(src_data), n_rows, n_per_row, imatrix))
  }
}

.ref_quantizer <- function(type) {
  force(type)
  function(src_data, n_elements = length(src_data)) {
    .values_arg(src_data, "src_data")
    .rs(rs_quantize_ref(type, as.numeric(src_data), n_elements))
  }
}

.dequantizer <- function(type) {
  force(type)
  function(raw_data, n_elements = NULL) {
    if (!is.raw(raw_data)) {
      .abort(sprintf("`raw_data` must be a raw vector of quantized blocks, not %s.", class(raw_data)[1L]))
    }
    if (is.null(n_elements)) {
      info <- .rs(rs_quant_info(type))
      if (length(raw_data) %% info$type_size != 0L) {
        .abort(sprintf(paste0("`raw_data` has %d bytes, not a whole number of %s blocks (%d bytes each); ",
          "give the bytes of whole blocks, or `n_elements`."), length(raw_data), info$type_name, info$type_size))
      }
      n_elements <- length(raw_data) %/% info$type_size * info$block_size
    }
    .rs(rs_dequantize(type, raw_data, n_elements))
  }
}

#' Quantize data
#'
#' `quantize_<type>(src_data, n_rows, n_per_row, imatrix)` quantizes
#' `n_rows` rows of `n_per_row` values (ggml's `quantize_<type>`, as
#' `ggml_quantize_chunk()` does). An importance matrix (one weight per
#' column, e.g. mean squared activations) makes the K-quants, IQ types and
#' Q4_0/Q4_1/Q5_0/Q5_1 minimise the weighted error; IQ2_XXS, IQ2_XS and IQ1_S
#' cannot be made without one. The bytes are ggml's exact block layouts (read
#' by llama.cpp).
#'
#' @param src_data Numeric values (a matrix is taken column by column, so
#'   each column of length `n_per_row` is a row).
#' @param n_rows Number of rows.
#' @param n_per_row Values per row, a multiple of the type's block size
#'   (32 for the legacy types and IQ4_NL/MXFP4, 64 for NVFP4, 128 for Q1_0,
#'   256 for the others).
#' @param imatrix `NULL` or the importance of each column (`n_per_row` values).
#' @return A raw vector of `n_rows * ggml_row_size` bytes.
#' @family quantization
#' @export
#' @examples
#' x <- rnorm(512)
#' q <- quantize_q4_K(x, 1, 512)
#' length(q) # 2 blocks of 144 bytes
#' y <- dequantize_row_q4_K(q, 512)
#' max(abs(x - y))
#' # with an importance matrix: more precision where it is large
#' w <- rep(c(10, 0.1), each = 16, length.out = 512)
#' yw <- dequantize_row_q4_K(quantize_q4_K(x, 1, 512, imatrix = w), 512)
#' c(plain = sum(w * (x - y)^2), weighted = sum(w * (x - yw)^2))
#' # every quantizer (the IQ types need an importance matrix): bytes for 512 values
#' quantizers <- list(iq1_m = quantize_iq1_m, iq1_s = quantize_iq1_s, iq2_s = quantize_iq2_s,
#'   iq2_xs = quantize_iq2_xs, iq2_xxs = quantize_iq2_xxs, iq3_s = quantize_iq3_s, iq3_xxs =
#'   quantize_iq3_xxs, iq4_nl = quantize_iq4_nl, iq4_xs = quantize_iq4_xs, mxfp4 =
#'   quantize_mxfp4, nvfp4 = quantize_nvfp4, q1_0 = quantize_q1_0, q2_K = quantize_q2_K, q3_K =
#'   quantize_q3_K, q4_0 = quantize_q4_0, q4_1 = quantize_q4_1, q5_0 = quantize_q5_0, q5_1 =
#'   quantize_q5_1, q5_K = quantize_q5_K, q6_K = quantize_q6_K, q8_0 = quantize_q8_0, q8_K =
#'   quantize_q8_K, tq1_0 = quantize_tq1_0, tq2_0 = quantize_tq2_0)
#' sapply(quantizers, function(f) length(f(x, 1, 512, imatrix = rep(1, 512))))
quantize_q4_0 <- .quantizer(2L)

#' @rdname quantize_q4_0
#' @export
quantize_q4_1 <- .quantizer(3L)

#' @rdname quantize_q4_0
#' @export
quantize_q5_0 <- .quantizer(6L)

#' @rdname quantize_q4_0
#' @export
quantize_q5_1 <- .quantizer(7L)

#' @rdname quantize_q4_0
#' @export
quantize_q8_0 <- .quantizer(8L)

#' @rdname quantize_q4_0
#' @export
quantize_q2_K <- .quantizer(10L)

#' @rdname quantize_q4_0
#' @export
quantize_q3_K <- .quantizer(11L)

#' @rdname quantize_q4_0
#' @export
quantize_q4_K <- .quantizer(12L)

#' @rdname quantize_q4_0
#' @export
quantize_q5_K <- .quantizer(13L)

#' @rdname quantize_q4_0
#' @export
quantize_q6_K <- .quantizer(14L)

#' @rdname quantize_q4_0
#' @export
quantize_q8_K <- .quantizer(15L)

#' @rdname quantize_q4_0
#' @export
quantize_iq2_xxs <- .quantizer(16L)

#' @rdname quantize_q4_0
#' @export
quantize_iq2_xs <- .quantizer(17L)

#' @rdname quantize_q4_0
#' @export
quantize_iq3_xxs <- .quantizer(18L)

#' @rdname quantize_q4_0
#' @export
quantize_iq1_s <- .quantizer(19L)

#' @rdname quantize_q4_0
#' @export
quantize_iq4_nl <- .quantizer(20L)

#' @rdname quantize_q4_0
#' @export
quantize_iq3_s <- .quantizer(21L)

#' @rdname quantize_q4_0
#' @export
quantize_iq2_s <- .quantizer(22L)

#' @rdname quantize_q4_0
#' @export
quantize_iq4_xs <- .quantizer(23L)

#' @rdname quantize_q4_0
#' @export
quantize_iq1_m <- .quantizer(29L)

#' @rdname quantize_q4_0
#' @export
quantize_tq1_0 <- .quantizer(34L)

#' @rdname quantize_q4_0
#' @export
quantize_tq2_0 <- .quantizer(35L)

#' @rdname quantize_q4_0
#' @export
quantize_mxfp4 <- .quantizer(39L)

#' @rdname quantize_q4_0
#' @export
quantize_nvfp4 <- .quantizer(40L)

#' @rdname quantize_q4_0
#' @export
quantize_q1_0 <- .quantizer(41L)

#' Reference quantizers
#'
#' `quantize_row_<type>_ref(src_data, n_elements)` is ggml's reference
#' quantizer of one row (no importance matrix): the bytes a llama.cpp build
#' writes for the same values. Q8_1 and Q8_K are the activation formats of
#' ggml's dot products.
#'
#' @param src_data Numeric values.
#' @param n_elements How many of them (a multiple of the block size).
#' @return A raw vector.
#' @family quantization
#' @export
#' @examples
#' q <- quantize_row_q8_0_ref(c(1.27, -0.635, rep(0, 30)))
#' q[1:4]
#' dequantize_row_q8_0(q)[1:2]
#' # every reference quantizer: bytes for 512 values
#' refs <- list(iq2_s = quantize_row_iq2_s_ref, iq3_s = quantize_row_iq3_s_ref, iq3_xxs =
#'   quantize_row_iq3_xxs_ref, iq4_nl = quantize_row_iq4_nl_ref, iq4_xs =
#'   quantize_row_iq4_xs_ref, mxfp4 = quantize_row_mxfp4_ref, nvfp4 = quantize_row_nvfp4_ref,
#'   q1_0 = quantize_row_q1_0_ref, q2_K = quantize_row_q2_K_ref, q3_K = quantize_row_q3_K_ref,
#'   q4_0 = quantize_row_q4_0_ref, q4_1 = quantize_row_q4_1_ref, q4_K = quantize_row_q4_K_ref,
#'   q5_0 = quantize_row_q5_0_ref, q5_1 = quantize_row_q5_1_ref, q5_K = quantize_row_q5_K_ref,
#'   q6_K = quantize_row_q6_K_ref, q8_1 = quantize_row_q8_1_ref, q8_K = quantize_row_q8_K_ref,
#'   tq1_0 = quantize_row_tq1_0_ref, tq2_0 = quantize_row_tq2_0_ref)
#' sapply(refs, function(f) length(f(rnorm(512), 512)))
quantize_row_q4_0_ref <- .ref_quantizer(2L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q4_1_ref <- .ref_quantizer(3L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q5_0_ref <- .ref_quantizer(6L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q5_1_ref <- .ref_quantizer(7L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q8_0_ref <- .ref_quantizer(8L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q8_1_ref <- .ref_quantizer(9L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q2_K_ref <- .ref_quantizer(10L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q3_K_ref <- .ref_quantizer(11L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q4_K_ref <- .ref_quantizer(12L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q5_K_ref <- .ref_quantizer(13L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q6_K_ref <- .ref_quantizer(14L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q8_K_ref <- .ref_quantizer(15L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_iq3_xxs_ref <- .ref_quantizer(18L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_iq4_nl_ref <- .ref_quantizer(20L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_iq3_s_ref <- .ref_quantizer(21L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_iq2_s_ref <- .ref_quantizer(22L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_iq4_xs_ref <- .ref_quantizer(23L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_tq1_0_ref <- .ref_quantizer(34L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_tq2_0_ref <- .ref_quantizer(35L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_mxfp4_ref <- .ref_quantizer(39L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_nvfp4_ref <- .ref_quantizer(40L)

#' @rdname quantize_row_q4_0_ref
#' @export
quantize_row_q1_0_ref <- .ref_quantizer(41L)

#' Dequantize data
#'
#' `dequantize_row_<type>(raw_data, n_elements)` decodes `n_elements`
#' values from quantized blocks, as ggml's `dequantize_row_<type>`.
#'
#' @param raw_data A raw vector of blocks.
#' @param n_elements How many values (default: every whole block of `raw_data`).
#' @return A numeric vector.
#' @family quantization
#' @export
#' @examples
#' q <- quantize_q4_0(seq(-1, 1, length.out = 64))
#' round(dequantize_row_q4_0(q, 64), 3)
#' # every dequantizer, on the bytes of ggml_quantize_chunk(): the largest error
#' deq <- list(iq1_m = dequantize_row_iq1_m, iq1_s = dequantize_row_iq1_s, iq2_s =
#'   dequantize_row_iq2_s, iq2_xs = dequantize_row_iq2_xs, iq2_xxs = dequantize_row_iq2_xxs,
#'   iq3_s = dequantize_row_iq3_s, iq3_xxs = dequantize_row_iq3_xxs, iq4_nl =
#'   dequantize_row_iq4_nl, iq4_xs = dequantize_row_iq4_xs, mxfp4 = dequantize_row_mxfp4, nvfp4
#'   = dequantize_row_nvfp4, q1_0 = dequantize_row_q1_0, q2_K = dequantize_row_q2_K, q3_K =
#'   dequantize_row_q3_K, q4_1 = dequantize_row_q4_1, q4_K = dequantize_row_q4_K, q5_0 =
#'   dequantize_row_q5_0, q5_1 = dequantize_row_q5_1, q5_K = dequantize_row_q5_K, q6_K =
#'   dequantize_row_q6_K, q8_0 = dequantize_row_q8_0, q8_1 = dequantize_row_q8_1, q8_K =
#'   dequantize_row_q8_K, tq1_0 = dequantize_row_tq1_0, tq2_0 = dequantize_row_tq2_0)
#' x <- rnorm(512)
#' codes <- sapply(0:41, function(t) tryCatch(ggml_type_name(t), error = function(e) NA))
#' sapply(names(deq), function(t) {
#'   q <- ggml_quantize_chunk(match(t, codes) - 1L, x, 1, 512, imatrix = rep(1, 512))
#'   signif(max(abs(deq[[t]](q, 512) - x)), 2)
#' })
dequantize_row_q4_0 <- .dequantizer(2L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q4_1 <- .dequantizer(3L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q5_0 <- .dequantizer(6L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q5_1 <- .dequantizer(7L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q8_0 <- .dequantizer(8L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q8_1 <- .dequantizer(9L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q2_K <- .dequantizer(10L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q3_K <- .dequantizer(11L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q4_K <- .dequantizer(12L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q5_K <- .dequantizer(13L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q6_K <- .dequantizer(14L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q8_K <- .dequantizer(15L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq2_xxs <- .dequantizer(16L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq2_xs <- .dequantizer(17L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq3_xxs <- .dequantizer(18L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq1_s <- .dequantizer(19L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq4_nl <- .dequantizer(20L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq3_s <- .dequantizer(21L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq2_s <- .dequantizer(22L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq4_xs <- .dequantizer(23L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_iq1_m <- .dequantizer(29L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_tq1_0 <- .dequantizer(34L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_tq2_0 <- .dequantizer(35L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_mxfp4 <- .dequantizer(39L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_nvfp4 <- .dequantizer(40L)

#' @rdname dequantize_row_q4_0
#' @export
dequantize_row_q1_0 <- .dequantizer(41L)

#' Quantize with any type
#'
#' `ggml_quantize_chunk()` quantizes `nrows` rows of `n_per_row` values to
#' `type` (ggml's function of that name, from the first row). F32, F16 and
#' BF16 give their plain bytes. `ggml_quantize_init()` builds the lookup
#' tables a lattice type (IQ1, IQ2, IQ3) needs, which the quantizers also do
#' on first use; `ggml_quantize_free()` drops them all.
#' `ggml_quantize_requires_imatrix()` tells whether a type cannot be made
#' without an importance matrix.
#'
#' @param type A type code (`GGML_TYPE_Q4_0`, ...).
#' @param src Numeric values.
#' @param nrows,n_per_row Rows and values per row.
#' @param imatrix `NULL` or one importance per column.
#' @return `ggml_quantize_chunk()`: a raw vector. `ggml_quantize_requires_imatrix()`:
#'   `TRUE` or `FALSE`. The others: `NULL`, invisibly.
#' @family quantization
#' @export
#' @examples
#' q <- ggml_quantize_chunk(GGML_TYPE_Q8_0, rnorm(256), 1, 256)
#' length(q)
#' ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_XXS)
#' ggml_quantize_init(GGML_TYPE_IQ3_S)
#' ggml_quantize_free()
ggml_quantize_chunk <- function(type, src, nrows, n_per_row, imatrix = NULL) {
  .type_arg(type)
  .values_arg(src, "src")
  if (type %in% c(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16)) {
    if (!is.numeric(nrows) || !is.numeric(n_per_row) || length(nrows) != 1L || length(n_per_row) != 1L ||
        !isTRUE(nrows >= 1 && n_per_row >= 1) || length(src) != nrows * n_per_row) {
      .abort(sprintf("%d values were given for %s rows of %s; give exactly nrows * n_per_row values.",
        length(src), format(nrows), format(n_per_row)))
    }
    ctx <- ggml_init(ggml_tensor_overhead() + 8 * length(src) + 1024)
    on.exit(ggml_free(ctx))
    t <- ggml_new_tensor_2d(ctx, type, n_per_row, nrows)
    ggml_backend_tensor_set_data(t, src)
    return(.rs(rs_tensor_bytes(t)))
  }
  .rs(rs_quantize(type, as.numeric(src), nrows, n_per_row, imatrix))
}

#' @rdname ggml_quantize_chunk
#' @export
ggml_quantize_init <- function(type) {
  .type_arg(type)
  invisible(.rs(rs_quantize_init(type)))
}

#' @rdname ggml_quantize_chunk
#' @export
ggml_quantize_free <- function() invisible(.rs(rs_quantize_free(NULL)))

#' @rdname ggml_quantize_chunk
#' @export
ggml_quantize_requires_imatrix <- function(type) {
  .type_arg(type)
  .rs(rs_requires_imatrix(type))
}

#' Lattice tables of the IQ types
#'
#' The IQ1, IQ2 and IQ3 quantizers search tables of grid points and their
#' neighbours. `iq2xs_init_impl(type)` builds those of IQ2_XXS, IQ2_XS,
#' IQ2_S, IQ1_S or IQ1_M, `iq3xs_init_impl(grid_size)` those of IQ3_XXS
#' (`grid_size = 256`) or IQ3_S (512); the `_free_impl` functions drop them.
#' The quantizers build them when needed, so calling these is optional.
#'
#' @param type A type code.
#' @param grid_size 256 or 512.
#' @return `NULL`, invisibly.
#' @family quantization
#' @export
#' @examples
#' iq3xs_init_impl(256)
#' q <- quantize_iq3_xxs(rnorm(256))
#' iq3xs_free_impl(256)
#' iq2xs_init_impl(GGML_TYPE_IQ2_XS)
#' length(quantize_iq2_xs(rnorm(256), imatrix = rep(1, 256)))
#' iq2xs_free_impl(GGML_TYPE_IQ2_XS)
iq2xs_init_impl <- function(type) {
  .iq_check(type, c(16L, 17L, 19L, 22L, 29L), "iq2xs_init_impl", "GGML_TYPE_IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S or IQ1_M")
  invisible(.rs(rs_quantize_init(type)))
}

#' @rdname iq2xs_init_impl
#' @export
iq2xs_free_impl <- function(type) {
  .iq_check(type, c(16L, 17L, 19L, 22L, 29L), "iq2xs_free_impl", "GGML_TYPE_IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S or IQ1_M")
  invisible(.rs(rs_quantize_free(type)))
}

#' @rdname iq2xs_init_impl
#' @export
iq3xs_init_impl <- function(grid_size) {
  type <- .iq3_type(grid_size)
  invisible(.rs(rs_quantize_init(type)))
}

#' @rdname iq2xs_init_impl
#' @export
iq3xs_free_impl <- function(grid_size) {
  type <- .iq3_type(grid_size)
  invisible(.rs(rs_quantize_free(type)))
}

.iq_check <- function(type, ok, fn, names, call = sys.call(-1L)) {
  if (!is.numeric(type) || length(type) != 1L || !(type %in% ok)) {
    .abort(sprintf("%s() takes %s, not %s.", fn, names, format(type)), call = call)
  }
}

.iq3_type <- function(grid_size, call = sys.call(-1L)) {
  if (is.numeric(grid_size) && identical(as.numeric(grid_size), 256)) return(GGML_TYPE_IQ3_XXS)
  if (is.numeric(grid_size) && identical(as.numeric(grid_size), 512)) return(GGML_TYPE_IQ3_S)
  .abort(sprintf("`grid_size` must be 256 (IQ3_XXS) or 512 (IQ3_S), not %s.", format(grid_size)), call = call)
}

#' Block layout of a type
#'
#' @param type A type code.
#' @return `ggml_quant_block_info()`: a list with `type_name`, `type_size`
#'   (bytes per block), `block_size` (values per block) and `is_quantized`.
#'   `ggml_blck_size()`: values per block (1 for element types).
#'   `ggml_is_quantized()`: `TRUE` or `FALSE`. `ggml_type_sizef()`: bytes per
#'   value (a fraction for quantized types, 18 / 32 for Q4_0).
#' @family quantization
#' @export
#' @examples
#' str(ggml_quant_block_info(GGML_TYPE_Q4_K))
#' ggml_blck_size(GGML_TYPE_Q4_0)
#' ggml_is_quantized(GGML_TYPE_F16)
#' ggml_type_sizef(GGML_TYPE_Q8_0)
ggml_quant_block_info <- function(type) .block_info(type)

# The block layout of `type`, errors naming the caller (the user's function).
.block_info <- function(type, call = sys.call(-1L)) {
  .type_arg(type, call = call)
  .rs(rs_quant_info(type), call = call)
}

#' @rdname ggml_quant_block_info
#' @export
ggml_blck_size <- function(type) .block_info(type)$block_size

#' @rdname ggml_quant_block_info
#' @export
ggml_is_quantized <- function(type) .block_info(type)$is_quantized

#' @rdname ggml_quant_block_info
#' @export
ggml_type_sizef <- function(type) {
  i <- .block_info(type)
  i$type_size / i$block_size
}

# A type code argument: one whole number (the engine says which codes exist).
.type_arg <- function(type, call = sys.call(-1L)) {
  if (!is.numeric(type) || length(type) != 1L || is.na(type) || type != round(type)) {
    .abort(sprintf("`type` must be one type code such as GGML_TYPE_Q4_0, not %s.", .show_arg(type)), call = call)
  }
}

# Values to quantize: a numeric vector.
.values_arg <- function(x, what, call = sys.call(-1L)) {
  if (!is.numeric(x) && !is.logical(x)) {
    .abort(sprintf("`%s` must be a numeric vector of the values to quantize, not %s.", what, .show_arg(x)), call = call)
  }
}

.show_arg <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.atomic(x) && length(x) == 1L) return(format(x))
  sprintf("a %s of length %d", class(x)[1L], length(x))
}
