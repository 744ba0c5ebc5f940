#' ggmlR: tensor computing and neural networks with a Rust engine
#'
#' Build tensors and computation graphs in R and run them on the CPU or on a
#' GPU through Vulkan; train models with automatic differentiation; run ncnn
#' models whose custom layers are R functions. The engine is written in Rust;
#' the API follows that of ggmlR 0.7.9, so code written for it keeps working.
#'
#' @section Start here:
#' `vignette("ggmlR")` introduces the package and its layout conventions:
#' the first dimension of an R array is ggml's fastest one (`ne0`), and an
#' autograd batch is a matrix `[features, samples]`, one sample per column
#' ([ag_fit()] and `predict()` also take samples as rows and data frames).
#' The other vignettes: `vignette("autograd")` (training),
#' `vignette("memory")` (the byte ledger and device residency),
#' `vignette("vulkan")` (GPUs), `vignette("ncnn")` (ncnn models).
#'
#' @section The parts:
#' \describe{
#'   \item{Autograd}{[ag_tensor()], [ag_param()], [with_grad_tape()],
#'     [backward()]; layers such as [ag_linear()] and [ag_sequential()];
#'     [optimizers], [ag_fit()], [predict.ag_layer()], [summary.ag_layer()].
#'     Tensors print like matrices and take `[`, `t()`, `%*%`, arithmetic and
#'     the Math and Summary groups ([ag_tensor_math]).}
#'   \item{ggml tensors and graphs}{[ggml_init()], [ggml_new_tensor()], ops
#'     from [ggml_add()] to [ggml_conv_2d()], [ggml_build_forward_expand()],
#'     backends ([ggml_backend_cpu_init()], [ggml_backend_init_best()]) and
#'     their buffers ([ggml_backend_alloc_ctx_tensors()]).}
#'   \item{Vulkan}{[ggml_vulkan_available()], [ggml_vulkan_init()],
#'     [ag_device()] for training on the device.}
#'   \item{ncnn}{[ncnn_net()], [ncnn_layer()].}
#'   \item{Memory}{[ag_memory_stats()], [ag_memory_limit()].}
#' }
#'
#' @section Errors:
#' Bad input and engine failures are R errors of class `ggmlR_error` (ncnn's
#' also `ncnn_error`) that name the function and say what to do; the
#' session, tensors, models and nets stay usable.
#'
#' @section Options:
#' \describe{
#'   \item{`ggmlR.print_max_rows`}{Rows of a tensor that [print.ag_tensor()]
#'     shows (default 10).}
#'   \item{`ggmlR.malloc_tuning`}{`FALSE` before loading keeps the C
#'     library's memory settings (see [ag_memory_stats()]).}
#' }
#' Under `R CMD check --as-cran` (`_R_CHECK_LIMIT_CORES_` set) the engine
#' uses at most two threads by default.
#'
#' @examples
#' x <- ag_param(matrix(c(1, 2, 3, 4), 2, 2))
#' with_grad_tape(loss <- sum(x %*% x))
#' backward(loss)
#' x$grad
#' ggml_version()
#' @useDynLib ggmlR, .registration = TRUE
"_PACKAGE"
