# Residency pools, handles and the byte ledger, through the internals the
# autograd engine uses.
ns <- asNamespace("ggmlR")
st <- get(".ag_device_state", envir = ns)
reset <- get(".ag_residency_reset", envir = ns)
ensure <- get(".ag_ctx_ensure", envir = ns)
flush <- get(".ag_ctx_flush", envir = ns)
mem <- get(".ag_tape_mem", envir = ns)
limit <- get(".ag_tape_mem_limit", envir = ns)
budget <- get(".ag_check_mem_budget", envir = ns)
upload <- get(".ag_r_to_gpu", envir = ns)
handle <- get(".ag_handle", envir = ns)
live <- get(".ag_handle_live", envir = ns)
set_handle <- get(".ag_data_set_handle", envir = ns)
data_of <- get(".ag_data", envir = ns)
handle_of <- get(".ag_handle_of", envir = ns)

with_backend <- function(backend = ggml_backend_cpu_init()) {
  st$backend <- backend
  reset(size_mb = 1)
}

test_that("a pass reset frees only the pass pool, and a persistent reset only the persistent one", {
  with_backend()
  w <- upload(matrix(1:6, 2, 3), scope = "persistent")
  a <- upload(matrix(7:12, 3, 2), scope = "pass")
  m0 <- mem()
  expect_identical(m0$n_buffers, 1L)
  expect_identical(m0$p_n_buffers, 1L)
  reset(scope = "pass")
  expect_identical(mem()$buffer_bytes, 0)
  expect_identical(mem()$p_buffer_bytes, m0$p_buffer_bytes)
  expect_equal(ggml_backend_tensor_get_data(w), as.numeric(1:6))
  expect_error(ggml_backend_tensor_get_data(a), "pass pool")

  a2 <- upload(matrix(1, 2, 2), scope = "pass")
  reset(scope = "persistent")
  expect_identical(mem()$p_buffer_bytes, 0)
  expect_gt(mem()$buffer_bytes, 0)
  expect_equal(ggml_backend_tensor_get_data(a2), rep(1, 4))
  expect_error(ggml_backend_tensor_get_data(w), "persistent pool")
  reset()
})

test_that("generations count resets of each pool", {
  with_backend()
  g <- st$ctx_gen
  p <- st$p_ctx_gen
  for (i in 1:3) reset(scope = "pass")
  expect_identical(st$ctx_gen, g + 3L)
  expect_identical(st$p_ctx_gen, p)
  expect_identical(reset(scope = "persistent"), g + 3L)
  expect_identical(st$p_ctx_gen, p + 1L)
  expect_error(st$ctx_gen <- 0L, "cannot be assigned")
})

test_that("a full context rolls over; earlier tensors stay readable and the generation stays", {
  st$backend <- ggml_backend_cpu_init()
  # Room for exactly two descriptors per context.
  reset(size_mb = 2 * ggml_tensor_overhead() / 1024^2)
  g <- st$ctx_gen
  c1 <- ensure(1L)
  t1 <- ggml_new_tensor_1d(c1, GGML_TYPE_F32, 3)
  t2 <- ggml_new_tensor_1d(c1, GGML_TYPE_F32, 3)
  flush(c1)
  ggml_backend_tensor_set_data(t1, c(1, 2, 3))
  c2 <- ensure(1L)
  expect_length(st$contexts, 2L)
  t3 <- ggml_new_tensor_1d(c2, GGML_TYPE_F32, 2)
  flush(c2)
  expect_identical(st$ctx_gen, g)
  expect_equal(ggml_backend_tensor_get_data(t1), c(1, 2, 3))
  expect_equal(ggml_backend_tensor_get_data(t3), c(0, 0))
  # Asking for more room than a context holds gets a context that fits.
  c3 <- ensure(5L)
  expect_gte(ggml_get_mem_size(c3), 5 * ggml_tensor_overhead())
  reset(size_mb = 1)
})

test_that("a flush backs all pending tensors with one buffer, and is a no-op after", {
  with_backend()
  ctx <- ensure(4L)
  ts <- lapply(1:4, function(i) ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, i))
  before <- ag_memory_stats()$pass_buffers
  buf <- flush(ctx)
  expect_s3_class(buf, "ggml_backend_buffer")
  expect_identical(ag_memory_stats()$pass_buffers, before + 1)
  expect_length(st$buffers, 1L)
  expect_gte(ggml_backend_buffer_get_size(buf), 4 * 8 * (1 + 2 + 3 + 4))
  expect_null(flush(ctx))
  expect_length(st$buffers, 1L)
  expect_null(flush(NULL))
  reset()
})

test_that("a flush without a backend is a clear error", {
  st$backend <- NULL
  reset()
  ctx <- ensure(1L)
  ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
  expect_error(flush(ctx), "no compute backend")
  expect_error(upload(1:3), "no compute backend")
  expect_error(upload(1:3, scope = "other"), "must be \"pass\" or \"persistent\"")
  reset()
})

test_that("the budget counts both pools and refuses before anything is allocated", {
  with_backend()
  upload(matrix(0, 64, 64), scope = "persistent")
  upload(matrix(0, 64, 64), scope = "pass")
  held <- mem()$total_buffer_bytes
  used <- ag_memory_stats()$total_bytes
  old <- limit(used + 1000)
  on.exit(limit(old), add = TRUE)
  expect_identical(limit(), used + 1000)
  expect_identical(st$mem_limit, used + 1000)
  expect_error(budget(2000), "budget exceeded")
  expect_no_error(budget(500))
  before <- mem()
  refusals <- ag_memory_stats()$refusals
  expect_error(upload(matrix(0, 64, 64), scope = "pass"), "budget exceeded")
  expect_error(upload(matrix(0, 64, 64), scope = "persistent"), "budget exceeded")
  expect_identical(mem(), before)
  # A direct buffer allocation asks the same ledger.
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4096)
  expect_error(ggml_backend_alloc_ctx_tensors(ctx, st$backend), "budget exceeded")
  # Every refusal counts: the two uploads turned down by the budget check
  # before they allocated anything, and the buffer.
  expect_identical(ag_memory_stats()$refusals, refusals + 3)
  limit(Inf)
  expect_s3_class(ggml_backend_alloc_ctx_tensors(ctx, st$backend), "ggml_backend_buffer")
  ggml_free(ctx)
  expect_error(limit(-5), "positive")
  expect_identical(held, mem()$total_buffer_bytes)
  reset()
})

test_that("stale handles are refused and say which pool and generations", {
  with_backend()
  t <- upload(matrix(1:4, 2, 2), scope = "pass")
  h <- handle(t, c(2L, 2L))
  expect_true(live(h))
  expect_output(print(h), "<ag_handle 2x2, pass pool, generation")
  reset(scope = "pass")
  expect_false(live(h))
  expect_output(print(h), "STALE")
  x <- ag_tensor(matrix(0, 2, 2))
  err <- tryCatch(set_handle(x, h), error = identity)
  expect_s3_class(err, "ggmlR_stale_error")
  expect_match(conditionMessage(err), sprintf("pass pool, generation %d; the pool is now at generation %d",
                                              h$gen, st$ctx_gen))
  expect_error(h * 2)
  reset()
})

test_that("a stale resident tensor cannot be read; a live one reads its device value", {
  with_backend()
  p <- upload(matrix(c(1, 2, 3, 4), 2, 2), scope = "pass")
  x <- ag_tensor(matrix(0, 2, 2))
  set_handle(x, handle(p, c(2L, 2L), scope = "pass"))
  expect_equal(data_of(x), matrix(c(1, 2, 3, 4), 2, 2))
  expect_equal(x$data, matrix(c(1, 2, 3, 4), 2, 2))
  h <- handle_of(x)
  expect_true(live(h))
  g <- st$ctx_gen
  reset(scope = "pass")
  err <- tryCatch(data_of(x), error = identity)
  expect_s3_class(err, "ggmlR_stale_error")
  expect_match(conditionMessage(err), sprintf("pass pool \\(it was made resident in generation %d; the pool is now at generation %d\\)", g, g + 1L))
  # The engine refuses the freed memory too, however it is reached.
  expect_error(ggml_backend_tensor_get_data(p), sprintf("generation %d", g))
  expect_error(ggml_backend_tensor_set_data(p, 1:4), "freed by a reset")
  # Installing a host value drops residency and makes it usable again.
  x$data <- matrix(5, 2, 2)
  expect_equal(data_of(x), matrix(5, 2, 2))
  reset()
})

test_that("resident parameters are rescued to the host before their pool is reset", {
  with_backend()
  w <- ag_param(matrix(0, 2, 2))
  p <- upload(matrix(c(9, 8, 7, 6), 2, 2), scope = "persistent")
  set_handle(w, handle(p, c(2L, 2L), scope = "persistent"))
  reset(scope = "pass")
  expect_equal(w$data, matrix(c(9, 8, 7, 6), 2, 2))
  reset()
  expect_null(w$ptr)
  expect_equal(w$data, matrix(c(9, 8, 7, 6), 2, 2))
})

test_that("the ledger returns to zero after a reset and counts transfers", {
  gc()
  with_backend()
  s0 <- ag_memory_stats()
  t <- upload(matrix(runif(50), 10, 5), scope = "persistent")
  s1 <- ag_memory_stats()
  expect_identical(s1$persistent_bytes - s0$persistent_bytes, mem()$p_buffer_bytes)
  expect_identical(s1$persistent_upload_bytes - s0$persistent_upload_bytes, 200)
  expect_identical(s1$persistent_upload_calls - s0$persistent_upload_calls, 1)
  ggml_backend_tensor_get_data(t)
  s2 <- ag_memory_stats()
  expect_identical(s2$persistent_download_bytes - s1$persistent_download_bytes, 200)
  expect_identical(s2$download_calls - s1$download_calls, 1)
  expect_gte(s2$peak_bytes, s2$total_bytes)
  reset()
  s3 <- ag_memory_stats()
  expect_identical(s3$pass_bytes, 0)
  expect_identical(s3$persistent_bytes, 0)
  expect_identical(s3$pass_buffers, 0)
  expect_identical(s3$persistent_buffers, 0)
  expect_identical(nrow(s3), 1L)
})

rss_kb <- function() {
  if (!file.exists("/proc/self/status")) return(NA_real_)
  l <- grep("^VmRSS:", readLines("/proc/self/status"), value = TRUE)
  as.numeric(gsub("[^0-9]", "", l))
}

test_that("10,000 allocate/reset cycles leave nothing behind", {
  with_backend()
  zeros <- matrix(0, 64, 64)  # 16 KiB of f32 per cycle
  cycle <- function(n) {
    for (i in seq_len(n)) {
      upload(zeros, scope = "pass")
      reset(scope = "pass")
    }
  }
  cycle(2000)  # warm up: R's heap settles on its collection thresholds
  gc()
  before <- rss_kb()
  s0 <- ag_memory_stats()
  cycle(10000)
  gc()
  after <- rss_kb()
  s1 <- ag_memory_stats()
  expect_identical(s1$pass_bytes, 0)
  expect_identical(s1$pass_buffers, 0)
  expect_identical(s1$total_buffers, s0$total_buffers)
  expect_identical(s1$allocations - s0$allocations, 10000)
  expect_identical(mem()$n_buffers, 0L)
  expect_identical(mem()$n_contexts, 0L)
  # Memory is flat: keeping the 16 KiB buffer (or its context) of each cycle
  # would add over 160 MB; R's own heap may grow by a few MB.
  if (!is.na(before)) expect_lt(after - before, 32 * 1024)
  reset()
})

test_that("ag_memory_limit() gets and sets the budget", {
  old <- ag_memory_limit()
  expect_identical(old, Inf)
  expect_identical(ag_memory_limit(1e9), Inf)
  expect_identical(ag_memory_limit(), 1e9)
  expect_invisible(ag_memory_limit(Inf))
  expect_identical(ag_memory_limit(), Inf)
  expect_error(ag_memory_limit("a lot"), "positive number")
})

test_that("residency works on a Vulkan backend", {
  skip_if_no_vulkan()
  with_backend(ggml_vulkan_init(0L))
  w <- upload(matrix(1:6, 2, 3), scope = "persistent")
  reset(scope = "pass")
  expect_equal(ggml_backend_tensor_get_data(w), as.numeric(1:6))
  reset()
  st$backend <- ggml_backend_cpu_init()
})

test_that("ag_memory_stats() prints a short summary and keeps every figure", {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  s <- ag_memory_stats()
  expect_s3_class(s, "ag_memory_stats")
  expect_s3_class(s, "data.frame")
  full <- as.data.frame(s)
  expect_identical(class(full), "data.frame")
  expect_identical(ncol(full), 24L)
  expect_gte(s$user_bytes, 1024 * 1024)
  out <- capture.output(print(s))
  expect_match(out[1], sprintf("^<ag_memory_stats> live %s \\(", .ag_bytes(s$total_bytes)), fixed = FALSE)
  expect_match(grep("^   user", out, value = TRUE), sprintf("user +%s", .ag_bytes(s$user_bytes)))
  expect_true(any(grepl("\"cpu\" tensors are R heap memory, not in the ledger", out)))
  expect_lte(max(nchar(out)), 80)
  expect_identical(.ag_bytes(0), "0 B")
  expect_identical(.ag_bytes(1536), "1.5 KiB")
  expect_identical(.ag_bytes(3 * 1024^3), "3.0 GiB")
})

test_that("ag_memory_stats() print snapshot", {
  s <- ag_memory_stats()
  s[1, ] <- 0
  s$pass_bytes <- 77612; s$pass_buffers <- 12; s$persistent_bytes <- 1740; s$persistent_buffers <- 12
  s$user_bytes <- 1048576; s$user_buffers <- 1; s$total_bytes <- 77612 + 1740 + 1048576
  s$total_buffers <- 25; s$peak_bytes <- 2e6; s$upload_bytes <- 10035; s$upload_calls <- 34
  s$download_bytes <- 1843; s$download_calls <- 7; s$limit <- 512 * 1024^2; s$refusals <- 1
  expect_snapshot(s)
})

test_that("a subset of ag_memory_stats() prints as a data frame", {
  s <- ag_memory_stats()
  sub <- s[, c("pass_bytes", "peak_bytes")]
  expect_output(print(sub), "pass_bytes peak_bytes")
  expect_output(print(rbind(s, s)), "pass_bytes")
})
