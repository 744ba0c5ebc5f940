# At most two threads by default under R CMD check, as CRAN asks: R CMD
# check --as-cran sets _R_CHECK_LIMIT_CORES_. The engine's rayon pool (used by
# autograd on "cpu" and by ncnn) then gets RAYON_NUM_THREADS = 2 before its
# first use, unless the user set it, and new CPU backends start with two
# threads (ggml_backend_cpu_set_n_threads() still sets any number).
.ggmlR_check_threads <- function() {
  v <- Sys.getenv("_R_CHECK_LIMIT_CORES_", "")
  if (nzchar(v) && !identical(toupper(v), "FALSE")) 2L else NULL
}

.ggmlR_threads_on_load <- function() {
  n <- .ggmlR_check_threads()
  if (!is.null(n) && !nzchar(Sys.getenv("RAYON_NUM_THREADS"))) Sys.setenv(RAYON_NUM_THREADS = n)
  invisible(n)
}

.ggmlR_limit_backend_threads <- function(backend) {
  n <- .ggmlR_check_threads()
  if (!is.null(n) && .rs(rs_backend_n_threads(backend)) > n) .rs(rs_backend_cpu_set_n_threads(backend, n))
  backend
}
