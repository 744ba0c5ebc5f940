#' Tensor element types
#'
#' Type codes (ggml's values) and their sizes and names.
#'
#' @param type A type code such as `GGML_TYPE_F32`.
#' @return `ggml_type_size()`: bytes per element (integer).
#'   `ggml_type_name()`: a string ("f32", "f16", "bf16", "i32").
#' @export
#' @examples
#' ggml_type_size(GGML_TYPE_F16)
#' ggml_type_name(GGML_TYPE_BF16)
#' sapply(c(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32), ggml_type_name)
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
ggml_type_size <- function(type) .rs(rs_type_info(type))$size

#' @rdname GGML_TYPE_F32
#' @export
ggml_type_name <- function(type) .rs(rs_type_info(type))$name
