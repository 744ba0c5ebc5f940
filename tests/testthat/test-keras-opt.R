# ggml's optimisation API: graphs of ggml ops trained on the autograd engine.

linear_setup <- function(n = 100, p = 3, batch = 10, backend = ggml_backend_cpu_init(), hidden = FALSE) {
  sched <- ggml_backend_sched_new(list(backend))
  ctx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
  x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, p, batch)
  w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, p, 1)
  b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1)
  ggml_set_param(w)
  ggml_set_param(b)
  out <- ggml_add(ctx, ggml_mul_mat(ctx, w, x), b)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(w, rep(0, p))
  ggml_backend_tensor_set_data(b, 0)
  set.seed(31)
  X <- matrix(rnorm(n * p), n, p)
  Y <- X %*% seq_len(p) + 0.5
  ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, p, 1, n)
  ggml_backend_tensor_set_data(ggml_opt_dataset_data(ds), as.vector(t(X)))
  ggml_backend_tensor_set_data(ggml_opt_dataset_labels(ds), as.vector(Y))
  list(sched = sched, ctx = ctx, x = x, w = w, b = b, out = out, ds = ds, X = X, Y = Y)
}

test_that("ggml_fit_opt learns a linear regression's coefficients (base R's lm as the oracle)", {
  backends <- list(ggml_backend_cpu_init())
  if ("vulkan" %in% keras_backends()) backends <- c(backends, list(ggml_vulkan_init(0)))
  for (be in backends) {
    s <- linear_setup(backend = be)
    st <- get(".ag_device_state", envir = asNamespace("ggmlR"))
    if (ggml_vulkan_is_backend(be)) st$backend <- be
    h <- ggml_fit_opt(s$sched, s$ctx, s$x, s$out, s$ds, loss_type = ggml_opt_loss_type_mse(),
                      nepoch = 150, nbatch_logical = 10, val_split = 0.2, silent = TRUE,
                      callbacks = list(list(on_epoch_begin = function(ep, logs, state) {
                        if (ep == 1) ggml_opt_set_lr(state$lr_ud, adamw_lr = 0.05)
                      }), ggml_schedule_step_decay(step_size = 40, gamma = 0.5)))
    expect_s3_class(h, "data.frame")
    expect_equal(nrow(h), 150)
    coef <- coef(lm(s$Y ~ s$X))
    tol <- if (ggml_vulkan_is_backend(be)) 2e-3 else 1e-4
    expect_equal(ggml_backend_tensor_get_data(s$w), unname(coef[-1]), tolerance = tol)
    expect_equal(ggml_backend_tensor_get_data(s$b), unname(coef[1]), tolerance = tol)
    expect_lt(tail(h$val_loss, 1), 1e-4)
    expect_true(all(is.na(h$train_accuracy)))
  }
})

test_that("gradient accumulation: two batches of 5 step like one batch of 10 (SGD, mean loss)", {
  run <- function(batch, period) {
    s <- linear_setup(n = 10, batch = batch)
    o <- ggml_opt_init(s$sched, ggml_opt_loss_type_mse(), ggml_opt_optimizer_type_sgd(), period,
                       s$ctx, s$x, s$out)
    ggml_opt_epoch(o, s$ds, NULL, NULL, idata_split = 10, callback_train = FALSE, callback_eval = FALSE)
    c(ggml_backend_tensor_get_data(s$w), ggml_backend_tensor_get_data(s$b))
  }
  one <- run(10, 1L)
  two <- run(5, 2L)
  expect_equal(two, one, tolerance = 1e-6)
  # SGD's first step from zero: w = -lr * grad, grad of mean((xw + b - y)^2)
  s <- linear_setup(n = 10)
  g <- -2 * colMeans(cbind(s$X, 1) * as.vector(s$Y))
  expect_equal(one, -0.001 * g, tolerance = 1e-6)
})

test_that("cross entropy: a softmax classifier, its accuracy and predictions", {
  set.seed(32)
  cpu <- ggml_backend_cpu_init()
  sched <- ggml_backend_sched_new(list(cpu))
  ctx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
  x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 20)
  w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 3)
  ggml_set_param(w)
  out <- ggml_soft_max(ctx, ggml_mul_mat(ctx, w, x))
  logits <- ggml_mul_mat(ctx, w, x)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  ggml_backend_tensor_set_data(w, rnorm(9, sd = 0.1))
  n <- 200
  X <- cbind(matrix(rnorm(n * 2), n, 2), 1)
  cls <- ifelse(X[, 1] > 0.5, 2L, ifelse(X[, 1] < -0.5, 0L, 1L))
  ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 3, 3, n)
  ggml_backend_tensor_set_data(ggml_opt_dataset_data(ds), as.vector(t(X)))
  ggml_backend_tensor_set_data(ggml_opt_dataset_labels(ds), as.vector(t(diag(3)[cls + 1L, ])))
  fit <- ggml_opt_init_for_fit(sched, ggml_opt_loss_type_cross_entropy(), ggml_opt_optimizer_type_adamw(), 1L,
                               ctx, x, logits)
  ggml_opt_set_lr(fit$lr_ud, adamw_lr = 0.05)
  rt <- ggml_opt_result_init()
  for (ep in 1:60) {
    ggml_opt_result_reset(rt)
    ggml_opt_epoch(fit$opt_ctx, ds, rt, NULL, idata_split = n, callback_train = FALSE, callback_eval = FALSE)
  }
  expect_gt(ggml_opt_result_accuracy(rt)[["accuracy"]], 0.85)
  expect_equal(ggml_opt_result_ndata(rt), n)
  pred <- ggml_opt_result_pred(rt)
  expect_type(pred, "integer")
  expect_length(pred, n)
  # the reported loss is the mean over batches of softmax cross entropy
  W <- matrix(ggml_backend_tensor_get_data(w), 3, 3)
  ev <- ggml_opt_result_init()
  ggml_opt_epoch(fit$opt_ctx, ds, NULL, ev, idata_split = 0, callback_train = FALSE, callback_eval = FALSE)
  z <- X %*% W
  p <- exp(z - apply(z, 1, max))
  p <- p / rowSums(p)
  expect_equal(ggml_opt_result_loss(ev)[["loss"]], mean(-log(p[cbind(seq_len(n), cls + 1L)])), tolerance = 1e-6)
  expect_equal(ggml_opt_result_accuracy(ev)[["accuracy"]], mean(max.col(z, "first") == cls + 1L))
  ggml_opt_free(fit$opt_ctx)
})

test_that("datasets: batches in shuffled order, as base R indexing says", {
  ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 3, 2, 6, ndata_shard = 2)
  X <- matrix(as.double(1:18), 3, 6)
  L <- matrix(as.double(101:112), 2, 6)
  ggml_backend_tensor_set_data(ggml_opt_dataset_data(ds), as.vector(X))
  ggml_backend_tensor_set_data(ggml_opt_dataset_labels(ds), as.vector(L))
  ctx <- ggml_init(1024 * 1024)
  xb <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
  lb <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)
  ggml_opt_dataset_get_batch(ds, xb, lb, ibatch = 2)
  expect_equal(ggml_backend_tensor_get_data(xb), as.vector(X[, 5:6]))
  set.seed(33)
  ggml_opt_dataset_shuffle(NULL, ds, -1)
  perm <- ds$perm
  expect_setequal(perm, 0:2)
  ggml_opt_dataset_get_batch(ds, xb, lb, ibatch = 0)
  expect_equal(ggml_backend_tensor_get_data(xb), as.vector(X[, perm[1] * 2 + 1:2]))
  expect_equal(ggml_backend_tensor_get_data(lb), as.vector(L[, perm[1] * 2 + 1:2]))
  expect_error(ggml_opt_dataset_get_batch(ds, xb, lb, ibatch = 3), "runs past", class = "ggmlR_error")
  ggml_opt_dataset_free(ds)
  expect_error(ggml_opt_dataset_ndata(ds), "freed", class = "ggmlR_error")
})

test_that("ggml_opt_eval writes the batch's outputs into the graph's outputs tensor", {
  s <- linear_setup(n = 10, batch = 10)
  o <- ggml_opt_init(s$sched, ggml_opt_loss_type_mse(), ctx_compute = s$ctx, inputs = s$x, outputs = s$out)
  ggml_backend_tensor_set_data(s$w, c(0.5, -1, 2))
  ggml_backend_tensor_set_data(s$b, 0.25)
  ggml_opt_alloc(o, backward = FALSE)
  ggml_backend_tensor_set_data(s$x, as.vector(t(s$X)))
  ggml_backend_tensor_set_data(ggml_opt_labels(o), as.vector(s$Y))
  ggml_opt_eval(o)
  # base R: each datapoint's prediction x . w + b
  expect_equal(ggml_backend_tensor_get_data(ggml_opt_outputs(o)), as.vector(s$X %*% c(0.5, -1, 2) + 0.25),
               tolerance = 1e-6)
  # a training step: the outputs are those of the weights before the update
  before <- ggml_backend_tensor_get_data(s$w)
  ggml_opt_alloc(o, backward = TRUE)
  ggml_opt_eval(o)
  expect_equal(ggml_backend_tensor_get_data(ggml_opt_outputs(o)), as.vector(s$X %*% before + 0.25), tolerance = 1e-6)
  expect_false(isTRUE(all.equal(ggml_backend_tensor_get_data(s$w), before)))
  ggml_opt_free(o)
})

test_that("ggml_opt_eval: a forward step, a training step, and clear errors", {
  s <- linear_setup(n = 10, batch = 10)
  o <- ggml_opt_init(s$sched, ggml_opt_loss_type_mse(), ctx_compute = s$ctx, inputs = s$x, outputs = s$out)
  expect_true(ggml_opt_static_graphs(o))
  ggml_opt_alloc(o, backward = FALSE)
  ggml_backend_tensor_set_data(s$x, as.vector(t(s$X)))
  ggml_backend_tensor_set_data(ggml_opt_labels(o), as.vector(s$Y))
  r <- ggml_opt_result_init()
  ggml_opt_eval(o, r)
  expect_equal(ggml_backend_tensor_get_data(ggml_opt_loss(o)), mean(s$Y^2), tolerance = 1e-6)
  expect_equal(ggml_backend_tensor_get_data(s$w), c(0, 0, 0))
  ggml_opt_alloc(o, backward = TRUE)
  ggml_opt_eval(o, r)
  expect_false(all(ggml_backend_tensor_get_data(s$w) == 0))
  expect_equal(ggml_opt_result_ndata(r), 20)
  # an op without a rule here, a dataset that does not fit
  ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
  x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2)
  w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2)
  ggml_set_param(w)
  y <- ggml_argmax(ctx, ggml_add(ctx, x, w))
  ggml_backend_alloc_ctx_tensors(ctx, ggml_backend_cpu_init())
  o2 <- ggml_opt_init(s$sched, ggml_opt_loss_type_sum(), ctx_compute = ctx, inputs = x, outputs = y)
  ggml_opt_alloc(o2)
  expect_error(ggml_opt_eval(o2), "cannot differentiate op ARGMAX", class = "ggmlR_error")
  expect_error(ggml_opt_epoch(o, ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 5, 1, 10), idata_split = 10),
               "datapoints have 5 values but the graph's inputs take 3", class = "ggmlR_error")
  expect_error(ggml_opt_init(s$sched, 7), "loss_type", class = "ggmlR_error")
  ggml_opt_free(o)
  expect_error(ggml_opt_eval(o), "freed", class = "ggmlR_error")
})
