# Training-step time of two MLPs (forward, backward, Adam) with the ag_* API,
# on "cpu" and "gpu", and the same steps in PyTorch on the CPU when
# `python3 -c "import torch"` works. Prints milliseconds per step and the
# ratio PyTorch / ggmlR (> 1: ggmlR is faster). Each figure is the median
# of 5 timed rounds; on a busy machine, run it twice.
# On a machine shared with other work, real-time scheduling (as root:
# `chrt -f 1 Rscript ...`, inherited by the Python reference) keeps the
# other processes off the cores while it runs, so that two threads get two
# cores; the ratios are then those of a quiet machine.
suppressPackageStartupMessages(library(ggmlR))

sizes <- list(
  list(name = "128-128-10, batch 64", d_in = 128L, d_h = 128L, d_out = 10L, batch = 64L, steps = 300L),
  list(name = "512-256-10, batch 512", d_in = 512L, d_h = 256L, d_out = 10L, batch = 512L, steps = 100L)
)

step_time_ggmlr <- function(s, device) {
  old <- ag_device(device)
  on.exit(ag_device(old))
  set.seed(1)
  model <- ag_sequential(ag_linear(s$d_in, s$d_h, "relu"), ag_linear(s$d_h, s$d_out))
  opt <- optimizer_adam(model$parameters(), lr = 1e-3)
  x <- ag_tensor(matrix(rnorm(s$d_in * s$batch), s$d_in, s$batch))
  y <- sample.int(s$d_out, s$batch, replace = TRUE) - 1L
  step <- function() {
    with_grad_tape(loss <- ag_softmax_cross_entropy_loss(model$forward(x), y))
    opt$step(backward(loss))
    opt$zero_grad()
  }
  # A slow device (a CPU-type Vulkan driver such as lavapipe) gets a smoke
  # run: the median of 3 steps after one warm-up step.
  t0 <- proc.time()[["elapsed"]]
  step()
  if (proc.time()[["elapsed"]] - t0 > 0.05) {
    per <- vapply(1:3, function(i) system.time(step())[["elapsed"]], numeric(1))
    return(median(per) * 1000)
  }
  # Warm-up long enough for R to have collected garbage once: until then
  # every step's results (kept by R until it collects them) take fresh
  # memory from the kernel, which is not the steady state of a training run.
  for (i in 1:max(10L, s$steps %/% 2L)) step()
  reps <- 5L
  per <- numeric(reps)
  for (r in seq_len(reps)) {
    t0 <- proc.time()[["elapsed"]]
    for (i in seq_len(s$steps %/% reps)) step()
    per[r] <- (proc.time()[["elapsed"]] - t0) / (s$steps %/% reps)
  }
  median(per) * 1000
}

# R's LD_LIBRARY_PATH can make python3 load another libpython (and miss its
# site-packages), so python3 runs without it.
py <- function(..., stdout = TRUE) {
  suppressWarnings(system2("env", c("-u", "LD_LIBRARY_PATH", "python3", ...),
                           stdout = stdout, stderr = FALSE))
}
torch_ok <- nzchar(Sys.which("python3")) &&
  isTRUE(py("-c", shQuote("import torch"), stdout = FALSE) == 0)
py_out <- function(...) py(...)

step_time_torch <- function(s, threads = 0L, dtype = "float32") {
  py <- sprintf('
import time, torch
if %d > 0: torch.set_num_threads(%d)
torch.set_default_dtype(torch.%s)
torch.manual_seed(1)
m = torch.nn.Sequential(torch.nn.Linear(%d, %d), torch.nn.ReLU(), torch.nn.Linear(%d, %d))
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
x = torch.randn(%d, %d); y = torch.randint(0, %d, (%d,))
lf = torch.nn.CrossEntropyLoss()
def step():
    opt.zero_grad(); loss = lf(m(x), y); loss.backward(); opt.step()
for _ in range(max(10, %d // 2)): step()
reps, n = 5, %d // 5
per = []
for _ in range(reps):
    t0 = time.perf_counter()
    for _ in range(n): step()
    per.append((time.perf_counter() - t0) / n)
per.sort(); print(per[len(per) // 2] * 1000)
', threads, threads, dtype, s$d_in, s$d_h, s$d_h, s$d_out, s$batch, s$d_in, s$d_out, s$batch, s$steps, s$steps)
  f <- tempfile(fileext = ".py")
  writeLines(py, f)
  on.exit(unlink(f))
  as.numeric(tail(py_out(f), 1L))
}

threads <- c(1L, 2L)
# Threads of both devices: the host's (device "cpu") and, when device "gpu"
# is the CPU backend, that backend's.
set_threads <- function(n) {
  ggml_set_n_threads(n)
  old <- ag_device("gpu")
  on.exit(ag_device(old))
  be <- ggmlR:::.ag_device_state$backend
  if (grepl("^CPU", ggml_backend_name(be))) ggml_backend_cpu_set_n_threads(be, n)
}

cat("ggmlR autograd training step (forward + backward + Adam), median ms per step\n")
be <- local({ old <- ag_device("gpu"); on.exit(ag_device(old)); ggml_backend_name(ggmlR:::.ag_device_state$backend) })
cat(sprintf("device \"cpu\": f64 on the host; device \"gpu\": ggml graphs on backend %s (f32), weights resident\n", be))
if (torch_ok) {
  cat(sprintf("PyTorch %s on the CPU in float32 and float64 with the same number of threads; ratio torch/ggmlR > 1: ggmlR ahead\n",
              py_out("-c", shQuote("import torch; print(torch.__version__)"))))
} else {
  cat("PyTorch comparison skipped: python3 cannot import torch\n")
}
cat(sprintf("load average %s\n", paste(scan("/proc/loadavg", what = "", n = 3, quiet = TRUE), collapse = " ")))
for (s in sizes) {
  for (nth in threads) {
    set_threads(nth)
    cpu <- step_time_ggmlr(s, "cpu")
    gpu <- step_time_ggmlr(s, "gpu")
    line <- sprintf("%-22s %d thread(s): cpu (f64) %8.3f ms   gpu (f32) %8.3f ms", s$name, nth, cpu, gpu)
    if (torch_ok) {
      t32 <- step_time_torch(s, nth)
      t64 <- step_time_torch(s, nth, dtype = "float64")
      line <- paste0(line, sprintf("\n%22s torch f32 %8.3f ms  torch f32/gpu %.2fx   torch f64 %8.3f ms  torch f64/cpu %.2fx",
                                   "", t32, t32 / gpu, t64, t64 / cpu))
    }
    cat(line, "\n")
  }
}
cat(sprintf("load average %s\n", paste(scan("/proc/loadavg", what = "", n = 3, quiet = TRUE), collapse = " ")))
