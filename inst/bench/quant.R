# Speed of quantized matrix-vector products (ggml_mul_mat of 4096 x 4096
# weights with one column) on the CPU backend, in GB/s of weights read,
# beside the machine's memory bandwidth and the f32 product, in the same run.
# The bandwidth is measured with the benchmark's threads inside this
# process, on the same CPU backend, in two ways: a plain copy, the engine's
# ggml_cpy() of a 128 MB f32 tensor into another (a parallel memcpy),
# counted as bytes read plus bytes written (STREAM's "Copy"); and a plain
# read, the engine's ggml_sum() of a 256 MB f32 tensor (chunks summed in
# parallel), counted as bytes read. A matrix-vector product only reads its
# weights, so the share of the read figure is the stricter measure (a read
# runs at least as fast as a copy's traffic); both shares are printed, and
# the read one is the target's. One stream's read (identical() of two
# distinct raw vectors: one memcmp, reading both) is printed too. An
# R-level copy is not used: it allocates a fresh vector each time and
# measures page faults rather than memory. Each type cycles through enough
# copies of the weights to exceed the last-level cache, so the weights come
# from memory.
# Run with `make bench` or `Rscript inst/bench/quant.R` (THREADS=n to change
# the 2 threads).
suppressPackageStartupMessages(library(ggmlR))
options(width = 200)

K <- 4096
M <- 4096
threads <- as.integer(Sys.getenv("THREADS", "2"))
min_time <- 1 # seconds of repeated runs per measurement
cache_bytes <- 96 * 2^20 # larger than the last-level caches of current CPUs

# time_it(f, min_time): the shared timer of these benchmarks.
local({
  file <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  source(file.path(if (length(file)) dirname(file[1]) else "inst/bench", "timing.R"))
})

# GB/s read by one stream: memcmp of two distinct raw vectors with the same
# bytes (so it reads all of both), 256 MB a pass.
read_bandwidth_1 <- function() {
  n <- 2^27
  a <- as.raw(sample.int(256, n, replace = TRUE) - 1L)
  b <- a
  b[1] <- a[1] # forces a distinct copy
  best <- Inf
  for (rep in 1:5) {
    t0 <- proc.time()[["elapsed"]]
    for (r in 1:4) stopifnot(identical(a, b))
    best <- min(best, proc.time()[["elapsed"]] - t0)
  }
  2 * n * 4 / best / 1e9
}

# GB/s read by the engine's ggml_sum() of a 256 MB f32 tensor on a CPU
# backend with `threads` threads (each thread sums its own chunks).
read_bandwidth_engine <- function(threads) {
  n <- 2^26
  backend <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(backend, threads)
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
  s <- ggml_sum(ctx, a)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(a, rep_len(c(0.5, -0.25, 1, 2), n))
  graph <- ggml_build_forward_expand(ctx, s)
  secs <- time_it(function() ggml_backend_graph_compute(backend, graph), min_time)
  stopifnot(ggml_backend_tensor_get_data(s) == n / 4 * 3.25)
  ggml_free(ctx)
  ggml_backend_free(backend)
  4 * n / secs / 1e9
}

# GB/s moved (read plus written) by the engine's ggml_cpy() of a 128 MB f32
# tensor into another on a CPU backend with `threads` threads.
copy_bandwidth_engine <- function(threads) {
  n <- 2^25
  backend <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(backend, threads)
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
  b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
  y <- ggml_cpy(ctx, a, b)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(a, rep_len(c(0.5, -0.25, 1, 2), n))
  graph <- ggml_build_forward_expand(ctx, y)
  secs <- time_it(function() ggml_backend_graph_compute(backend, graph), min_time)
  stopifnot(identical(ggml_backend_tensor_get_data(b)[n - 3:0], c(0.5, -0.25, 1, 2)))
  ggml_free(ctx)
  ggml_backend_free(backend)
  2 * 4 * n / secs / 1e9
}

# Seconds per matrix-vector product of `type` weights, cycling through
# enough copies of the weights to leave the caches: `together`, one graph
# holds a product of each copy, summed (one compute call reads them all, at least
# 96 MB, as the reference's call reads 256 MB); else one product per call
# (R's call and the graph's set-up then count too).
matvec_time <- function(type, bytes_per_row, together = TRUE) {
  w_bytes <- M * bytes_per_row
  copies <- max(1, ceiling(cache_bytes / w_bytes))
  backend <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(backend, threads)
  ctx <- ggml_init((4 * copies + 4) * ggml_tensor_overhead(), no_alloc = TRUE)
  x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K)
  ws <- lapply(seq_len(copies), function(i) ggml_new_tensor_2d(ctx, type, K, M))
  ys <- lapply(ws, function(w) ggml_mul_mat(ctx, w, x))
  # the products summed, so that one graph holds them all (the additions
  # of 4096 values are negligible beside the products)
  total <- Reduce(function(a, b) ggml_add(ctx, a, b), ys)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  set.seed(1)
  values <- rnorm(K * M)
  data <- if (type == GGML_TYPE_F32) values else ggml_quantize_chunk(type, values, M, K)
  for (w in ws) ggml_backend_tensor_set_data(w, data)
  ggml_backend_tensor_set_data(x, rnorm(K))
  if (together) {
    graph <- ggml_build_forward_expand(ctx, total)
    s <- time_it(function() ggml_backend_graph_compute(backend, graph), min_time) / copies
  } else {
    graphs <- lapply(ys, function(y) ggml_build_forward_expand(ctx, y))
    i <- 0
    s <- time_it(function() {
      i <<- i %% copies + 1
      ggml_backend_graph_compute(backend, graphs[[i]])
    }, min_time)
  }
  ggml_free(ctx)
  ggml_backend_free(backend)
  list(seconds = s, bytes = w_bytes, copies = copies)
}

cat(sprintf("quantized matrix-vector products, %d x %d weights, %d thread(s)\n", K, M, threads))
cat(sprintf("CPU: %s\n", sub(".*: ", "", grep("^model name", readLines("/proc/cpuinfo"), value = TRUE)[1])))
bw1 <- read_bandwidth_1()
bw <- read_bandwidth_engine(threads)
cp <- copy_bandwidth_engine(threads)
cat(sprintf("memory bandwidth, %d thread(s) in this process: plain copy %.1f GB/s (the engine's ggml_cpy of 128 MB of f32, bytes read + written), plain read %.1f GB/s (its ggml_sum of 256 MB of f32, bytes read); one stream's read %.1f GB/s (memcmp, 256 MB a pass)\n",
  threads, cp, bw, bw1))
cat("of_read: % of the plain read (the target's measure); of_copy: % of the plain copy\n\n")
types <- list(f32 = GGML_TYPE_F32, q8_0 = GGML_TYPE_Q8_0, q4_0 = GGML_TYPE_Q4_0, q4_K = GGML_TYPE_Q4_K)
res <- lapply(names(types), function(nm) {
  ty <- types[[nm]]
  info <- ggml_quant_block_info(ty)
  rb <- K / info$block_size * info$type_size
  m <- matvec_time(ty, rb)
  alone <- matvec_time(ty, rb, together = FALSE)
  data.frame(type = nm, weights_MB = round(m$bytes / 2^20, 1), copies = m$copies,
    ms = round(1e3 * m$seconds, 3), GB_per_s = round(m$bytes / m$seconds / 1e9, 2),
    ms_one_per_call = round(1e3 * alone$seconds, 3))
})
res <- do.call(rbind, res)
res$of_read <- sprintf("%.0f%%", 100 * res$GB_per_s / bw)
res$of_copy <- sprintf("%.0f%%", 100 * res$GB_per_s / cp)
res$speedup_over_f32 <- round(res$ms[res$type == "f32"] / res$ms, 2)
print(res, row.names = FALSE)
cat(sprintf("(ms: per product in a graph of `copies` products; ms_one_per_call: one product per compute call)\nload: %s\n",
  paste(readLines("/proc/loadavg"), collapse = "")))
