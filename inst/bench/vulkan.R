# The best Vulkan device beside the CPU backend, in the same run: upload and
# download bandwidth (64 MiB through the R API, so R's f64 <-> f32
# conversion is included on both sides), matmul GFLOP/s for f32 and f16 storage at
# n = 1024 and 4096, and the per-graph overhead (a one-node graph on 256
# floats: for Vulkan that is one queue submission and its wait).
# On a CPU-type Vulkan device (lavapipe) only a smoke run is made: n = 4096
# is skipped and each figure is a single timing.
suppressPackageStartupMessages(library(ggmlR))

if (!ggml_vulkan_available()) {
  cat("No Vulkan device (", utils::capture.output(ggml_vulkan_status())[1L], "): nothing to compare.\n", sep = "")
  quit(save = "no")
}
vk <- suppressMessages(ggml_backend_init_best())
cpu <- ggml_backend_cpu_init()
st <- ggml_vulkan_backend_stats(vk)
smoke <- st$device_type == "cpu"
cat(sprintf("Vulkan device %d: %s (%s)%s\n", st$device, st$name, st$device_type,
            if (smoke) " -- CPU-type device: smoke run (n = 4096 skipped, one timing each)" else ""))
reps <- if (smoke) 1L else 5L

timed <- function(f, reps) {
  f()
  t <- vapply(seq_len(reps), function(i) {
    t0 <- proc.time()[["elapsed"]]
    f()
    proc.time()[["elapsed"]] - t0
  }, numeric(1))
  max(stats::median(t), 1e-6)
}

bandwidth <- function(backend) {
  n <- 16 * 1024^2
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx))
  x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  on.exit(ggml_backend_buffer_free(buf), add = TRUE, after = FALSE)
  v <- runif(n)
  up <- timed(function() ggml_backend_tensor_set_data(x, v), reps)
  down <- timed(function() ggml_backend_tensor_get_data(x), reps)
  c(upload = n * 4 / up / 1e9, download = n * 4 / down / 1e9)
}

matmul_gflops <- function(backend, n, type) {
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx))
  a <- ggml_new_tensor_2d(ctx, type, n, n)
  b <- ggml_new_tensor_2d(ctx, type, n, n)
  y <- ggml_mul_mat(ctx, a, b)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  on.exit(ggml_backend_buffer_free(buf), add = TRUE, after = FALSE)
  ggml_backend_tensor_set_data(a, runif(n * n))
  ggml_backend_tensor_set_data(b, runif(n * n))
  g <- ggml_build_forward_expand(ctx, y)
  2 * n^3 / timed(function() ggml_backend_graph_compute(backend, g), reps) / 1e9
}

graph_overhead_us <- function(backend) {
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx))
  x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 256)
  y <- ggml_scale(ctx, x, 2)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  on.exit(ggml_backend_buffer_free(buf), add = TRUE, after = FALSE)
  g <- ggml_build_forward_expand(ctx, y)
  k <- if (smoke) 50L else 500L
  runs <<- runs + 2L * k   # a warm-up round, then the timed one
  1e6 * timed(function() for (i in seq_len(k)) ggml_backend_graph_compute(backend, g), 1L) / k
}
runs <- 0L

rows <- list()
add <- function(what, v, c) rows[[length(rows) + 1L]] <<- data.frame(
  measure = what, vulkan = signif(v, 4), cpu = signif(c, 4), `vulkan/cpu` = signif(v / c, 3), check.names = FALSE)
bv <- bandwidth(vk); bc <- bandwidth(cpu)
add("upload GB/s", bv[["upload"]], bc[["upload"]])
add("download GB/s", bv[["download"]], bc[["download"]])
for (n in if (smoke) 1024L else c(1024L, 4096L)) {
  for (ty in c(f32 = GGML_TYPE_F32, f16 = GGML_TYPE_F16)) {
    nm <- if (ty == GGML_TYPE_F32) "f32" else "f16"
    add(sprintf("matmul %d %s GFLOP/s", n, nm), matmul_gflops(vk, n, ty), matmul_gflops(cpu, n, ty))
  }
}
s0 <- ggml_vulkan_submission_count(vk)
ov <- graph_overhead_us(vk)
subs <- ggml_vulkan_submission_count(vk) - s0
vk_runs <- runs
add("graph overhead us (1 node)", ov, graph_overhead_us(cpu))
print(do.call(rbind, rows), row.names = FALSE)
cat(sprintf("(%d Vulkan queue submissions for %d graph runs in the overhead test)\n",
            as.integer(subs), vk_runs))
ggml_backend_free(vk)
ggml_backend_free(cpu)
