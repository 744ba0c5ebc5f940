# ggmlR demo: train an iris classifier with the autograd API.
suppressPackageStartupMessages(library(ggmlR))
cat("ggmlR engine", ggml_version(), "| backend devices:", ggml_backend_dev_count(),
    "| Vulkan:", ggml_vulkan_status(), "\n")

# Train on the best device: "gpu" is the best backend (Vulkan when present,
# else the CPU backend) in f32, with the weights resident in the persistent
# pool; "cpu" would compute in double precision on the host.
ag_device("gpu")
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
# One step by hand first, to take the ledger's figures after step 1.
b1 <- train[sample.int(length(train), 32)]
with_grad_tape(loss <- ag_softmax_cross_entropy_loss(model$forward(ag_tensor(x[, b1])), y[b1]))
opt$step(backward(loss))
after_first <- ag_memory_stats()
history <- ag_fit(model, x[, train], y[train], optimizer = opt, epochs = 30,
                  batch_size = 32, validation = list(x[, valid], y[valid]))
print(history)

pred <- model$forward(ag_tensor(x[, valid]))
cat(sprintf("validation accuracy: %.1f%% (%d of %d)\n",
            100 * mean(max.col(t(pred$data)) - 1L == y[valid]),
            sum(max.col(t(pred$data)) - 1L == y[valid]), length(valid)))

# ---- memory ledger --------------------------------------------------------
st <- ag_memory_stats()
cat("\nmemory ledger (backend:", ggml_backend_name(ggmlR:::.ag_device_state$backend), ")\n")
print(t(st[, grepl("^(persistent|pass)_", names(st))]))
weights <- sum(vapply(model$parameters(), function(p) 4 * length(p$data), numeric(1)))
resident <- all(vapply(model$parameters(), function(p) identical(p$ctx_scope, "persistent"), logical(1)))
cat(sprintf("weights resident: %s (%d parameters, %s bytes in f32; persistent pool %s bytes)\n",
            if (resident) "yes" else "NO", length(model$parameters()), format(weights),
            format(st$persistent_bytes)))
cat(sprintf("weights resident, uploaded after step 1: %s bytes\n",
            format(st$persistent_upload_bytes - after_first$persistent_upload_bytes)))
# ---------------------------------------------------------------------------

out_dir <- file.path(getwd(), "demo-output")
dir.create(out_dir, showWarnings = FALSE)
png_file <- file.path(out_dir, "iris-training.png")
grDevices::png(png_file, width = 900, height = 400)
plot(history)
invisible(grDevices::dev.off())
cat("loss and accuracy plot written to", png_file, "\n")
