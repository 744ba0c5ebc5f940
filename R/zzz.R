.onLoad <- function(libname, pkgname) {
  ns <- asNamespace(pkgname)
  .ggmlR_threads_on_load()
  # Keep freed memory for reuse instead of returning it to the kernel at
  # once (see ?ag_memory_stats); options(ggmlR.malloc_tuning = FALSE) before
  # loading the package keeps the C library's defaults.
  if (!isFALSE(getOption("ggmlR.malloc_tuning"))) rs_malloc_tune()
  .rs(rs_ag_env_init(ns, .ag_tensor_data_fn, .ag_tensor_grad_fn, .ag_grads_fn))
  .ag_residency_on_load(.ag_device_state)
  .ag_dispatch_on_load(ns)
}
