# Residency benchmark: the cost of a pass-pool reset with 1, 100 and 10,000
# live buffers, and the byte ledger's overhead per allocation, on the CPU
# backend and (when present) a Vulkan backend. Run with `make bench` or
# `Rscript inst/bench/residency.R`.
suppressPackageStartupMessages(library(ggmlR))
ns <- asNamespace("ggmlR")
st <- get(".ag_device_state", envir = ns)
reset <- get(".ag_residency_reset", envir = ns)
ensure <- get(".ag_ctx_ensure", envir = ns)
flush <- get(".ag_ctx_flush", envir = ns)

# Fill the pass pool with `n` buffers of one small tensor each, then time the
# reset; repeated `reps` times, the mean reset time in seconds.
reset_cost <- function(n, reps) {
  total <- 0
  for (r in seq_len(reps)) {
    reset(scope = "pass")
    for (i in seq_len(n)) {
      ctx <- ensure(1L)
      ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16)
      flush(ctx)
    }
    stopifnot(ag_memory_stats()$pass_buffers == n)
    t0 <- proc.time()[["elapsed"]]
    reset(scope = "pass")
    total <- total + proc.time()[["elapsed"]] - t0
    stopifnot(ag_memory_stats()$pass_buffers == 0)
  }
  total / reps
}

# Time of allocating (and freeing) one small pool buffer, end to end.
alloc_cost <- function(n) {
  reset(scope = "pass")
  t <- system.time(for (i in seq_len(n)) {
    ctx <- ensure(1L)
    ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16)
    flush(ctx)
  })[["elapsed"]]
  reset(scope = "pass")
  t / n
}

backends <- list(CPU = ggml_backend_cpu_init)
if (exists("ggml_vulkan_init", envir = ns) && ggml_vulkan_available()) {
  backends$Vulkan <- function() get("ggml_vulkan_init", envir = ns)(0L)
}

ledger_s <- get("rs_ledger_overhead", envir = ns)(1e6) / 1e6
cat(sprintf("ledger overhead per allocation (check + record + release): %.0f ns\n\n",
            ledger_s * 1e9))

rows <- list()
for (name in names(backends)) {
  st$backend <- backends[[name]]()
  reset(size_mb = 4)
  per_alloc <- alloc_cost(2000)
  for (n in c(1L, 100L, 10000L)) {
    t <- reset_cost(n, reps = max(1L, 2000L %/% n))
    rows[[length(rows) + 1L]] <- data.frame(
      backend = paste(name, ggml_backend_name(st$backend)), live_buffers = n,
      reset_ms = 1e3 * t, reset_us_per_buffer = 1e6 * t / n,
      alloc_us = 1e6 * per_alloc, ledger_share = ledger_s / per_alloc
    )
  }
  reset()
}
res <- do.call(rbind, rows)
print(format(res, digits = 3), row.names = FALSE)
cat("\nalloc_us: one pool buffer allocated through .ag_ctx_ensure/ggml_new_tensor/.ag_ctx_flush;\n",
    "ledger_share: the ledger's part of that time.\n", sep = "")
st$backend <- NULL
