# ncnn inference over ncnn's 35 benchmark networks (random weights), 1 and
# 2 threads, side by side with the real ncnn (Python package `ncnn`, which
# must be importable; GGMLR_PYTHON chooses the Python) on the same files in
# the same run, and the cost of getting an image array in and out of R next
# to ncnn's Python binding doing the same with numpy.
#
# The networks come from GGMLR_NCNN_BENCH_DIR (made by
# tools/ncnn_bench_fixtures.py); unset, they are made into a temporary
# folder from the params in GGMLR_NCNN_BENCHMARK_PARAMS (default
# ../shared/ncnn-benchmark) with --quick (random weights, not normalised:
# as good for timing). GGMLR_BENCH_NETS limits the nets (comma-separated).
#
# Both sides compute in fp32 (int8 for the *_int8 nets), light mode on, and
# time what benchncnn times: a new extractor, the input, the extraction of
# the output. Each measure warms up, then times batches of runs and keeps
# the fastest batch, in GGMLR_BENCH_ROUNDS (default 2) rounds alternating
# between the two sides (robust on a busy machine: both get the same
# chances of a quiet moment). Prints ms per inference and ggmlR / ncnn; the
# geometric mean and the worst network per thread count close the table.
suppressPackageStartupMessages(library(ggmlR))

python <- Sys.getenv("GGMLR_PYTHON", "python3")
# Python run without R's library path (with it, some Pythons lose their
# site-packages).
py <- function(args, ...) {
  old <- Sys.getenv("LD_LIBRARY_PATH", NA)
  Sys.unsetenv("LD_LIBRARY_PATH")
  on.exit(if (!is.na(old)) Sys.setenv(LD_LIBRARY_PATH = old))
  system2(python, args, ...)
}
has_ncnn <- nzchar(Sys.which(python)) &&
  identical(suppressWarnings(py(c("-c", shQuote("import ncnn")), stdout = FALSE, stderr = FALSE)), 0L)
if (!has_ncnn) stop("the Python package 'ncnn' is not importable with ", python, ": no reference to compare with")

dir <- Sys.getenv("GGMLR_NCNN_BENCH_DIR", "")
if (!nzchar(dir)) {
  src <- Sys.getenv("GGMLR_NCNN_BENCHMARK_PARAMS", "../shared/ncnn-benchmark")
  tool <- "tools/ncnn_bench_fixtures.py"
  if (!dir.exists(src) || !file.exists(tool)) stop("run from the repository root, with the benchmark params in ", src)
  dir <- file.path(tempdir(), "ncnn-bench")
  cat("making the networks' random weights in", dir, "\n")
  status <- py(c(tool, shQuote(src), shQuote(dir), "--quick"), stdout = FALSE)
  if (status != 0) stop("tools/ncnn_bench_fixtures.py failed")
}
manifest <- utils::read.delim(file.path(dir, "bench.tsv"), stringsAsFactors = FALSE)
only <- Sys.getenv("GGMLR_BENCH_NETS", "")
if (nzchar(only)) manifest <- manifest[manifest$net %in% strsplit(only, ",")[[1]], ]
rounds <- as.integer(Sys.getenv("GGMLR_BENCH_ROUNDS", "2"))
batches <- as.integer(Sys.getenv("GGMLR_BENCH_BATCHES", "5"))
threads <- c(1L, 2L)

# "name:w,h,c;..." -> list(name, dim)
first_blob <- function(s) {
  b <- strsplit(s, ";", fixed = TRUE)[[1]][1]
  at <- regexpr(":[^:]*$", b)
  list(name = substr(b, 1L, at - 1L), dim = as.integer(strsplit(substring(b, at + 1L), ",", fixed = TRUE)[[1]]))
}

# Fastest batch time (ms per run) of f(): warm up, then batches of about 0.2 s.
time_ms <- function(f) {
  t0 <- proc.time()[["elapsed"]]
  f()
  while (proc.time()[["elapsed"]] - t0 < 0.3) f()
  once <- system.time(f())[["elapsed"]]
  per <- max(1L, as.integer(0.2 / max(once, 1e-3)))
  min(vapply(seq_len(batches), function(i) system.time(for (j in seq_len(per)) f())[["elapsed"]] / per, 0)) * 1000
}

ours <- function(row, t) {
  inp <- first_blob(row$inputs)
  out <- first_blob(row$outputs)
  net <- ncnn_net(num_threads = t)
  net$load_param(file.path(dir, paste0(row$net, ".param")))
  net$load_model(file.path(dir, paste0(row$net, ".bin")))
  x <- array(runif(prod(inp$dim), -1, 1), inp$dim)
  time_ms(function() {
    ex <- net$create_extractor()
    ex$input(inp$name, x)
    ex$extract(out$name)
  })
}

py_script <- '
import sys, time, os
import numpy as np, ncnn
d, name, inp, out, w, h, c, int8, batches = sys.argv[1:10]
w, h, c, int8, batches = int(w), int(h), int(c), int(int8), int(batches)
x = np.random.default_rng(1).uniform(-1, 1, (c, h, w)).astype(np.float32)
def time_ms(f):
    t0 = time.perf_counter(); f()
    while time.perf_counter() - t0 < 0.3: f()
    t0 = time.perf_counter(); f(); once = time.perf_counter() - t0
    per = max(1, int(0.2 / max(once, 1e-3)))
    ts = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(per): f()
        ts.append((time.perf_counter() - t0) / per)
    return min(ts) * 1000
for t in sys.argv[10:]:
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = int(t)
    for k in ["use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage", "use_bf16_packed"]:
        setattr(net.opt, k, False)
    net.opt.use_int8_inference = bool(int8)
    assert net.load_param(os.path.join(d, name + ".param")) == 0
    assert net.load_model(os.path.join(d, name + ".bin")) == 0
    m = ncnn.Mat(x)
    def run():
        ex = net.create_extractor()
        ex.input(inp, m)
        ex.extract(out)
    print(t, time_ms(run), flush=True)
    del net
'
py_file <- tempfile(fileext = ".py")
writeLines(py_script, py_file)

theirs <- function(row) {
  inp <- first_blob(row$inputs)
  out <- first_blob(row$outputs)
  d3 <- c(inp$dim, 1L, 1L)[1:3]
  res <- py(c(py_file, shQuote(dir), shQuote(row$net), shQuote(inp$name), shQuote(out$name),
    d3[1], d3[2], d3[3], as.integer(row$weights == "int8"), batches, threads), stdout = TRUE)
  v <- do.call(rbind, lapply(strsplit(res, " "), as.numeric))
  stats::setNames(v[, 2], v[, 1])
}

cat(sprintf("ncnn inference, ms per run (fastest batch of %d in each of %d alternating rounds)\n", batches, rounds))
cat(sprintf("%-20s %4s %10s %10s %7s   %4s %10s %10s %7s\n", "net", "thr", "ggmlR", "ncnn", "ratio", "thr", "ggmlR", "ncnn", "ratio"))
ratio <- matrix(NA_real_, nrow(manifest), length(threads), dimnames = list(manifest$net, threads))
for (k in seq_len(nrow(manifest))) {
  row <- manifest[k, ]
  a <- b <- stats::setNames(rep(Inf, length(threads)), threads)
  for (r in seq_len(rounds)) {
    for (t in threads) a[as.character(t)] <- min(a[as.character(t)], ours(row, t))
    b <- pmin(b, theirs(row)[as.character(threads)])
    gc(verbose = FALSE)
  }
  ratio[k, ] <- a / b
  cat(sprintf("%-20s", row$net))
  for (i in seq_along(threads)) cat(sprintf(" %4d %10.2f %10.2f %7.2f  ", threads[i], a[i], b[i], a[i] / b[i]))
  cat("\n")
}
for (i in seq_along(threads)) {
  r <- ratio[, i]
  cat(sprintf("%d thread(s): geometric mean ggmlR / ncnn %.2f over %d nets; worst %.2f (%s); best %.2f (%s)\n",
    threads[i], exp(mean(log(r))), length(r), max(r), names(r)[which.max(r)], min(r), names(r)[which.min(r)]))
}

# An image array into and out of R (or numpy): input a blob, extract it
# again (no layer runs), next to ncnn's Python binding with numpy arrays.
conv_script <- '
import sys, time
import numpy as np, ncnn
net = ncnn.Net()
net.opt.use_vulkan_compute = False
assert net.load_param_mem("7767517\\n2 2\\nInput data 0 1 data\\nNoop n 1 1 data out\\n") == 0
net.load_model_mem(b"")
for s in [int(v) for v in sys.argv[1:]]:
    x = np.random.default_rng(1).uniform(-1, 1, (3, s, s)).astype(np.float32)
    def run():
        ex = net.create_extractor()
        ex.input("data", ncnn.Mat(x))
        ret, m = ex.extract("data")
        return np.array(m)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.3: run()
    best = 1e9
    for _ in range(7):
        n = 200 if s < 256 else 20
        t0 = time.perf_counter()
        for _ in range(n): run()
        best = min(best, (time.perf_counter() - t0) / n)
    print(s, best * 1000, flush=True)
'
conv_file <- tempfile(fileext = ".py")
writeLines(conv_script, conv_file)
net <- ncnn_net(num_threads = 1)
net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nNoop n 1 1 data out\n")
net$load_model(ncnn_datareader_empty())
sizes <- c(128L, 512L)
cat("\nimage array in and out (input the blob, extract it), ms\n")
cat(sprintf("%-12s %10s %10s %7s\n", "size", "ggmlR", "ncnn", "ratio"))
for (s in sizes) {
  x <- array(runif(3 * s * s, -1, 1), c(s, s, 3))
  a <- b <- Inf
  for (r in seq_len(rounds)) {
    a <- min(a, time_ms(function() {
      ex <- net$create_extractor()
      ex$input("data", x)
      ex$extract("data")
    }))
    out <- py(c(conv_file, s), stdout = TRUE)
    b <- min(b, as.numeric(strsplit(out[length(out)], " ")[[1]][2]))
  }
  cat(sprintf("%-12s %10.3f %10.3f %7.2f\n", sprintf("3x%dx%d", s, s), a, b, a / b))
}
