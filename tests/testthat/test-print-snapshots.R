# Snapshots of every print method the package registers, and of the main
# messages and errors a user meets. Numbers that differ from run to run
# (buffer and tensor ids, dates, device names) are masked.

mask <- function(x) {
  x <- gsub("#[0-9]+", "#<n>", x)
  x <- gsub("id [0-9]+", "id <n>", x)
  x <- gsub("saved [0-9-]+ [0-9:]+", "saved <date>", x)
  x <- gsub("created [0-9-]+ [0-9:.]+( [A-Za-z0-9+-]+)?", "created <date>", x)
  x <- gsub("ggmlR [0-9]+(\\.[0-9]+)+", "ggmlR <version>", x)
  x <- gsub("generation [0-9]+", "generation <n>", x)
  x <- gsub("(<ggml_backend_device> CPU \\(cpu, )[^\n]*\\)", "\\1<cpu model>)", x)
  gsub("Vulkan device [0-9]+, [^\n]*", "Vulkan device <name>", x)
}

# One object per print method: a new print method needs an entry here.
printable <- function() {
  ctx <- ggml_init(1024 * 1024)
  a <- ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3), "a")
  cpu <- ggml_backend_cpu_init()
  bctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  bt <- ggml_new_tensor_1d(bctx, GGML_TYPE_F16, 8)
  set.seed(9)
  w <- ag_param(matrix(c(1, 2, 3, 4), 2))
  with_grad_tape(l <- ag_sum(w * w))
  grads <- backward(l)
  model <- ag_sequential(ag_linear(4, 8, "relu"), ag_dropout(0.2), ag_linear(8, 3))
  h <- ag_fit(model, scale(iris[, 1:4]), iris$Species, epochs = 2, batch_size = 50, verbose = 0)
  net <- ncnn_net(num_threads = 1)
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU relu 1 1 data out\n")
  net$load_model(ncnn_datareader_empty())
  sgd <- optimizer_sgd(list(w = w), lr = 0.1)
  buf <- ggml_backend_alloc_ctx_tensors(bctx, cpu)
  mctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  ggml_new_tensor_1d(mctx, GGML_TYPE_F32, 16)
  mbuf <- ggml_backend_multi_buffer_alloc_buffer(list(ggml_backend_alloc_ctx_tensors(mctx, cpu)))
  psched <- ggml_backend_sched_new(list(cpu))
  gctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  gx <- ggml_new_tensor_2d(gctx, GGML_TYPE_F32, 8, 4)
  gg <- ggml_build_forward_expand(gctx, ggml_relu(gctx, ggml_scale(gctx, gx, 2)))
  galloc <- ggml_gallocr_new()
  ggml_gallocr_alloc_graph(galloc, gg)
  ggml_backend_sched_alloc_graph(psched, ggml_build_forward_expand(gctx, ggml_sqr(gctx, gx)))
  # ggml's optimisation API: a two-class linear model evaluated once
  sched <- ggml_backend_sched_new(list(cpu))
  octx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
  ox <- ggml_new_tensor_2d(octx, GGML_TYPE_F32, 2, 4)
  ow <- ggml_set_param(ggml_new_tensor_2d(octx, GGML_TYPE_F32, 2, 2))
  oout <- ggml_mul_mat(octx, ow, ox)
  obuf <- ggml_backend_alloc_ctx_tensors(octx, cpu)
  ggml_backend_tensor_set_data(ow, c(1, 0, 0, 1))
  ggml_backend_tensor_set_data(ox, c(2, 0, 0, 2, 1, 3, 3, 1))
  for_fit <- ggml_opt_init_for_fit(sched, ggml_opt_loss_type_cross_entropy(),
                                   ctx_compute = octx, inputs = ox, outputs = oout)
  opt <- for_fit$opt_ctx
  ggml_opt_alloc(opt, backward = FALSE)
  ggml_backend_tensor_set_data(ggml_opt_labels(opt), c(1, 0, 0, 1, 1, 0, 1, 0))
  res <- ggml_opt_result_init()
  ggml_opt_eval(opt, res)
  ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, ne_datapoint = 2, ne_label = 2, ndata = 8)
  # the Keras-style API (explicit names: automatic ones count across the session)
  set.seed(3)
  kx <- matrix(seq(0, 1, length.out = 24), 8, 3, byrow = TRUE)
  ky <- cbind(kx[, 1] > 0.5, kx[, 1] <= 0.5) * 1
  seq_model <- ggml_model_sequential() |>
    ggml_layer_dense(4, activation = "relu", input_shape = 3) |>
    ggml_layer_dense(2, activation = "softmax") |>
    ggml_compile(loss = "categorical_crossentropy", learning_rate = 0.05, backend = "cpu")
  seq_model <- ggml_fit(seq_model, kx, ky, epochs = 3, batch_size = 4, verbose = 0, shuffle = FALSE)
  fx <- ggml_input(shape = 3, name = "x")
  fh <- ggml_layer_dense(fx, 4, activation = "relu", name = "hidden")
  fo <- ggml_layer_dense(fh, 2, activation = "softmax", name = "probs")
  gguf_path <- file.path(tempdir(), "print-snapshot.gguf")
  gguf_write(gguf_path, list(general.name = "snapshot"), tensors = list(w = matrix(1:4, 2)))
  gg <- gguf_load(gguf_path)
  # what holds ledger memory is freed by the caller (free()), not left to
  # the garbage collector in the middle of another test
  free <- function() {
    gguf_free(gg)
    unlink(gguf_path)
    ggml_opt_free(opt)
    ggml_opt_result_free(res)
    ggml_opt_dataset_free(ds)
    ggml_backend_buffer_free(obuf)
    ggml_free(octx)
    ggml_backend_sched_free(sched)
    ggml_gallocr_free(galloc)
    ggml_backend_sched_free(psched)
    ggml_backend_buffer_free(mbuf)
    ggml_free(mctx)
    ggml_free(gctx)
    ggml_backend_buffer_free(buf)
    ggml_free(bctx)
    ggml_free(ctx)
    ggml_backend_free(cpu)
  }
  objs <- list(
    ag_dataloader = ag_dataloader(matrix(1:20, 2, 10), batch_size = 4),
    ag_grads = grads,
    ag_handle = .ag_handle(NULL, c(2L, 2L)),
    ag_history = h,
    ag_layer = model,
    ag_memory_stats = {
      s <- ag_memory_stats()
      s[1, ] <- 0
      s$limit <- Inf
      s
    },
    ag_optimizer = optimizer_adam(model$parameters(), lr = 0.01),
    ag_scheduler = lr_scheduler_step(sgd, step_size = 5),
    ag_tensor = w,
    ggml_backend = cpu,
    ggml_backend_device = ggml_backend_dev_by_type(ggml_backend_device_type_cpu()),
    ggml_backend_multi_buffer = mbuf,
    ggml_backend_reg = ggml_backend_reg_by_name("CPU"),
    ggml_gallocr = galloc,
    ggml_backend_buffer = buf,
    ggml_backend_sched = sched,
    ggml_cgraph = ggml_build_forward_expand(ctx, ggml_relu(ctx, a)),
    ggml_context = ctx,
    ggml_functional_model = ggml_model(fx, fo),
    ggml_history = seq_model$history,
    ggml_layer = ggml_dense(8, activation = "relu", name = "encoder"),
    ggml_opt_context = opt,
    ggml_opt_dataset = ds,
    ggml_opt_lr = for_fit$lr_ud,
    ggml_opt_result = res,
    ggml_sequential_model = seq_model,
    ggml_tensor = a,
    ggml_tensor_node = fo,
    ggmlR_marshaled = ggml_marshal_model(seq_model),
    gguf = gg,
    ncnn_extractor = net$create_extractor(),
    ncnn_layer = ncnn_layer(function(x) x),
    ncnn_net = net,
    summary.ag_layer = summary(model),
    onnx_model = onnx_load(system.file("extdata", "onnx", "tiny_mlp.onnx", package = "ggmlR"), device = "cpu")
  )
  attr(objs, "free") <- free
  objs
}

print_titled <- function(cls, x) {
  cat("== print.", cls, "\n", sep = "")
  print(x)
}

test_that("every registered print method has a snapshot", {
  methods <- getNamespaceInfo(asNamespace("ggmlR"), "S3methods")
  classes <- sort(methods[methods[, 1] == "print", 2])
  objs <- printable()
  expect_identical(setdiff(classes, names(objs)), character())
  for (cl in names(objs)) {
    expect_true(inherits(objs[[cl]], cl), info = cl)
    expect_snapshot(print_titled(cl, objs[[cl]]), transform = mask)
  }
  attr(objs, "free")()
})

test_that("main messages and errors", {
  expect_snapshot(b <- ggml_backend_init_best(), transform = mask)
  ggml_backend_free(b)
  cpu <- ggml_backend_cpu_init()
  ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
  t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  ggml_backend_buffer_free(buf)
  expect_snapshot(error = TRUE, ggml_backend_tensor_get_data(t), transform = mask)
  small <- ggml_init(1024 * 1024)
  x <- ggml_new_tensor_2d(small, GGML_TYPE_F32, 3, 4)
  y <- ggml_new_tensor_2d(small, GGML_TYPE_F32, 5, 4)
  expect_snapshot(error = TRUE, ggml_mul_mat(small, x, y), transform = mask)
  expect_snapshot(error = TRUE, ag_matmul(ag_tensor(matrix(1, 2, 3)), ag_tensor(matrix(1, 2, 3))))
  expect_snapshot(error = TRUE, ag_device("tpu"))
  expect_snapshot(error = TRUE, ncnn_net(num_threads = 1)$load_param_mem("7767517\n1 1\nNoSuchLayer x 0 1 x\n"))
  set.seed(12)
  model <- ag_sequential(ag_linear(4, 3))
  expect_snapshot(ag_fit(model, iris[, 1:4], iris$Species, epochs = 1, verbose = 2),
                  transform = function(x) sub("[0-9.]+s$", "<time>s", x))
  expect_snapshot(error = TRUE, ag_fit(model, iris, iris$Species))
  expect_snapshot(error = TRUE, predict(model, matrix(1, 3, 3)))
  ggml_free(small)
  ggml_free(ctx)
})
