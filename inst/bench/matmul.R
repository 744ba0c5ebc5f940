# Matrix multiplication speed of ggml_mul_mat on the CPU backend (f32), next
# to R's %*% (double, whatever BLAS R links) and, when importable, numpy's
# float32 matmul, in the same run. Also the per-node cost of graph dispatch.
# Run with `make bench` or `Rscript inst/bench/matmul.R`.
# On a machine shared with other work, real-time scheduling (as root:
# `chrt -f 1 Rscript ...`, inherited by the Python reference) keeps the
# other processes off the cores while it runs, so that two threads get two
# cores; the ratios are then those of a quiet machine.
suppressPackageStartupMessages(library(ggmlR))
options(width = 200)

sizes <- c(256, 512, 1024, 2048)
threads <- c(1, 2)
min_time <- 0.5 # seconds of repeated runs per measurement (after one warm-up)

# time_it(f, min_time): the shared timer of these benchmarks.
local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  source(file.path(if (length(file)) dirname(file[1]) else "inst/bench", "timing.R"))
})

# Peak f32 FMA throughput: FLOP per cycle per core from the SIMD width and the
# number of FMA units typical for the instruction set, times the clock.
peak_estimate <- function() {
  info <- if (file.exists("/proc/cpuinfo")) readLines("/proc/cpuinfo") else character()
  flags <- strsplit(sub(".*: ", "", grep("^flags", info, value = TRUE)[1]), " ")[[1]]
  mhz <- suppressWarnings(as.numeric(sub(".*: ", "", grep("^cpu MHz", info, value = TRUE)[1])))
  model <- sub(".*: ", "", grep("^model name", info, value = TRUE)[1])
  fpc <- if ("avx512f" %in% flags) 64 else if (all(c("avx2", "fma") %in% flags)) 32 else
    if ("avx" %in% flags) 16 else 8
  how <- sprintf("%s: %d f32 FLOP/cycle/core (%s) x %.2f GHz (/proc/cpuinfo 'cpu MHz')",
    model, fpc,
    if (fpc == 64) "AVX-512, 2 FMA units" else if (fpc == 32) "AVX2, 2 FMA units x 8 lanes x 2" else
      if (fpc == 16) "AVX, no FMA" else "SSE",
    mhz / 1000)
  list(per_core = fpc * mhz / 1000, how = how)
}

# Seconds per call are the fastest of repeated single calls for ggml and numpy
# (the machine may be shared); R's reference BLAS is timed once at the large sizes.
ggml_matmul_time <- function(n, nth) {
  cpu <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(cpu, nth)
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n)
  b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n)
  r <- ggml_mul_mat(ctx, a, b)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  ggml_backend_tensor_set_data(a, runif(n * n))
  ggml_backend_tensor_set_data(b, runif(n * n))
  g <- ggml_build_forward_expand(ctx, r)
  s <- fastest_call(function() ggml_backend_graph_compute(cpu, g), min_time)
  ggml_backend_buffer_free(buf)
  ggml_free(ctx)
  ggml_backend_free(cpu)
  s
}

# The fastest of single calls (a microsecond clock) repeated for min_time
# seconds, at least 3, after one warm-up: the way numpy's calls are timed
# below, so that both sides meet a loaded machine alike.
fastest_call <- function(f, min_time) {
  f()
  best <- Inf
  k <- 0
  start <- Sys.time()
  repeat {
    t0 <- Sys.time()
    f()
    t1 <- Sys.time()
    best <- min(best, as.numeric(t1 - t0, units = "secs"))
    k <- k + 1
    if (k >= 3 && as.numeric(t1 - start, units = "secs") >= min_time) return(best)
  }
}

r_matmul_time <- function(n) {
  A <- matrix(runif(n * n), n)
  B <- matrix(runif(n * n), n)
  if (n >= 1024) return(system.time(A %*% B)[["elapsed"]]) # slow: one call
  time_it(function() A %*% B, min_time)
}

numpy_times <- function(sizes, nth) {
  py <- Sys.which("python3")
  # R's library path can make python load another libpython; run it without.
  base_env <- "LD_LIBRARY_PATH="
  if (!nzchar(py) || system2(py, c("-c", shQuote("import numpy")), stdout = FALSE, stderr = FALSE,
                             env = base_env) != 0) {
    return(NULL)
  }
  code <- paste(
    "import sys, time, numpy as np",
    "for n in [int(s) for s in sys.argv[1:]]:",
    "    a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)",
    "    a @ b; k = 0; best = 1e9; start = time.perf_counter()",
    "    while True:",
    "        t0 = time.perf_counter(); a @ b; t1 = time.perf_counter()",
    "        best = min(best, t1 - t0); k += 1",
    "        if k >= 3 and t1 - start >= 0.5: break",
    "    print(best)", sep = "\n")
  f <- tempfile(fileext = ".py")
  writeLines(code, f)
  env <- c(base_env, sprintf("OPENBLAS_NUM_THREADS=%d", nth), sprintf("OMP_NUM_THREADS=%d", nth),
           sprintf("MKL_NUM_THREADS=%d", nth))
  out <- system2(py, c(f, sizes), stdout = TRUE, env = env)
  as.numeric(out)
}

.load <- function() {
  if (!file.exists("/proc/loadavg")) return(NA_real_)
  as.numeric(strsplit(readLines("/proc/loadavg"), " ")[[1]][1])
}

# Dispatch: a chain of 1000 adds of 4-element tensors, measured before the
# products and again after them. Each graph (about 0.2 ms) is timed on its
# own with a microsecond clock: the fastest of many is the dispatch cost, free
# of the time slices other processes take (a 50 ms batch on a loaded machine
# always holds some), and the median shows how much the machine disturbs it.
dispatch_times <- function(nth, reps = 400) {
  cpu <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(cpu, nth)
  ctx <- ggml_init(1100 * ggml_tensor_overhead(), no_alloc = TRUE)
  x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  y <- x
  for (i in 1:1000) y <- ggml_add(ctx, y, b)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  ggml_backend_tensor_set_data(x, 1:4)
  ggml_backend_tensor_set_data(b, 1)
  g <- ggml_build_forward_expand(ctx, y)
  for (i in 1:20) ggml_backend_graph_compute(cpu, g)
  s <- vapply(seq_len(reps), function(i) {
    t0 <- Sys.time()
    ggml_backend_graph_compute(cpu, g)
    as.numeric(Sys.time() - t0, units = "secs")
  }, numeric(1))
  stopifnot(ggml_backend_tensor_get_data(y)[1] == 1001)
  nodes <- ggml_graph_n_nodes(g)
  ggml_backend_buffer_free(buf)
  ggml_free(ctx)
  ggml_backend_free(cpu)
  1e6 * c(min = min(s), median = median(s)) / nodes
}
dispatch_before <- lapply(threads, dispatch_times)

peak <- peak_estimate()
cat("Peak estimate:", peak$how, "\n")
cat(sprintf("  = %.1f GFLOP/s per core; 60%% of 2 cores = %.1f GFLOP/s\n",
  peak$per_core, 0.6 * 2 * peak$per_core))
cat("  ('cpu MHz' is the current clock; with turbo the true peak can be higher, and on a\n",
    sprintf("  shared machine the load average (now %.1f) leaves less than a core per thread)\n", .load()))
cat("R's BLAS:", extSoftVersion()[["BLAS"]], "\n\n")

gflops <- function(n, s) 2 * n^3 / s / 1e9
r_gf <- sapply(sizes, function(n) gflops(n, r_matmul_time(n)))
have_np <- !is.null(numpy_times(64, 1))
if (!have_np) cat("numpy: not importable by python3, skipped\n\n")

rows <- list()
for (nth in threads) {
  for (i in seq_along(sizes)) {
    n <- sizes[i]
    # ggml and numpy alternate, twice each, the faster of each counting: on
    # a shared machine both then meet the same load.
    gs <- ns <- numeric(0)
    for (rep in 1:2) {
      gs <- c(gs, ggml_matmul_time(n, nth))
      if (have_np) ns <- c(ns, numpy_times(n, nth))
    }
    gg <- gflops(n, min(gs))
    np_gf <- if (have_np) gflops(n, min(ns)) else NA
    rows[[length(rows) + 1]] <- data.frame(
      n = n, threads = nth, ggml_GFLOPs = round(gg, 2), R_GFLOPs = round(r_gf[i], 2),
      ggml_over_R = round(gg / r_gf[i], 2),
      numpy_f32_GFLOPs = round(np_gf, 2), ggml_over_numpy = round(gg / np_gf, 2),
      pct_of_peak = round(100 * gg / (nth * peak$per_core), 1))
  }
}
tab <- do.call(rbind, rows)
cat(sprintf("ggml_mul_mat (f32) vs R %%*%% (double, R's BLAS) and numpy float32 matmul (load average now %.1f):\n", .load()))
print(tab, row.names = FALSE)
if (have_np) {
  one <- tab[tab$threads == 1, ]
  two <- tab[tab$threads == 2, ]
  cat("\n2 threads over 1 thread (same run): ggml",
      paste(sprintf("%d: %.2fx", one$n, two$ggml_GFLOPs / one$ggml_GFLOPs), collapse = ", "),
      "| numpy", paste(sprintf("%d: %.2fx", one$n, two$numpy_f32_GFLOPs / one$numpy_f32_GFLOPs), collapse = ", "), "\n")
}
k <- tab$n == 1024 & tab$threads == 2
cat(sprintf("\nAt 1024, 2 threads: %.1f GFLOP/s = %.1f%% of the 2-core peak estimate (target 60%%)%s\n",
  tab$ggml_GFLOPs[k], tab$pct_of_peak[k],
  if (have_np) sprintf("; %.2fx numpy", tab$ggml_over_numpy[k]) else ""))


cat(sprintf("\nPer-node dispatch (graph of 1000 adds on 4-element f32 tensors, each graph timed alone; load average now %.1f):\n", .load()))
dispatch_after <- lapply(threads, dispatch_times)
for (i in seq_along(threads)) {
  cat(sprintf("  %d thread(s): %.2f us per node (fastest graph; median %.2f) before the products, %.2f (median %.2f) after them\n",
    threads[i], dispatch_before[[i]][["min"]], dispatch_before[[i]][["median"]],
    dispatch_after[[i]][["min"]], dispatch_after[[i]][["median"]]))
}
