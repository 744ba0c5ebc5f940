# ncnn inference latency: the three fixture architectures (random weights) at
# 224x224 input, 1 and 2 threads, next to the real ncnn (Python package
# `ncnn`) on the same files in the same run when it is importable (set
# GGMLR_PYTHON to choose the Python). Both sides warm up for 0.5 s, then time
# batches of runs and keep the fastest batch (robust on a busy machine), in
# GGMLR_BENCH_ROUNDS (default 3) rounds that alternate between the two.
# Prints ms per inference and the ratio ggmlR / ncnn.
suppressPackageStartupMessages(library(ggmlR))

dir <- Sys.getenv("GGMLR_NCNN_FIXTURES", "tests/testthat/fixtures/ncnn")
if (!dir.exists(dir)) stop("run from the repository root (fixtures not found in ", dir, ")")
batches <- as.integer(Sys.getenv("GGMLR_BENCH_BATCHES", "7"))
size <- as.integer(Sys.getenv("GGMLR_BENCH_SIZE", "224"))
archs <- c("arch_squeezenet", "arch_mobilenet", "arch_resnet")

set.seed(1)
x <- array(runif(size * size * 3, -1, 1), c(size, size, 3))
input_file <- tempfile(fileext = ".f32")
writeBin(as.vector(x), input_file, size = 4L, endian = "little")

ours <- function(arch, threads) {
  net <- ncnn_net(num_threads = threads)
  net$load_param(file.path(dir, paste0(arch, ".param")))
  net$load_model(file.path(dir, paste0(arch, ".bin")))
  run <- function() {
    ex <- net$create_extractor()
    ex$input("data", x)
    ex$extract("prob")
  }
  # warm up (caches, buffers, a clocked-down core) for about 0.5 s
  t0 <- proc.time()[["elapsed"]]
  while (proc.time()[["elapsed"]] - t0 < 0.5) run()
  # runs per batch: enough for about 0.2 s
  once <- system.time(run())[["elapsed"]]
  per <- max(1L, as.integer(0.2 / max(once, 1e-3)))
  t <- vapply(seq_len(batches), function(i) {
    system.time(for (j in seq_len(per)) run())[["elapsed"]] / per
  }, numeric(1))
  min(t) * 1000
}

python <- Sys.getenv("GGMLR_PYTHON", "python3")
has_ncnn <- nzchar(Sys.which(python)) &&
  identical(suppressWarnings(system2(python, c("-c", shQuote("import ncnn")), stdout = FALSE, stderr = FALSE)), 0L)

py_script <- '
import sys, time
import numpy as np, ncnn
param, model, inp, size, threads, batches = sys.argv[1:7]
size, threads, batches = int(size), int(threads), int(batches)
net = ncnn.Net()
net.opt.use_vulkan_compute = False
net.opt.num_threads = threads
for k in ["use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"]:
    setattr(net.opt, k, False)
assert net.load_param(param) == 0 and net.load_model(model) == 0
x = np.fromfile(inp, dtype="<f4").reshape(3, size, size).copy()
def run():
    ex = net.create_extractor()
    m = ncnn.Mat(x)
    ex.input("data", m)
    ret, out = ex.extract("prob")
    return np.array(out)
t0 = time.perf_counter()
while time.perf_counter() - t0 < 0.5:
    run()
t0 = time.perf_counter(); run(); once = time.perf_counter() - t0
per = max(1, int(0.2 / max(once, 1e-3)))
ts = []
for _ in range(batches):
    t0 = time.perf_counter()
    for _ in range(per):
        run()
    ts.append((time.perf_counter() - t0) / per)
print(min(ts) * 1000)
'
py_file <- tempfile(fileext = ".py")
writeLines(py_script, py_file)

theirs <- function(arch, threads) {
  out <- system2(python, c(py_file, file.path(dir, paste0(arch, c(".param", ".bin"))),
    input_file, size, threads, batches), stdout = TRUE)
  as.numeric(out[length(out)])
}

# The machine's speed can drift over seconds (other processes, clocks), so
# the two sides alternate in rounds and each keeps its fastest batch over
# all rounds: both get the same chances of a quiet moment.
rounds <- as.integer(Sys.getenv("GGMLR_BENCH_ROUNDS", "3"))
cat(sprintf("ncnn inference, %dx%d input, ms per inference (fastest of %d batches in each of %d alternating rounds)\n",
            size, size, batches, rounds))
if (!has_ncnn) cat("(the Python package 'ncnn' is not importable: no reference column)\n")
cat(sprintf("%-16s %7s %10s %10s %8s\n", "arch", "threads", "ggmlR", "ncnn", "ratio"))
for (arch in archs) {
  for (threads in c(1L, 2L)) {
    a <- b <- Inf
    for (r in seq_len(rounds)) {
      a <- min(a, ours(arch, threads))
      b <- if (has_ncnn) min(b, theirs(arch, threads)) else NA_real_
    }
    cat(sprintf("%-16s %7d %10.2f %10.2f %8.2f\n", sub("arch_", "", arch), threads, a, b, a / b))
  }
}
