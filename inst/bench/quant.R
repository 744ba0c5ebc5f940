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
# the read one is the target's. The f32 product is a plain read too (one
# multiply-add per 4 bytes read), and where it reads faster than the sum
# (whose f64 additions can be the limit) it is the read reference: the
# read figure is the faster of the two. One stream's read (identical() of two
# distinct raw vectors: one memcmp, reading both) is printed too. An
# R-level copy is not used: it allocates a fresh vector each time and
# measures page faults rather than memory. Each type cycles through as many
# copies of the weights as make 256 MB, the plain read's size, so that the
# products and the references read the same amount from the same level of
# memory (a virtual machine may report a last-level cache larger than the
# share it gets of it: with 96 MB of weights, as before, the f32 product
# read "faster than memory" on one). Every measurement is set up once and
# timed in each of ROUNDS rounds (5 unless set), which interleave the
# references and the products so that a burst of other load slows them
# alike; the fastest round counts.
# Run with `make bench` or `Rscript inst/bench/quant.R` (THREADS=n to change
# the 2 threads, ROUNDS=n the 5 rounds, MIN_TIME=s the 1 second a round).
suppressPackageStartupMessages(library(ggmlR))
options(width = 200)

K <- 4096
M <- 4096
threads <- as.integer(Sys.getenv("THREADS", "2"))
min_time <- as.numeric(Sys.getenv("MIN_TIME", "1")) # seconds of repeated runs per measurement and round
rounds <- as.integer(Sys.getenv("ROUNDS", "5"))
cache_bytes <- 256 * 2^20 # weights read per cycle of copies: the plain read's bytes

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

# A CPU backend with `threads` threads and a context for `n` tensors.
cpu_setup <- function(n) {
  backend <- ggml_backend_cpu_init()
  ggml_backend_cpu_set_n_threads(backend, threads)
  list(backend = backend, ctx = ggml_init(n * ggml_tensor_overhead(), no_alloc = TRUE))
}

# A measurement of `graph` on `s`: $time() gives seconds per `per` (the
# compute call divided by `per`), checked by `check`; $bytes the bytes
# counted per `per`.
measurement <- function(s, graph, bytes, per = 1, check = function() TRUE) {
  list(bytes = bytes, time = function() {
    t <- time_it(function() ggml_backend_graph_compute(s$backend, graph), min_time) / per
    stopifnot(check())
    t
  })
}

# The plain read: the engine's ggml_sum() of a 256 MB f32 tensor (each
# thread sums its own chunks), bytes read.
plain_read <- function() {
  n <- 2^26
  s <- cpu_setup(4)
  a <- ggml_new_tensor_1d(s$ctx, GGML_TYPE_F32, n)
  y <- ggml_sum(s$ctx, a)
  s$buf <- ggml_backend_alloc_ctx_tensors(s$ctx, s$backend)
  ggml_backend_tensor_set_data(a, rep_len(c(0.5, -0.25, 1, 2), n))
  measurement(s, ggml_build_forward_expand(s$ctx, y), 4 * n, check = function() ggml_backend_tensor_get_data(y) == n / 4 * 3.25)
}

# The plain copy: the engine's ggml_cpy() of a 128 MB f32 tensor into
# another (the threads copy their own parts), bytes read plus written.
plain_copy <- function() {
  n <- 2^25
  s <- cpu_setup(4)
  a <- ggml_new_tensor_1d(s$ctx, GGML_TYPE_F32, n)
  b <- ggml_new_tensor_1d(s$ctx, GGML_TYPE_F32, n)
  y <- ggml_cpy(s$ctx, a, b)
  s$buf <- ggml_backend_alloc_ctx_tensors(s$ctx, s$backend)
  ggml_backend_tensor_set_data(a, rep_len(c(0.5, -0.25, 1, 2), n))
  measurement(s, ggml_build_forward_expand(s$ctx, y), 2 * 4 * n,
    check = function() identical(ggml_backend_tensor_get_data(b)[n - 3:0], c(0.5, -0.25, 1, 2)))
}

# Matrix-vector products of `type` weights, cycling through enough copies
# of the weights to leave the caches: `together`, one graph holds a product
# of each copy, summed (one compute call reads them all, 256 MB, as
# the reference's call reads 256 MB; the additions of 4096 values are
# negligible beside the products); `alone`, one product per call (R's call
# and the graph's set-up then count too).
products <- function(type) {
  info <- ggml_quant_block_info(type)
  w_bytes <- M * K / info$block_size * info$type_size
  copies <- max(1, ceiling(cache_bytes / w_bytes))
  s <- cpu_setup(4 * copies + 4)
  x <- ggml_new_tensor_1d(s$ctx, GGML_TYPE_F32, K)
  ws <- lapply(seq_len(copies), function(i) ggml_new_tensor_2d(s$ctx, type, K, M))
  ys <- lapply(ws, function(w) ggml_mul_mat(s$ctx, w, x))
  total <- Reduce(function(a, b) ggml_add(s$ctx, a, b), ys)
  s$buf <- ggml_backend_alloc_ctx_tensors(s$ctx, s$backend)
  set.seed(1)
  values <- rnorm(K * M)
  data <- if (type == GGML_TYPE_F32) values else ggml_quantize_chunk(type, values, M, K)
  for (w in ws) ggml_backend_tensor_set_data(w, data)
  ggml_backend_tensor_set_data(x, rnorm(K))
  graphs <- lapply(ys, function(y) ggml_build_forward_expand(s$ctx, y))
  i <- 0
  alone <- list(bytes = w_bytes, time = function() {
    time_it(function() {
      i <<- i %% copies + 1
      ggml_backend_graph_compute(s$backend, graphs[[i]])
    }, min_time)
  })
  list(together = measurement(s, ggml_build_forward_expand(s$ctx, total), w_bytes, per = copies),
    alone = alone, copies = copies, bytes = w_bytes)
}

cat(sprintf("quantized matrix-vector products, %d x %d weights, %d thread(s)\n", K, M, threads))
cat(sprintf("CPU: %s\n", sub(".*: ", "", grep("^model name", readLines("/proc/cpuinfo"), value = TRUE)[1])))
bw1 <- read_bandwidth_1()
types <- list(f32 = GGML_TYPE_F32, q8_0 = GGML_TYPE_Q8_0, q4_0 = GGML_TYPE_Q4_0, q4_K = GGML_TYPE_Q4_K)
prods <- lapply(types, products)
refs <- list(read = plain_read(), copy = plain_copy())
items <- c(refs, unlist(lapply(names(prods), function(nm) {
  setNames(prods[[nm]][c("together", "alone")], paste(nm, c("together", "alone")))
}), recursive = FALSE))
best <- setNames(rep(Inf, length(items)), names(items))
for (r in seq_len(rounds)) {
  for (nm in names(items)) best[[nm]] <- min(best[[nm]], items[[nm]]$time())
}
bw_sum <- refs$read$bytes / best[["read"]] / 1e9
bw_f32 <- prods$f32$bytes / best[["f32 together"]] / 1e9
bw <- max(bw_sum, bw_f32)
cp <- refs$copy$bytes / best[["copy"]] / 1e9
cat(sprintf("memory bandwidth, %d thread(s) in this process: plain copy %.1f GB/s (the engine's ggml_cpy of 128 MB of f32, bytes read + written), plain read %.1f GB/s (the faster of its ggml_sum of 256 MB of f32, %.1f GB/s, and the f32 product, %.1f GB/s; bytes read); one stream's read %.1f GB/s (memcmp, 256 MB a pass)\n",
  threads, cp, bw, bw_sum, bw_f32, bw1))
cat(sprintf("best of %d interleaved rounds; of_read: %% of the plain read (the target's measure); of_copy: %% of the plain copy\n\n", rounds))
res <- do.call(rbind, lapply(names(types), function(nm) {
  p <- prods[[nm]]
  s <- best[[paste(nm, "together")]]
  data.frame(type = nm, weights_MB = round(p$bytes / 2^20, 1), copies = p$copies,
    ms = round(1e3 * s, 3), GB_per_s = round(p$bytes / s / 1e9, 2),
    ms_one_per_call = round(1e3 * best[[paste(nm, "alone")]], 3))
}))
res$of_read <- sprintf("%.0f%%", 100 * res$GB_per_s / bw)
res$of_copy <- sprintf("%.0f%%", 100 * res$GB_per_s / cp)
res$speedup_over_f32 <- round(res$ms[res$type == "f32"] / res$ms, 2)
print(res, row.names = FALSE)
cat(sprintf("(ms: per product in a graph of `copies` products; ms_one_per_call: one product per compute call)\nload: %s\n",
  paste(readLines("/proc/loadavg"), collapse = "")))
