# onnx_load() / onnx_run() and friends: metadata, inputs, dynamic shapes,
# external data, host operators, and every kind of bad input as an
# onnx_error that leaves the model usable.

mlp_path <- function() system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR")

test_that("onnx_load reads the metadata and prints it", {
  m <- onnx_load(mlp_path(), device = "cpu")
  expect_s3_class(m, "onnx_model")
  expect_equal(m$n_nodes, 5L)
  expect_equal(m$n_weights, 4L)
  expect_equal(m$opset, 13)
  expect_equal(m$ops, c("Gemm", "Relu", "MatMul", "Add", "Softmax"))
  expect_equal(m$graph_name, "tiny_mlp")
  expect_match(m$producer, "onnx-examples")
  expect_output(print(m), "ONNX Model: tiny_mlp")
  expect_output(print(m), "Ops: Gemm, Relu, MatMul, Add, Softmax")
  s <- onnx_summary(m)
  expect_equal(s$n_initializers, 4L)
  expect_equal(s$opset_version, 13)
  expect_equal(onnx_inputs(m), list(x = c(1L, 4L)))
})

test_that("the tiny MLP matches onnxruntime on every device", {
  # onnxruntime's output for x = (0.5, -1, 2, 0.25), recorded once.
  want <- c(0.22406375, 0.10513692, 0.67079926)
  for (dev in onnx_devices()) {
    if (dev == "vulkan") skip_if_no_vulkan()
    m <- onnx_load(mlp_path(), device = dev)
    y <- onnx_run(m, list(x = c(0.5, -1, 2, 0.25)))$y
    expect_equal(dim(y), c(1L, 3L))
    expect_equal(as.numeric(y), want, tolerance = 1e-6)
    expect_equal(sum(y), 1, tolerance = 1e-6)
  }
})

test_that("onnx_device_info says where the model runs", {
  m <- onnx_load(mlp_path(), device = "cpu")
  di <- onnx_device_info(m)
  expect_equal(di$backends, "CPU")
  expect_equal(di$n_splits, 1L)
  expect_true(di$planned)
  expect_gt(di$n_nodes, 0)
  expect_true(all(c("Gemm", "Softmax") %in% di$engine_ops))
  expect_length(di$cpu_ops, 0)
  expect_gt(di$pass_bytes, 0)
})

test_that("weights live in the persistent pool and runs reuse the plan", {
  gc()
  before <- ag_memory_stats()
  m <- onnx_load(onnx_fixture("onnx-arch", "cnn.onnx"), device = "cpu")
  after <- ag_memory_stats()
  expect_gt(after$persistent_bytes - before$persistent_bytes, 40000)
  expect_gt(after$pass_bytes - before$pass_bytes, 0)
  x <- onnx_pb(onnx_fixture("onnx-arch", "cnn", "input_0.pb"))$value
  onnx_run(m, list(x = x))
  mid <- ag_memory_stats()
  onnx_run(m, list(x = x))
  end <- ag_memory_stats()
  expect_equal(end$total_bytes, mid$total_bytes)
  expect_equal(end$allocations, mid$allocations)
  rm(m)
  gc()
  expect_equal(ag_memory_stats()$persistent_bytes, before$persistent_bytes)
  expect_equal(ag_memory_stats()$pass_bytes, before$pass_bytes)
})

test_that("a memory budget refuses a model before taking anything", {
  gc()
  before <- ag_memory_stats()
  old <- ag_memory_limit(before$total_bytes + 1000)
  on.exit(ag_memory_limit(old))
  expect_error(onnx_load(onnx_fixture("onnx-arch", "cnn.onnx"), device = "cpu"), "budget", class = "onnx_error")
  ag_memory_limit(old)
  gc()
  expect_equal(ag_memory_stats()$total_bytes, before$total_bytes)
  m <- onnx_load(onnx_fixture("onnx-arch", "cnn.onnx"), device = "cpu")
  expect_s3_class(m, "onnx_model")
})

test_that("dynamic dimensions bind from input_shapes, dim() or the length", {
  p <- onnx_fixture("onnx", "dynamic.onnx")
  m <- onnx_load(p, device = "cpu")
  expect_equal(onnx_inputs(m), list(x = c(-1L, 3L)))
  expect_false(onnx_device_info(m)$planned)
  x <- matrix(1:6, 2, 3, byrow = TRUE)
  r <- onnx_run(m, list(x = t(x)))
  expect_equal(dim(r$y), c(2L, 3L))
  expect_equal(as.numeric(r$y), as.numeric(t(x * 2 + 1)))
  expect_equal(r$s, sum(x * 2 + 1))
  # another batch size: planned once more
  r4 <- onnx_run(m, list(x = 1:12))
  expect_equal(dim(r4$y), c(4L, 3L))
  expect_equal(r4$s, sum((1:12) * 2 + 1))
  m2 <- onnx_load(p, device = "cpu", input_shapes = list(x = c(5L, 3L)))
  expect_equal(onnx_inputs(m2), list(x = c(5L, 3L)))
  expect_true(onnx_device_info(m2)$planned)
  expect_error(onnx_run(m2, list(x = 1:6)), "must have 15 values", class = "onnx_error")
  expect_error(onnx_load(p, input_shapes = list(x = c(5L, 4L)), device = "cpu"), "fixes at 3", class = "onnx_error")
  expect_error(onnx_load(p, input_shapes = list(z = c(5L, 3L)), device = "cpu"), "not an input", class = "onnx_error")
})

test_that("integer inputs are checked and gathered", {
  m <- onnx_load(onnx_fixture("onnx", "embed.onnx"), device = "cpu")
  r <- onnx_run(m, list(ids = c(3, 0), bias = c(100, 200, 300)))$y
  expect_equal(as.numeric(r), c(9, 10, 11, 0, 1, 2) + c(100, 200, 300))
  expect_error(onnx_run(m, list(ids = c(0.5, 1), bias = 1:3)), "not a whole number", class = "onnx_error")
  expect_error(onnx_run(m, list(ids = c(7, 1), bias = 1:3)), "out of range|outside", class = "onnx_error")
})

test_that("host operators split the graph and the plan is made per run", {
  m <- onnx_load(onnx_fixture("onnx", "nonzero.onnx"), device = "cpu")
  expect_equal(as.numeric(onnx_run(m, list(x = c(0, 3, 0, 5)))$y), c(3, 5))
  expect_equal(as.numeric(onnx_run(m, list(x = c(1, 2, 0, 4)))$y), c(1, 2, 4))
  di <- onnx_device_info(m)
  expect_true("NonZero" %in% di$cpu_ops)
  expect_equal(unname(di$cpu_only_ops[["NonZero"]]), 1L)
})

test_that("weights are read from external data files", {
  m <- onnx_load(onnx_fixture("onnx", "external.onnx"), device = "cpu")
  expect_equal(as.numeric(onnx_run(m, list(x = c(1, 1)))$y), c(4, 6))
})

test_that("unsupported operators are all listed at once", {
  e <- expect_error(onnx_load(onnx_fixture("onnx", "unsupported.onnx"), device = "cpu"), class = "onnx_error")
  msg <- conditionMessage(e)
  expect_match(msg, "3 operators that ggmlR does not support")
  expect_match(msg, "ImageDecoder (nodes 'dec1', 'dec2')", fixed = TRUE)
  expect_match(msg, "TfIdfVectorizer (node 'tfidf')", fixed = TRUE)
  expect_match(msg, "example.org.FancyOp (node 'fancy')", fixed = TRUE)
  expect_s3_class(e, "ggmlR_error")
})

test_that("malformed and truncated files are onnx_errors, never crashes", {
  bytes <- readBin(mlp_path(), "raw", file.info(mlp_path())$size)
  f <- tempfile(fileext = ".onnx")
  for (cut in c(1L, 10L, 50L, 200L, length(bytes) - 1L)) {
    writeBin(bytes[seq_len(cut)], f)
    expect_error(onnx_load(f, device = "cpu"), class = "onnx_error")
  }
  set.seed(1)
  for (i in 1:20) {
    writeBin(as.raw(sample(0:255, 300, replace = TRUE)), f)
    expect_error(onnx_load(f, device = "cpu"), class = "onnx_error")
  }
  writeBin(raw(0), f)
  expect_error(onnx_load(f, device = "cpu"), "empty", class = "onnx_error")
  expect_error(onnx_load(tempfile(), device = "cpu"), "does not exist", class = "onnx_error")
  # a bit flipped in the middle of the weights' length prefix
  b2 <- bytes
  b2[20] <- as.raw(0xff)
  writeBin(b2, f)
  expect_error(onnx_load(f, device = "cpu"), class = "onnx_error")
})

test_that("wrong inputs are onnx_errors and the model stays usable", {
  m <- onnx_load(mlp_path(), device = "cpu")
  expect_error(onnx_run(m, list(z = 1:4)), "'z' is not an input of the model; its inputs are: 'x'", class = "onnx_error")
  expect_error(onnx_run(m, list()), "'x' missing", class = "onnx_error")
  expect_error(onnx_run(m, list(x = 1:5)), "must have 4 values \\(shape \\[1, 4\\]\\), not 5", class = "onnx_error")
  expect_error(onnx_run(m, list(x = "a")), "must be numeric", class = "onnx_error")
  expect_error(onnx_run(m, list(1:4)), "named list", class = "onnx_error")
  expect_error(onnx_run(m, 1:4), "named list", class = "onnx_error")
  expect_error(onnx_run(list(), list(x = 1)), "onnx_model", class = "onnx_error")
  expect_error(onnx_load(mlp_path(), device = "tpu"), "unknown device", class = "onnx_error")
  expect_error(onnx_load(mlp_path(), dtype = "int8"), "dtype", class = "onnx_error")
  expect_error(onnx_load(mlp_path(), n_threads = 0), "n_threads", class = "onnx_error")
  expect_equal(sum(onnx_run(m, list(x = c(1, 2, 3, 4)))$y), 1, tolerance = 1e-6)
})

test_that("dtype = 'f16' keeps large weights in half precision", {
  p <- onnx_fixture("onnx-arch", "transformer.onnx")
  x <- onnx_pb(onnx_fixture("onnx-arch", "transformer", "input_0.pb"))$value
  want <- onnx_pb(onnx_fixture("onnx-arch", "transformer", "output_0.pb"))$value
  gc()
  before <- ag_memory_stats()$persistent_bytes
  m32 <- onnx_load(p, device = "cpu")
  b32 <- ag_memory_stats()$persistent_bytes - before
  m16 <- onnx_load(p, device = "cpu", dtype = "fp16")
  b16 <- ag_memory_stats()$persistent_bytes - before - b32
  expect_equal(m16$dtype, "f16")
  expect_output(print(m16), "Weight dtype: F16")
  expect_lt(b16, 0.7 * b32)
  y <- onnx_run(m16, list(x = x))$y
  expect_lt(max(abs(y - want)) / max(abs(want)), 1e-2)
})
