# ONNX inference latency on the CPU: the three architectures of
# tools/onnx-architectures.py (a CNN at 96x96, a transformer encoder block of
# 128 tokens x 256, a two-layer LSTM of 64 steps; random weights) exported
# at bench size, run by ggmlR and by onnxruntime (Python package
# `onnxruntime`, GGMLR_PYTHON chooses the Python) on the same files in the
# same run, at 1 and 2 threads. Each side warms up for 0.5 s, then times
# batches of runs and keeps the fastest batch, in GGMLR_BENCH_ROUNDS
# (default 3) rounds that alternate between the two (GGMLR_BENCH_ARCHS, a
# comma-separated list, picks some of the models). Prints ms per
# inference and the ratio ggmlR / onnxruntime, in wall time and, at 1
# thread, in CPU time (robust to other load on the machine).
suppressPackageStartupMessages(library(ggmlR))

python <- Sys.getenv("GGMLR_PYTHON", "python3")
# R's library path would let a shared-library Python load another libpython.
py <- function(args, ...) system2(python, args, env = "LD_LIBRARY_PATH=", ...)
batches <- as.integer(Sys.getenv("GGMLR_BENCH_BATCHES", "5"))
rounds <- as.integer(Sys.getenv("GGMLR_BENCH_ROUNDS", "3"))
tool <- "tools/onnx-architectures.py"
if (!file.exists(tool)) stop("run from the repository root (", tool, " not found)")
ok <- nzchar(Sys.which(python)) && identical(suppressWarnings(py(
  c("-c", shQuote("import torch, onnx, onnxruntime")), stdout = FALSE, stderr = FALSE)), 0L)
if (!ok) {
  cat("onnx bench: needs Python with torch, onnx and onnxruntime (GGMLR_PYTHON); skipped\n")
  quit(save = "no")
}
dir <- file.path(tempdir(), "onnx-bench")
status <- py(c(tool, dir, "--size", "bench"), stdout = FALSE, stderr = FALSE)
if (!identical(status, 0L)) stop("exporting the bench models failed")
archs <- strsplit(Sys.getenv("GGMLR_BENCH_ARCHS", "cnn,transformer,lstm"), ",")[[1]]
read_input <- function(a) {
  t <- ggmlR:::.onnx_read_tensor(file.path(dir, a, "input_0.pb.gz"))
  v <- t$value
  dim(v) <- t$shape
  v
}

ours <- function(arch, threads) {
  m <- onnx_load(file.path(dir, paste0(arch, ".onnx")), device = "cpu", n_threads = threads)
  x <- list(x = read_input(arch))
  run <- function() onnx_run(m, x)
  t0 <- proc.time()[["elapsed"]]
  while (proc.time()[["elapsed"]] - t0 < 0.5) run()
  once <- system.time(run())[["elapsed"]]
  per <- max(1L, as.integer(0.4 / max(once, 1e-3)))
  t <- vapply(seq_len(batches), function(i) {
    s <- system.time(for (j in seq_len(per)) run())
    c(s[["elapsed"]], s[["user.self"]] + s[["sys.self"]]) / per
  }, numeric(2))
  # Wall time, and the process's CPU time (which other processes on the
  # machine do not inflate: comparable at 1 thread).
  c(min(t[1, ]), min(t[2, ])) * 1000
}

py_script <- '
import gzip, sys, time
import numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
model, inp, threads, batches = sys.argv[1:5]
threads, batches = int(threads), int(batches)
o = ort.SessionOptions()
o.intra_op_num_threads = threads
o.inter_op_num_threads = 1
o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
t = onnx.TensorProto()
t.ParseFromString(gzip.open(inp, "rb").read())
x = {"x": numpy_helper.to_array(t)}
run = lambda: s.run(None, x)
t0 = time.perf_counter()
while time.perf_counter() - t0 < 0.5:
    run()
t0 = time.perf_counter(); run(); once = time.perf_counter() - t0
per = max(1, int(0.4 / max(once, 1e-3)))
ts, cs = [], []
for _ in range(batches):
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(per):
        run()
    ts.append((time.perf_counter() - t0) / per)
    cs.append((time.process_time() - c0) / per)
print(min(ts) * 1000, min(cs) * 1000)
'
py_file <- tempfile(fileext = ".py")
writeLines(py_script, py_file)
theirs <- function(arch, threads) {
  out <- py(c(py_file, file.path(dir, paste0(arch, ".onnx")), file.path(dir, arch, "input_0.pb.gz"),
               threads, batches), stdout = TRUE)
  as.numeric(strsplit(out[length(out)], " ")[[1]])
}

cat(sprintf("ONNX inference on the CPU, ms per inference (fastest of %d batches in each of %d alternating rounds)\n",
            batches, rounds))
cat("(wall: elapsed time; cpu: the process's CPU time, unaffected by other load, at 1 thread)\n")
cat(sprintf("%-12s %7s %10s %12s %8s %10s %12s %8s\n", "model", "threads", "ggmlR", "onnxruntime", "ratio",
            "cpu ggmlR", "cpu ort", "ratio"))
for (arch in archs) {
  for (threads in c(1L, 2L)) {
    a <- b <- c(Inf, Inf)
    for (r in seq_len(rounds)) {
      a <- pmin(a, ours(arch, threads))
      b <- pmin(b, theirs(arch, threads))
    }
    cpu <- if (threads == 1L) sprintf(" %10.2f %12.2f %8.2f", a[2], b[2], a[2] / b[2]) else ""
    cat(sprintf("%-12s %7d %10.2f %12.2f %8.2f%s\n", arch, threads, a[1], b[1], a[1] / b[1], cpu))
  }
}
