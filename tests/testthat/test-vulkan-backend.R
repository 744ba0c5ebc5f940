# The Vulkan backend itself: creation, naming, one submission per graph,
# agreement with the CPU backend, and clear errors that leave the session usable.

mlp_graph <- function(backend, seed = 7) {
  set.seed(seed)
  n_in <- 48; h1 <- 96; h2 <- 40; n_out <- 12; batch <- 64
  vals <- list(x = rarray(n_in, batch), w1 = rarray(n_in, h1) / 8, b1 = rarray(h1),
               w2 = rarray(h1, h2) / 8, b2 = rarray(h2), w3 = rarray(h2, n_out) / 4, b3 = rarray(n_out))
  ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx))
  t <- lapply(vals, function(v) ggml_new_tensor(ctx, GGML_TYPE_F32, length(ne_of(v)), ne_of(v)))
  l1 <- ggml_relu(ctx, ggml_add(ctx, ggml_mul_mat(ctx, t$w1, t$x), t$b1))
  l2 <- ggml_gelu(ctx, ggml_add(ctx, ggml_mul_mat(ctx, t$w2, l1), t$b2))
  out <- ggml_soft_max(ctx, ggml_add(ctx, ggml_mul_mat(ctx, t$w3, l2), t$b3))
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  on.exit(ggml_backend_buffer_free(buf), add = TRUE, after = FALSE)
  for (nm in names(vals)) ggml_backend_tensor_set_data(t[[nm]], as.vector(vals[[nm]]))
  graph <- ggml_build_forward_expand(ctx, out)
  before <- if (ggml_vulkan_is_backend(backend)) ggml_vulkan_submission_count(backend)
  ggml_backend_graph_compute(backend, graph)
  subs <- if (ggml_vulkan_is_backend(backend)) ggml_vulkan_submission_count(backend) - before
  list(y = ggml_backend_tensor_get_data(out), submissions = subs, nodes = ggml_graph_n_nodes(graph))
}

test_that("ggml_vulkan_init makes a named Vulkan backend; free and type checks work", {
  skip_if_no_vulkan()
  vk <- ggml_vulkan_init(0L)
  expect_s3_class(vk, "ggml_backend")
  expect_true(ggml_vulkan_is_backend(vk))
  expect_identical(ggml_vulkan_backend_name(vk), "Vulkan0")
  expect_identical(ggml_backend_name(vk), "Vulkan0")
  expect_output(print(vk), "Vulkan0")
  cpu <- ggml_backend_cpu_init()
  expect_false(ggml_vulkan_is_backend(cpu))
  expect_false(ggml_vulkan_is_backend("Vulkan0"))
  expect_error(ggml_vulkan_backend_name(cpu), "must be a Vulkan backend.*'CPU'", class = "ggmlR_error")
  expect_error(ggml_backend_cpu_set_n_threads(vk, 2), "Vulkan backend.*CPU backend", class = "ggmlR_error")
  expect_error(ggml_vulkan_init(ggml_vulkan_device_count()), "does not exist", class = "ggmlR_error")
  expect_error(ggml_vulkan_init(-1), "device index", class = "ggmlR_error")
  st <- ggml_vulkan_backend_stats(vk)
  expect_identical(st$name, ggml_vulkan_device_description(0L))
  expect_true(st$memory_total > 0)
  ggml_vulkan_free(vk)
  expect_error(ggml_backend_name(vk), "freed", class = "ggmlR_error")
  ggml_vulkan_free(vk)
  ggml_backend_free(cpu)
})

test_that("backends on one device share its context; dev_count counts CPU plus devices", {
  skip_if_no_vulkan()
  expect_identical(ggml_backend_dev_count(), 1 + ggml_vulkan_device_count())
  a <- ggml_vulkan_init(0L)
  b <- ggml_vulkan_init(0L)
  r <- mlp_graph(a)
  # the submission counter is the device context's: b sees a's graph
  expect_identical(ggml_vulkan_submission_count(a), ggml_vulkan_submission_count(b))
  p1 <- ggml_vulkan_backend_stats(a)$pipelines
  mlp_graph(b)
  expect_identical(ggml_vulkan_backend_stats(b)$pipelines, p1)
  ggml_vulkan_free(a)
  ggml_vulkan_free(b)
})

test_that("a 3-layer MLP forward graph on Vulkan matches the CPU backend in one submission", {
  skip_if_no_vulkan()
  cpu <- ggml_backend_cpu_init()
  vk <- ggml_vulkan_init(0L)
  want <- mlp_graph(cpu)
  got <- mlp_graph(vk)
  expect_true(got$nodes >= 9)
  expect_identical(got$submissions, 1)
  expect_close(got$y, want$y, 1e-5)
  ggml_vulkan_free(vk)
  ggml_backend_free(cpu)
})

test_that("ggml_backend_init_best picks the best Vulkan device and says so", {
  skip_if_no_vulkan()
  devs <- ggml_vulkan_list_devices()
  rank <- match(devs$type, c("discrete", "integrated", "virtual", "cpu", "other"))
  expect_message(b <- ggml_backend_init_best(), "using Vulkan device")
  expect_true(ggml_vulkan_is_backend(b))
  expect_identical(ggml_vulkan_backend_stats(b)$device, devs$index[which.min(rank)])
  ggml_backend_free(b)
})

test_that("the best backend never picks a CPU-type Vulkan device by itself", {
  skip_if_no_vulkan()
  devs <- ggml_vulkan_list_devices()
  gpu <- devs$type != "cpu"
  with_vulkan_cpu_device("", {
    if (any(gpu)) {
      expect_message(b <- ggml_backend_init_best(), "using Vulkan device")
      expect_true(ggml_vulkan_is_backend(b))
      expect_true(gpu[devs$index == ggml_vulkan_backend_stats(b)$device])
    } else {
      i <- devs$index[1L]
      expect_message(b <- ggml_backend_init_best(), sprintf(
        "using the CPU backend; the only Vulkan device is Vulkan device %d, .*software device.*ggml_vulkan_init\\(%d\\) or GGMLR_VULKAN_CPU_DEVICE=1", i, i))
      expect_false(ggml_vulkan_is_backend(b))
      expect_identical(ggml_backend_name(b), ggml_backend_name(ggml_backend_cpu_init()))
      # Named by index, the device is used.
      vk <- ggml_vulkan_init(i)
      expect_true(ggml_vulkan_is_backend(vk))
      expect_identical(ggml_vulkan_backend_stats(vk)$device_type, "cpu")
      ggml_backend_free(vk)
    }
    ggml_backend_free(b)
  })
  if (!any(gpu)) {
    for (v in c("1", "true")) with_vulkan_cpu_device(v, {
      expect_message(b <- ggml_backend_init_best(),
                     "using Vulkan device [0-9]+, .*\\(cpu\\): a CPU-type device, used because GGMLR_VULKAN_CPU_DEVICE is set")
      expect_true(ggml_vulkan_is_backend(b))
      ggml_backend_free(b)
    })
    with_vulkan_cpu_device("0", expect_false(ggml_vulkan_is_backend(suppressMessages(ggml_backend_init_best()))))
  }
})

test_that("device \"gpu\" without a GPU is the CPU backend in f32", {
  skip_if_no_vulkan()
  devs <- ggml_vulkan_list_devices()
  skip_if(any(devs$type != "cpu"), "a Vulkan GPU is present")
  st <- get(".ag_device_state", envir = asNamespace("ggmlR"))
  old <- list(backend = st$backend, device = st$device)
  on.exit({
    st$backend <- old$backend
    st$device <- old$device
  })
  st$backend <- NULL
  with_vulkan_cpu_device("", {
    expect_message(ag_device("gpu"), "using the CPU backend")
    expect_false(ggml_vulkan_is_backend(st$backend))
    x <- matrix(c(1 + 2^-30, 2, 3, 4), 2)
    y <- ag_matmul(ag_tensor(x), ag_tensor(diag(2)))
    expect_identical(y$device, "gpu")
    # f32: 1 + 2^-30 rounds to 1; the product matches base R's in f32.
    expect_identical(.ag_data(y)[1, 1], 1)
    expect_equal(.ag_data(y), x %*% diag(2), tolerance = 1e-7)
  })
  ag_device(old$device)
})

test_that("tensors outside the backend's memory are a clear error, and nothing is lost", {
  skip_if_no_vulkan()
  vk <- ggml_vulkan_init(0L)
  ctx <- ggml_init(16 * ggml_tensor_overhead() + 1024)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  ggml_set_f32(a, 1.5)
  y <- ggml_scale(ctx, a, 2)
  expect_error(ggml_backend_graph_compute(vk, ggml_build_forward_expand(ctx, y)),
    "lives in buffer #[0-9]+ \\(context, CPU.*cannot use.*ggml_backend_alloc_ctx_tensors",
    class = "ggmlR_error")
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, y))
  expect_equal(ggml_get_f32(y), rep(3, 4))
  ggml_free(ctx)
  ggml_vulkan_free(vk)
})

test_that("an allocation larger than the device allows is an R error naming device and sizes", {
  skip_if_no_vulkan()
  vk <- ggml_vulkan_init(0L)
  caps <- ggml_vulkan_device_caps(0L)
  n <- ceiling(max(caps$max_memory_allocation_size, ggml_vulkan_device_memory(0L)$total) / 4) + 1024
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  big <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
  expect_error(ggml_backend_alloc_ctx_tensors(ctx, vk),
    sprintf("Vulkan device '%s'.*cannot allocate [0-9.]+ [GMT]iB.*largest single allocation",
            gsub("([().])", "\\\\\\1", ggml_vulkan_device_description(0L))),
    class = "ggmlR_error")
  ggml_free(ctx)
  # the device and the CPU backend still work
  cpu <- ggml_backend_cpu_init()
  expect_close(mlp_graph(vk)$y, mlp_graph(cpu)$y, 1e-5)
  ggml_vulkan_free(vk)
  ggml_backend_free(cpu)
})

test_that("f16 and bf16 storage run on Vulkan like on the CPU backend", {
  skip_if_no_vulkan()
  set.seed(9)
  a <- rarray(40, 24)
  b <- rarray(40, 16)
  for (ty in c(GGML_TYPE_F16, GGML_TYPE_BF16)) {
    f <- function(ctx, t) ggml_soft_max(ctx, ggml_mul_mat(ctx, t$a, t$b))
    got <- run_graph(function() ggml_vulkan_init(0L), list(a = a, b = b), f, types = list(a = ty, b = ty))
    want <- run_graph(function() ggml_backend_cpu_init(), list(a = a, b = b), f, types = list(a = ty, b = ty))
    expect_close(got, want, 1e-4)
  }
})

test_that("the device context is released when the last backend and buffer using it go", {
  skip_if_no_vulkan()
  open <- function() .rs(rs_vulkan_context_open(0L))
  # Models compiled for Vulkan by earlier tests share the autograd device
  # state (its backend and its pools of weights): release it first.
  dp_release_device()
  gc()
  expect_false(open())            # nothing from earlier tests holds it
  vk <- ggml_vulkan_init(0L)
  expect_true(open())
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, vk)
  ggml_vulkan_free(vk)
  expect_true(open())             # the buffer still lives on the device
  ggml_backend_tensor_set_data(x, 1:8)
  expect_equal(ggml_backend_tensor_get_data(x), as.numeric(1:8))
  ggml_backend_buffer_free(buf)
  expect_false(open())
  vk2 <- ggml_vulkan_init(0L)     # a new context, working as before
  expect_true(open())
  cpu <- ggml_backend_cpu_init()
  expect_close(mlp_graph(vk2)$y, mlp_graph(cpu)$y, 1e-5)
  ggml_vulkan_free(vk2)
  ggml_backend_free(cpu)
})
