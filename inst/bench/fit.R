# Time per training epoch of ggml_fit() on the CPU backend for two models,
# and of the same models and loop in PyTorch on the CPU in the same run when
# `python3 -c "import torch"` works:
#   * dense 784-256-10 (relu, softmax), batch 128, 2560 samples;
#   * a small CNN on 28x28x1 images: conv 8 3x3 relu, conv 16 3x3 relu,
#     max pooling 2x2, dense 10 softmax; batch 64, 640 samples.
# Both use Adam (lr 0.001) and categorical cross-entropy, shuffle every epoch
# and compute the epoch's loss and accuracy, as ggml_fit() does. Each figure
# is the median of 5 epochs after a warm-up epoch; the ratio is PyTorch's
# time over ggmlR's (> 1: ggmlR is faster). On a busy machine, run it twice.
suppressPackageStartupMessages(library(ggmlR))

py <- function(..., stdout = TRUE) {
  # R's LD_LIBRARY_PATH can make python3 load another libpython.
  suppressWarnings(system2("env", c("-u", "LD_LIBRARY_PATH", "python3", ...), stdout = stdout, stderr = FALSE))
}
torch_ok <- nzchar(Sys.which("python3")) && isTRUE(py("-c", shQuote("import torch"), stdout = FALSE) == 0)

models <- list(
  dense = list(
    name = "dense 784-256-10, batch 128", n = 2560L, batch = 128L, shape = 784L,
    build = function() ggml_model_sequential() |>
      ggml_layer_dense(256, activation = "relu", input_shape = 784) |>
      ggml_layer_dense(10, activation = "softmax"),
    torch = "torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))"),
  cnn = list(
    name = "CNN 28x28x1, batch 64", n = 640L, batch = 64L, shape = c(28L, 28L, 1L),
    build = function() ggml_model_sequential() |>
      ggml_layer_conv_2d(8, c(3, 3), activation = "relu", input_shape = c(28, 28, 1)) |>
      ggml_layer_conv_2d(16, c(3, 3), activation = "relu") |>
      ggml_layer_max_pooling_2d(c(2, 2)) |>
      ggml_layer_flatten() |>
      ggml_layer_dense(10, activation = "softmax"),
    torch = paste("torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3),",
                  "torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(16 * 12 * 12, 10))"))
)

epoch_ggmlr <- function(s) {
  set.seed(1)
  x <- array(runif(s$n * prod(s$shape)), c(s$n, s$shape))
  y <- diag(10)[sample.int(10, s$n, replace = TRUE), ]
  m <- ggml_compile(s$build(), optimizer = "adam", loss = "categorical_crossentropy", backend = "cpu")
  m <- ggml_fit(m, x, y, epochs = 1, batch_size = s$batch, verbose = 0)
  per <- vapply(1:5, function(i) {
    system.time(m <<- ggml_fit(m, x, y, epochs = 1, batch_size = s$batch, verbose = 0))[["elapsed"]]
  }, numeric(1))
  median(per) * 1000
}

epoch_torch <- function(s, threads = 0L) {
  shp <- if (length(s$shape) == 3L) sprintf("%d, %d, %d", s$shape[3], s$shape[1], s$shape[2]) else s$shape
  code <- sprintf('
import time, torch
if %d > 0: torch.set_num_threads(%d)
torch.manual_seed(1)
m = %s
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
lf = torch.nn.CrossEntropyLoss()
n, b = %d, %d
x = torch.rand(n, %s); y = torch.randint(0, 10, (n,))
def epoch():
    perm = torch.randperm(n); tot = 0.0; correct = 0
    for i in range(0, n, b):
        idx = perm[i:i + b]
        opt.zero_grad(); out = m(x[idx]); loss = lf(out, y[idx]); loss.backward(); opt.step()
        tot += loss.item() * len(idx); correct += (out.argmax(1) == y[idx]).sum().item()
    return tot / n, correct / n
epoch()
per = []
for _ in range(5):
    t0 = time.perf_counter(); epoch(); per.append(time.perf_counter() - t0)
per.sort(); print(per[2] * 1000)
', threads, threads, s$torch, s$n, s$batch, shp)
  f <- tempfile(fileext = ".py")
  writeLines(code, f)
  on.exit(unlink(f))
  as.numeric(tail(py(f), 1L))
}

cat("ggml_fit() on the CPU backend: median ms per epoch (and per step)\n")
if (torch_ok) {
  cat(sprintf("PyTorch %s on the CPU, float32, default threads and 1 thread, same models and loop\n",
              py("-c", shQuote("import torch; print(torch.__version__)"))))
} else {
  cat("PyTorch comparison skipped: python3 cannot import torch\n")
}
for (s in models) {
  steps <- ceiling(s$n / s$batch)
  g <- epoch_ggmlr(s)
  line <- sprintf("%-28s ggmlR %8.1f ms (%6.2f ms/step)", s$name, g, g / steps)
  if (torch_ok) {
    t <- epoch_torch(s)
    t1 <- epoch_torch(s, 1L)
    line <- paste0(line, sprintf("\n%28s torch %8.1f ms (1 thread %8.1f ms)   torch/ggmlR %.2fx (1 thread %.2fx)",
                                 "", t, t1, t / g, t1 / g))
  }
  cat(line, "\n")
}
