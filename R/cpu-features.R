# CPU features, as ggml's ggml_cpu_has_*() queries name them.

#' CPU features
#'
#' Whether the CPU the engine runs on has each instruction set extension,
#' detected at run time (features of other architectures are `FALSE`;
#' `ggml_cpu_has_llamafile()` is `FALSE`: there is no llamafile kernel).
#' `ggml_cpu_get_sve_cnt()` and `ggml_cpu_get_rvv_vlen()` are vector
#' lengths in bytes (0 without SVE / RISC-V vectors).
#' `ggml_cpu_features()` returns all of them at once. The engine's own CPU
#' kernels use AVX2 and FMA where present.
#'
#' @return A logical (an integer for the vector lengths);
#'   `ggml_cpu_features()`: a named list.
#' @export
#' @examples
#' str(ggml_cpu_features())
#' # one by one
#' sapply(list(
#'   has_sse3 = ggml_cpu_has_sse3(),
#'   has_ssse3 = ggml_cpu_has_ssse3(),
#'   has_avx = ggml_cpu_has_avx(),
#'   has_avx_vnni = ggml_cpu_has_avx_vnni(),
#'   has_avx2 = ggml_cpu_has_avx2(),
#'   has_bmi2 = ggml_cpu_has_bmi2(),
#'   has_f16c = ggml_cpu_has_f16c(),
#'   has_fma = ggml_cpu_has_fma(),
#'   has_avx512 = ggml_cpu_has_avx512(),
#'   has_avx512_vbmi = ggml_cpu_has_avx512_vbmi(),
#'   has_avx512_vnni = ggml_cpu_has_avx512_vnni(),
#'   has_avx512_bf16 = ggml_cpu_has_avx512_bf16(),
#'   has_amx_int8 = ggml_cpu_has_amx_int8(),
#'   has_neon = ggml_cpu_has_neon(),
#'   has_arm_fma = ggml_cpu_has_arm_fma(),
#'   has_fp16_va = ggml_cpu_has_fp16_va(),
#'   has_dotprod = ggml_cpu_has_dotprod(),
#'   has_matmul_int8 = ggml_cpu_has_matmul_int8(),
#'   has_sve = ggml_cpu_has_sve(),
#'   has_sme = ggml_cpu_has_sme(),
#'   has_riscv_v = ggml_cpu_has_riscv_v(),
#'   has_vsx = ggml_cpu_has_vsx(),
#'   has_vxe = ggml_cpu_has_vxe(),
#'   has_wasm_simd = ggml_cpu_has_wasm_simd(),
#'   has_llamafile = ggml_cpu_has_llamafile(),
#'   get_sve_cnt = ggml_cpu_get_sve_cnt(),
#'   get_rvv_vlen = ggml_cpu_get_rvv_vlen()
#' ), identity)
ggml_cpu_features <- function() .rs(rs_cpu_features())

.cpu_has <- function(name) .rs(rs_cpu_features())[[name]]

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_sse3 <- function() .cpu_has("sse3")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_ssse3 <- function() .cpu_has("ssse3")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx <- function() .cpu_has("avx")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx_vnni <- function() .cpu_has("avx_vnni")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx2 <- function() .cpu_has("avx2")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_bmi2 <- function() .cpu_has("bmi2")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_f16c <- function() .cpu_has("f16c")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_fma <- function() .cpu_has("fma")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx512 <- function() .cpu_has("avx512")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx512_vbmi <- function() .cpu_has("avx512_vbmi")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx512_vnni <- function() .cpu_has("avx512_vnni")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_avx512_bf16 <- function() .cpu_has("avx512_bf16")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_amx_int8 <- function() .cpu_has("amx_int8")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_neon <- function() .cpu_has("neon")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_arm_fma <- function() .cpu_has("arm_fma")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_fp16_va <- function() .cpu_has("fp16_va")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_dotprod <- function() .cpu_has("dotprod")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_matmul_int8 <- function() .cpu_has("matmul_int8")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_sve <- function() .cpu_has("sve")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_sme <- function() .cpu_has("sme")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_riscv_v <- function() .cpu_has("riscv_v")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_vsx <- function() .cpu_has("vsx")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_vxe <- function() .cpu_has("vxe")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_wasm_simd <- function() .cpu_has("wasm_simd")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_has_llamafile <- function() .cpu_has("llamafile")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_get_sve_cnt <- function() .cpu_has("sve_cnt")

#' @rdname ggml_cpu_features
#' @export
ggml_cpu_get_rvv_vlen <- function() .cpu_has("rvv_vlen")
