#' Tensor element types
#'
#' Type codes (ggml's values) and their sizes and names. Besides the element
#' types F32, F16, BF16 and I32 there are ggml's quantized block types
#' (`GGML_TYPE_Q4_0` ... `GGML_TYPE_Q1_0`): their values are stored in blocks
#' (see [ggml_quant_block_info()]); tensors of these types hold quantized
#' weights for `ggml_mul_mat()` and `ggml_get_rows()` on the CPU backend.
#'
#' @param type A type code such as `GGML_TYPE_F32`.
#' @return `ggml_type_size()`: bytes per element, or per block for quantized
#'   types (a number, as upstream). `ggml_type_name()`: a string ("f32", "f16", "bf16",
#'   "i32", "q4_0", "q4_K", ...).
#' @export
#' @examples
#' ggml_type_size(GGML_TYPE_F16)
#' ggml_type_name(GGML_TYPE_BF16)
#' sapply(c(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32), ggml_type_name)
#' ggml_type_size(GGML_TYPE_Q4_0) # bytes of a block of 32 values
#' # the quantized types: names and bytes per block
#' quantized <- c(GGML_TYPE_IQ1_M, GGML_TYPE_IQ1_S, GGML_TYPE_IQ2_S, GGML_TYPE_IQ2_XS,
#'   GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
#'   GGML_TYPE_MXFP4, GGML_TYPE_NVFP4, GGML_TYPE_Q1_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
#'   GGML_TYPE_Q4_1, GGML_TYPE_Q4_K, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q5_K,
#'   GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K, GGML_TYPE_TQ1_0,
#'   GGML_TYPE_TQ2_0)
#' data.frame(name = sapply(quantized, ggml_type_name),
#'            block_bytes = sapply(quantized, ggml_type_size))
GGML_TYPE_F32 <- 0L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_F16 <- 1L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_I32 <- 26L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_BF16 <- 30L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q4_0 <- 2L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q4_1 <- 3L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q5_0 <- 6L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q5_1 <- 7L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q8_0 <- 8L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q8_1 <- 9L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q2_K <- 10L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q3_K <- 11L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q4_K <- 12L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q5_K <- 13L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q6_K <- 14L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q8_K <- 15L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ2_XXS <- 16L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ2_XS <- 17L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ3_XXS <- 18L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ1_S <- 19L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ4_NL <- 20L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ3_S <- 21L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ2_S <- 22L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ4_XS <- 23L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_IQ1_M <- 29L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_TQ1_0 <- 34L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_TQ2_0 <- 35L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_MXFP4 <- 39L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_NVFP4 <- 40L

#' @rdname GGML_TYPE_F32
#' @export
GGML_TYPE_Q1_0 <- 41L

#' @rdname GGML_TYPE_F32
#' @export
ggml_type_size <- function(type) as.numeric(.rs(rs_type_info(type))$size)

#' @rdname GGML_TYPE_F32
#' @export
ggml_type_name <- function(type) .rs(rs_type_info(type))$name
