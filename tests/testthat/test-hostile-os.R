# The operating system's side: fork() after thread pools and Vulkan were
# used, Ctrl-C during long computations, and the memory budget's refusals.
# Anything that could hang runs in a child process with a timeout.

test_that("forked children work after the parent used thread pools (they hung)", {
  res <- hostile_run(list(
    cpu_backend = quote({
      cpu <- ggml_backend_cpu_init(); ggml_backend_cpu_set_n_threads(cpu, 2)
      run <- function() {
        ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
        a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 256)
        y <- ggml_mul_mat(ctx, a, a)
        buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
        ggml_backend_tensor_set_data(a, rep(1, 256 * 256))
        ggml_backend_graph_compute(cpu, ggml_build_forward_expand(ctx, y))
        ggml_backend_tensor_get_data(y)[1]
      }
      run()
      unlist(parallel::mclapply(1:2, function(i) run(), mc.cores = 2))
    }),
    ncnn_threads = quote({
      net <- ncnn_net(num_threads = 2)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nReLU r 1 1 x out\n")
      net$load_model(ncnn_datareader_empty())
      run <- function() {
        ex <- net$create_extractor()
        ex$input("x", array(c(-1, 2), c(2, 1)))
        sum(ex$extract("out"))
      }
      run()
      unlist(parallel::mclapply(1:2, function(i) run(), mc.cores = 2))
    }),
    host_product = quote({
      x <- ag_tensor(matrix(1, 300, 300))
      ag_matmul(x, x)
      unlist(parallel::mclapply(1:2, function(i) ag_matmul(x, x)$data[1, 1], mc.cores = 2))
    }),
    vulkan = quote({
      if (!ggml_vulkan_available()) return(c("ok", "ok"))
      vk <- ggml_vulkan_init(0)
      run <- function(be) {
        ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
        a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
        y <- ggml_relu(ctx, a)
        buf <- ggml_backend_alloc_ctx_tensors(ctx, be)
        ggml_backend_tensor_set_data(a, c(-1, 2, -3, 4))
        ggml_backend_graph_compute(be, ggml_build_forward_expand(ctx, y))
        sum(ggml_backend_tensor_get_data(y))
      }
      run(vk)
      unlist(parallel::mclapply(1:2, function(i) {
        cpu_ok <- run(ggml_backend_cpu_init()) == 6
        vk_msg <- tryCatch({ run(vk); "used the parent's device" }, ggmlR_error = function(e) conditionMessage(e))
        if (cpu_ok && grepl("forked child cannot use the Vulkan driver", vk_msg)) "ok" else vk_msg
      }, mc.cores = 2))
    }),
    gpu_autograd = quote({
      if (!ggml_vulkan_available()) return(c("ok", "ok"))
      ag_device("gpu")
      w <- ag_param(matrix(1, 2, 2))
      with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
      backward(loss)
      unlist(parallel::mclapply(1:2, function(i) {
        r <- tryCatch({ ag_device("cpu"); ag_matmul(ag_tensor(diag(2)), ag_tensor(diag(2)))$data[1, 1] },
                      error = function(e) conditionMessage(e))
        if (identical(r, 1)) "ok" else r
      }, mc.cores = 2))
    })
  ), timeout = 120)
  expect_identical(res$outcome, rep("value", 5), info = paste(res$name, res$outcome, res$message, collapse = "; "))
  expect_identical(res$message[1], "256 256")                 # a row of 256 ones times a column of ones
  expect_identical(res$message[2], "2 2")
  expect_identical(res$message[3], "300 300")
  expect_identical(res$message[4], "ok ok")
  expect_identical(res$message[5], "ok ok")
})

interrupt_setup <- quote({
  # SIGINT to this process after `after` seconds, as Ctrl-C would send it.
  ctrl_c_in <- function(after) system(sprintf("(sleep %s; kill -INT %d) &", after, Sys.getpid()))
  timed <- function(expr) {
    t0 <- proc.time()[["elapsed"]]
    r <- tryCatch({ expr; "finished" }, interrupt = function(e) paste(class(e), collapse = "/"))
    c(r, format(proc.time()[["elapsed"]] - t0 < 8))
  }
})

test_that("Ctrl-C stops a long compute and an ncnn extract as R's own interrupt", {
  res <- hostile_run(list(
    graph_compute = quote({
      cpu <- ggml_backend_cpu_init(); ggml_backend_cpu_set_n_threads(cpu, 2)
      ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
      a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4096, 4096)
      y <- a
      for (i in 1:12) y <- ggml_mul_mat(ctx, a, y)   # minutes of work on two cores
      buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
      ggml_backend_tensor_set_data(a, rep(1 / 4096, 4096 * 4096))
      g <- ggml_build_forward_expand(ctx, y)
      ctrl_c_in(0.5)
      r <- timed(ggml_backend_graph_compute(cpu, g))
      # the backend and the buffers are still usable
      small <- ggml_view_1d(ctx, a, 2, offset = 0)
      c(r, ggml_backend_tensor_get_data(small)[1] * 4096)
    }),
    ncnn_extract = quote({
      net <- ncnn_net(num_threads = 2)
      layers <- paste(sprintf("Convolution c%d 1 1 b%d b%d 0=64 1=3 4=1 6=36864", 1:60, 0:59, 1:60), collapse = "\n")
      net$load_param_mem(paste0("7767517\n61 61\nInput data 0 1 b0\n", layers, "\n"))
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("b0", array(0, c(512, 512, 64)))
      ctrl_c_in(0.5)
      r <- timed(ex$extract("b60"))
      ex2 <- net$create_extractor()
      ex2$input("b0", array(0, c(4, 4, 64)))
      c(r, sum(ex2$extract("b60")))
    }),
    custom_layer = quote({
      net <- ncnn_net(num_threads = 1)
      net$register_custom_layer("Slow", function() ncnn_layer(function(x) { Sys.sleep(30); x }))
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nSlow s 1 1 x out\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1, c(1, 1)))
      ctrl_c_in(0.5)
      r <- timed(ex$extract("out"))
      c(r, "-")
    })
  ), setup = interrupt_setup, timeout = 240)
  expect_identical(res$outcome, rep("value", 3), info = paste(res$name, res$message, collapse = "; "))
  for (i in 1:3) {
    expect_match(res$message[i], "^interrupt/condition TRUE", info = res$name[i])
  }
  expect_match(res$message[1], " 1$")
  expect_match(res$message[2], " 0$")
})

test_that("Ctrl-C stops a long Vulkan graph between slices, one long Vulkan product between pieces of it, and a long backward() between nodes; all stay usable", {
  cases <- list(
    backward = quote({
      # d sum(W8 ... W1 X) / d W1 = (W8 ... W2)' 1 X' = n everywhere when
      # every W is J / n and X is ones (J: all ones). Sixteen products of 1200
      # in the backward pass: about 55 GFLOP, more than 0.3 s on any CPU of
      # this kind, so the signal comes while it runs.
      n <- 1200
      ws <- lapply(1:8, function(i) ag_param(matrix(1 / n, n, n)))
      with_grad_tape({
        h <- ag_tensor(matrix(1, n, n))
        for (w in ws) h <- ag_matmul(w, h)
        loss <- ag_sum(h)
      })
      ctrl_c_in(0.3)
      r <- timed(backward(loss))
      # the tape still holds the loss, and a new backward() completes
      g <- backward(loss)
      c(r, all(abs(g[[as.character(ws[[1]]$id)]] - n) < 1e-9 * n))
    })
  )
  if (ggml_vulkan_available()) {
    cases$vulkan_graph <- quote({
      vk <- ggml_vulkan_init(0L)
      ctx <- ggml_init(2100 * ggml_tensor_overhead(), no_alloc = TRUE)
      a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 256)
      y <- a
      for (i in 1:2000) y <- ggml_mul_mat(ctx, a, y)   # minutes of work on lavapipe
      short <- ggml_mul_mat(ctx, a, a)
      buf <- ggml_backend_alloc_ctx_tensors(ctx, vk)
      ggml_backend_tensor_set_data(a, rep(1 / 256, 256^2))
      g <- ggml_build_forward_expand(ctx, y)
      g2 <- ggml_build_forward_expand(ctx, short)
      # One product first, so the device's speed for it is known.
      ggml_backend_graph_compute(vk, g2)
      ctrl_c_in(0.5)
      r <- timed(ggml_backend_graph_compute(vk, g))
      # the backend and its buffer compute the next graph: J/256 squared is J/256
      ggml_backend_graph_compute(vk, g2)
      c(r, round(sum(ggml_backend_tensor_get_data(short))))
    })
  }
  if (ggml_vulkan_available()) {
    # A fresh context, no shader timed yet: the first batch holds one
    # dispatch of the new shader, so Ctrl-C is answered as soon.
    cases$vulkan_graph_fresh <- quote({
      vk <- ggml_vulkan_init(0L)
      ctx <- ggml_init(2100 * ggml_tensor_overhead(), no_alloc = TRUE)
      a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 256)
      y <- a
      for (i in 1:2000) y <- ggml_mul_mat(ctx, a, y)
      buf <- ggml_backend_alloc_ctx_tensors(ctx, vk)
      ggml_backend_tensor_set_data(a, rep(1 / 256, 256^2))
      g <- ggml_build_forward_expand(ctx, y)
      ctrl_c_in(0.5)
      r <- timed(ggml_backend_graph_compute(vk, g))
      c(r, "-")
    })
  }
  if (ggml_vulkan_available()) {
    # One product, one dispatch: 2048 x 2048 results over an inner length
    # of 8192 (34 GFLOP, minutes on lavapipe). Its workgroups run in pieces
    # of about 0.2 s, and Ctrl-C is answered between two pieces. A fresh
    # context times the shader on a first piece of a few workgroups; the
    # warm one knows it from a small product (an inner length of 64).
    one_dispatch <- function(warm) bquote({
      vk <- ggml_vulkan_init(0L)
      ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
      a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8192, 2048)
      big <- ggml_mul_mat(ctx, a, a)
      s <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 64)
      small <- ggml_mul_mat(ctx, s, s)
      buf <- ggml_backend_alloc_ctx_tensors(ctx, vk)
      ggml_backend_tensor_set_data(s, rep(1, 64^2))
      g <- ggml_build_forward_expand(ctx, big)
      g2 <- ggml_build_forward_expand(ctx, small)
      if (.(warm)) ggml_backend_graph_compute(vk, g2)
      ctrl_c_in(0.5)
      r <- timed(ggml_backend_graph_compute(vk, g))
      # the device computes the next graph: every entry of s's t(s) %*% s is 64
      ggml_backend_graph_compute(vk, g2)
      c(r, sum(ggml_backend_tensor_get_data(small) == 64))
    })
    cases$vulkan_one_dispatch_fresh <- one_dispatch(FALSE)
    cases$vulkan_one_dispatch_warm <- one_dispatch(TRUE)
  }
  res <- hostile_run(cases, setup = interrupt_setup, timeout = 300)
  expect_identical(res$outcome, rep("value", length(cases)), info = paste(res$name, res$message, collapse = "; "))
  for (nm in grep("one_dispatch", res$name, value = TRUE)) {
    expect_match(res$message[res$name == nm], " 4096$", info = nm)
  }
  for (i in seq_along(cases)) {
    expect_match(res$message[i], "^interrupt/condition TRUE", info = res$name[i])
  }
  expect_match(res$message[1], " TRUE$")
  if (length(cases) > 1) expect_match(res$message[2], " 256$")
})

test_that("budget refusals name ag_memory_limit() and what asked, in adaptive units, and are counted", {
  old <- ag_memory_limit(2^20)
  on.exit(ag_memory_limit(old))
  before <- ag_memory_stats()$refusals
  cpu <- ggml_backend_cpu_init()
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2^20)
  e <- tryCatch(ggml_backend_alloc_ctx_tensors(ctx, cpu), error = identity)
  expect_s3_class(e, "ggmlR_error")
  expect_match(conditionMessage(e), "budget exceeded: 4.0 MiB requested for a backend buffer, .* in use, limit 1.0 MiB")
  expect_match(conditionMessage(e), "ag_memory_limit\\(\\)")
  expect_false(grepl("tape|\\.ag_", conditionMessage(e)))
  expect_identical(deparse(conditionCall(e)[[1]]), "ggml_backend_alloc_ctx_tensors")
  e <- tryCatch(ggml_init(8 * 2^20), error = identity)
  expect_match(conditionMessage(e), "8.0 MiB requested for context memory \\(ggml_init\\(\\)\\)")
  expect_identical(ag_memory_stats()$refusals, before + 2)
  if (ggml_vulkan_available()) {
    res <- hostile_run(list(gpu = quote({
      ag_memory_limit(2^20)
      ag_device("gpu")
      before <- ag_memory_stats()$refusals
      x <- ag_tensor(matrix(1, 1024, 1024))
      msg <- tryCatch({ ag_matmul(x, x)$data; "allocated" }, error = function(e) conditionMessage(e))
      c(ag_memory_stats()$refusals - before, msg)
    })))
    expect_identical(res$outcome, "value", info = res$message)
    expect_match(res$message, "^1 .*budget exceeded: .* for an autograd device tensor.*ag_memory_limit")
  }
  ggml_free(ctx)
})
