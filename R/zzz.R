.onLoad <- function(libname, pkgname) {
  ns <- asNamespace(pkgname)
  .ggmlR_threads_on_load()
  # Keep freed memory for reuse instead of returning it to the kernel at
  # once (see ?ag_memory_stats); options(ggmlR.malloc_tuning = FALSE) before
  # loading the package keeps the C library's defaults.
  if (!isFALSE(getOption("ggmlR.malloc_tuning"))) rs_malloc_tune()
  .rs(rs_ag_env_init(ns, .ag_tensor_data_fn, .ag_tensor_grad_fn, .ag_grads_fn))
  # The engine's messages and internal-failure reports go to R's console
  # (see ?ggml_log_set_r).
  .rs(rs_log_control("r", "info"))
  .rs(rs_log_control("abort_r", "info"))
  .ag_residency_on_load(.ag_device_state)
  .ag_dispatch_on_load(ns)
}

# The active-binding functions .ag_tensor_data_fn, .ag_tensor_grad_fn and
# .ag_grads_fn run in environments the engine makes for each tensor or
# gradient store, where `e`, `store` and `id` are bound.
utils::globalVariables(c("e", "store", "id"))
