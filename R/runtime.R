# Clocks, threads, seeds and small facts of the engine.

#' Clocks
#'
#' `ggml_time_init()` starts the engine's monotonic clock (it also starts on
#' first use); `ggml_time_ms()` and `ggml_time_us()` read it, in
#' milliseconds and microseconds since it started. `ggml_cycles()` is the
#' CPU time this R process has used, in clock ticks of `ggml_cycles_per_ms()`
#' per millisecond (as C's `clock()`).
#'
#' @return `ggml_time_init()`: `NULL`, invisibly. The others: a number.
#' @export
#' @examples
#' ggml_time_init()
#' t0 <- ggml_time_us()
#' Sys.sleep(0.01)
#' ggml_time_us() - t0
#' ggml_time_ms()
#' ggml_cycles() / ggml_cycles_per_ms()
ggml_time_init <- function() invisible(.rs(rs_time("init")))

#' @rdname ggml_time_init
#' @export
ggml_time_ms <- function() .rs(rs_time("now")) / 1000

#' @rdname ggml_time_init
#' @export
ggml_time_us <- function() .rs(rs_time("now"))

#' @rdname ggml_time_init
#' @export
ggml_cycles <- function() {
  pt <- proc.time()
  (pt[["user.self"]] + pt[["sys.self"]]) * 1e6
}

#' @rdname ggml_time_init
#' @export
ggml_cycles_per_ms <- function() 1000

#' Threads
#'
#' The number of threads of the CPU backend that [ggml_graph_compute()]
#' uses (the machine's cores at first). `ggml_set_omp_threads()` sets the
#' same number (the engine's CPU threads are its own, not OpenMP's); backends
#' from [ggml_backend_cpu_init()] have their own setting,
#' [ggml_backend_cpu_set_n_threads()].
#'
#' @param n_threads,n A positive whole number.
#' @return `ggml_set_n_threads()`, `ggml_get_n_threads()`: the number of
#'   threads. `ggml_set_omp_threads()`: `NULL`, invisibly.
#' @export
#' @examples
#' old <- ggml_get_n_threads()
#' ggml_set_n_threads(2)
#' ggml_get_n_threads()
#' ggml_set_omp_threads(1)
#' ggml_set_n_threads(old)
ggml_set_n_threads <- function(n_threads) .rs(rs_host_threads(n_threads))

#' @rdname ggml_set_n_threads
#' @export
ggml_get_n_threads <- function() .rs(rs_host_threads(NULL))

#' @rdname ggml_set_n_threads
#' @export
ggml_set_omp_threads <- function(n) {
  .rs(rs_host_threads(n))
  invisible(NULL)
}

#' Reproducible runs
#'
#' Everything random in ggmlR (weight initialisation, dropout masks, data
#' shuffling) draws from R's random number generator, so fixing R's seed
#' fixes them. `ggml_set_seed(NULL)` does nothing.
#'
#' @param seed A single whole number, or `NULL`.
#' @return The seed as an integer (`NULL` for `NULL`), invisibly.
#' @export
#' @examples
#' ggml_set_seed(42)
#' a <- runif(2)
#' ggml_set_seed(42)
#' identical(a, runif(2))
ggml_set_seed <- function(seed) {
  if (is.null(seed)) return(invisible(NULL))
  if (!is.numeric(seed) || length(seed) != 1L || is.na(seed) || seed != trunc(seed) ||
      abs(seed) > .Machine$integer.max) {
    .abort(sprintf("`seed` must be a single whole number (or NULL), not %s.", .describe_value(seed)))
  }
  set.seed(as.integer(seed))
  invisible(as.integer(seed))
}

#' Engine checks
#'
#' `ggml_test()` computes a small graph on the CPU and checks the result
#' against base R; `ggml_is_available()` says the engine is loaded.
#'
#' @return A logical.
#' @export
#' @examples
#' ggml_test()
#' ggml_is_available()
ggml_test <- function() {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2), 1:6)
  b <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4), seq(-1, 1, length.out = 12))
  y <- ggml_mul_mat(ctx, a, b)
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, y))
  want <- base::crossprod(matrix(1:6, 3), matrix(seq(-1, 1, length.out = 12), 3))
  isTRUE(all.equal(ggml_get_f32(y), as.vector(want), tolerance = 1e-6))
}

#' @rdname ggml_test
#' @export
ggml_is_available <- function() TRUE
