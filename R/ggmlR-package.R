#' ggmlR: tensor computing and neural networks with a Rust engine
#'
#' Build tensors and computation graphs in R and run them on the CPU or on a
#' GPU through Vulkan. See `ggml_backend_cpu_init()` to start.
#'
#' @keywords internal
#' @useDynLib ggmlR, .registration = TRUE
"_PACKAGE"
