# 2-D convolution speed on the CPU backend (f32): ggml_conv_2d (im2col +
# mul_mat nodes, as in ggml) and ggml_conv_2d_direct (one node) with a 3x3
# kernel, 64 -> 64 channels, 56x56 images, batch 8, padding 1, next to
# PyTorch's torch.nn.functional.conv2d on the CPU (float32) when python3 can
# import torch, with 1 and 2 threads, in the same run.
# Run with `Rscript inst/bench/conv.R` (or `make bench`).
suppressPackageStartupMessages(library(ggmlR))
options(width = 200)

threads <- c(1, 2)
min_time <- 0.5 # seconds of repeated runs per measurement (after one warm-up)
w <- 56; h <- 56; cin <- 64; cout <- 64; nb <- 8; kw <- 3; kh <- 3
flop <- 2 * w * h * cout * cin * kw * kh * nb

# time_it(f, min_time): the shared timer of these benchmarks.
local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  source(file.path(if (length(file)) dirname(file[1]) else "inst/bench", "timing.R"))
})

.load <- function() {
  if (!file.exists("/proc/loadavg")) return(NA_real_)
  as.numeric(strsplit(readLines("/proc/loadavg"), " ")[[1]][1])
}

# Seconds per convolution of `build` (ggml_conv_2d or ggml_conv_2d_direct) on
# the CPU backend with `nth` threads; also checks one output value.
ggml_conv_time <- function(build, nth) {
  cpu <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(cpu, nth)
  ctx <- ggml_init(16 * ggml_tensor_overhead(), no_alloc = TRUE)
  k <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, kw, kh, cin, cout)
  x <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, w, h, cin, nb)
  y <- build(ctx, k, x)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  set.seed(1)
  kv <- rnorm(kw * kh * cin * cout)
  xv <- rnorm(w * h * cin * nb)
  ggml_backend_tensor_set_data(k, kv)
  ggml_backend_tensor_set_data(x, xv)
  g <- ggml_build_forward_expand(ctx, y)
  s <- time_it(function() ggml_backend_graph_compute(cpu, g), min_time)
  # Output (x = 2, y = 2, oc = 1, n = 1) against the sum it stands for.
  got <- ggml_backend_tensor_get_data(y)[2 + w]
  xa <- array(xv, c(w, h, cin, nb))
  ka <- array(kv, c(kw, kh, cin, cout))
  want <- sum(xa[1:3, 1:3, , 1] * ka[, , , 1])
  stopifnot(abs(got - want) < 1e-3 * max(1, abs(want)))
  ggml_backend_buffer_free(buf)
  ggml_free(ctx)
  ggml_backend_free(cpu)
  s
}

torch_times <- function(threads) {
  py <- Sys.which("python3")
  # R's library path can make python load another libpython; run it without.
  base_env <- "LD_LIBRARY_PATH="
  if (!nzchar(py) || system2(py, c("-c", shQuote("import torch")), stdout = FALSE, stderr = FALSE,
                             env = base_env) != 0) {
    return(NULL)
  }
  code <- sprintf(paste(
    "import sys, time, torch",
    "x = torch.randn(%d, %d, %d, %d); wt = torch.randn(%d, %d, %d, %d)",
    "for t in [int(s) for s in sys.argv[1:]]:",
    "    torch.set_num_threads(t)",
    "    f = lambda: torch.nn.functional.conv2d(x, wt, padding=1)",
    "    f(); f(); k = 0; best = 1e9; start = time.perf_counter()",
    "    while True:",
    "        t0 = time.perf_counter(); f(); t1 = time.perf_counter()",
    "        best = min(best, t1 - t0); k += 1",
    "        if k >= 3 and t1 - start >= 0.5: break",
    "    print(best)", sep = "\n"), nb, cin, h, w, cout, cin, kh, kw)
  f <- tempfile(fileext = ".py")
  on.exit(unlink(f))
  writeLines(code, f)
  as.numeric(system2(py, c(f, threads), stdout = TRUE, env = base_env))
}

cat(sprintf("3x3 convolution, %d -> %d channels, %dx%d, batch %d, padding 1 (%.2f GFLOP); load average %.1f\n",
  cin, cout, w, h, nb, flop / 1e9, .load()))
tt <- torch_times(threads)
if (is.null(tt)) cat("PyTorch comparison skipped: python3 cannot import torch\n")
rows <- list()
for (i in seq_along(threads)) {
  nth <- threads[i]
  im <- ggml_conv_time(function(ctx, k, x) ggml_conv_2d(ctx, k, x, 1, 1, 1, 1), nth)
  di <- ggml_conv_time(function(ctx, k, x) ggml_conv_2d_direct(ctx, k, x, 1, 1, 1, 1), nth)
  tr <- if (is.null(tt)) NA else tt[i]
  rows[[i]] <- data.frame(
    threads = nth, conv_2d_ms = round(im * 1e3, 2), conv_2d_direct_ms = round(di * 1e3, 2),
    torch_ms = round(tr * 1e3, 2), conv_2d_GFLOPs = round(flop / im / 1e9, 1),
    torch_over_conv_2d = round(tr / im, 2), torch_over_direct = round(tr / di, 2))
}
tab <- do.call(rbind, rows)
cat("Fastest of repeated runs; torch_over_* > 1: ggmlR is ahead\n")
print(tab, row.names = FALSE)
cat(sprintf("2 threads over 1 (same run): conv_2d %.2fx, torch %.2fx; load average now %.1f\n",
  tab$conv_2d_ms[1] / tab$conv_2d_ms[2], tab$torch_ms[1] / tab$torch_ms[2], .load()))
