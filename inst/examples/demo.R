# ggmlR demo: train an iris classifier with the autograd API.
suppressPackageStartupMessages(library(ggmlR))
cat("ggmlR engine", ggml_version(), "| backend devices:", ggml_backend_dev_count(),
    "| Vulkan:", ggml_vulkan_status(), "\n")

# Train on the best device: "gpu" is the best backend (Vulkan when present,
# else the CPU backend); "cpu" computes in double precision on the host.
device <- if (ggml_vulkan_available()) "gpu" else "cpu"
ag_device(device)
cat("training on device", shQuote(ag_default_device()), "\n\n")

# Data: features standardised with the training split's statistics, samples
# as columns ([features, batch]).
set.seed(1)
X <- as.matrix(iris[, 1:4])
y <- as.integer(iris$Species) - 1L
train <- unlist(lapply(split(seq_len(150), iris$Species), function(i) sample(i, 40)))
valid <- setdiff(seq_len(150), train)
mu <- colMeans(X[train, ])
s <- apply(X[train, ], 2, sd)
x <- t(sweep(sweep(X, 2, mu), 2, s, "/"))

# 4-64-32-3 with batch norm and dropout, Adam, batch 32.
relu <- list(forward = ag_relu, name = "relu")
model <- ag_sequential(
  ag_linear(4, 64), ag_batch_norm(64), relu, ag_dropout(0.3),
  ag_linear(64, 32), ag_batch_norm(32), relu, ag_dropout(0.3),
  ag_linear(32, 3)
)
print(model)
options(cli.progress_show_after = 0)  # show the bar even for a short run
opt <- optimizer_adam(model$parameters(), lr = 0.02)
history <- ag_fit(model, x[, train], y[train], optimizer = opt, epochs = 30,
                  batch_size = 32, validation = list(x[, valid], y[valid]))
print(history)

pred <- model$forward(ag_tensor(x[, valid]))
cat(sprintf("validation accuracy: %.1f%% (%d of %d)\n",
            100 * mean(max.col(t(pred$data)) - 1L == y[valid]),
            sum(max.col(t(pred$data)) - 1L == y[valid]), length(valid)))

# ---- memory ledger --------------------------------------------------------
# (Residency: weights resident in the persistent pool, bytes uploaded per
# step. Shown here once the device path and the residency layer land.)
# ---------------------------------------------------------------------------

out_dir <- file.path(getwd(), "demo-output")
dir.create(out_dir, showWarnings = FALSE)
png_file <- file.path(out_dir, "iris-training.png")
grDevices::png(png_file, width = 900, height = 400)
plot(history)
invisible(grDevices::dev.off())
cat("loss and accuracy plot written to", png_file, "\n")
