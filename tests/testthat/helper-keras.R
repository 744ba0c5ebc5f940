# Helpers for the Keras-style model tests.

# Backends a model is tested on: the CPU (one_layer() compiles it with
# dtype = "f64": device "cpu", f64) and Vulkan
# (device "gpu", f32; lavapipe in CI). With GGMLR_REQUIRE_VULKAN set, a
# missing Vulkan device fails the test that asks for one.
keras_backends <- function() {
  if (ggml_vulkan_available()) return(c("cpu", "vulkan"))
  if (nzchar(Sys.getenv("GGMLR_REQUIRE_VULKAN"))) {
    fail(paste("GGMLR_REQUIRE_VULKAN is set but no Vulkan device was found:", .rs(rs_vulkan_status())))
  }
  "cpu"
}

# A compiled model of one layer applied to an input of `shape`.
one_layer <- function(shape, layer, backend = "cpu", dtype = "float32") {
  inp <- ggml_input(shape, dtype = dtype)
  ggml_compile(ggml_model(inp, layer(inp)), loss = "mse", backend = backend,
               dtype = if (backend == "cpu") "f64" else "f32")
}

# The weights of the model's last layer, by name.
last_weights <- function(m) {
  rt <- m$compilation$runtime
  st <- rt$plan$steps[[length(rt$plan$steps)]]
  rt$weights[[st$key]]
}

# The model's single input, prepared, and as tensors (parameters when
# `as_param`, for input gradients).
keras_inputs <- function(m, x, as_param = FALSE) {
  rt <- m$compilation$runtime
  px <- .nn_prepare_x(rt, x, "test")
  lapply(px$x, function(v) {
    if (is.integer(v)) v else if (as_param) ag_param(v, device = rt$device) else ag_tensor(v, device = rt$device)
  })
}

# The first output of the model on inputs `xs` (tensors) as one row per sample.
keras_out <- function(m, xs, training = FALSE) {
  rt <- m$compilation$runtime
  vals <- .nn_run(rt, xs, training)
  vals[[rt$plan$outputs[1L]]]
}

keras_forward <- function(m, x, training = FALSE) t(.ag_data(keras_out(m, keras_inputs(m, x), training)))

# Analytical gradients of sum(out * R) with respect to the last layer's
# weights and the (float) input, and central differences of the same sum.
# `seed` fixes the dropout masks of every evaluation.
keras_gradcheck <- function(m, x, eps, training = FALSE, seed = 1L, input_grad = TRUE) {
  rt <- m$compilation$runtime
  xs <- keras_inputs(m, x, as_param = input_grad)
  ts <- c(last_weights(m), Filter(is_ag_tensor, xs))
  for (t in ts) t$grad <- NULL
  set.seed(seed)
  R <- NULL
  loss <- function(tape) {
    set.seed(seed)
    out <- keras_out(m, xs, training)
    if (is.null(R)) R <<- matrix(seq_len(prod(out$shape)) %% 5 / 4 - 0.45, out$shape[1L])
    ag_sum(ag_mul(out, R))
  }
  with_grad_tape(l <- loss())
  backward(l)
  ana <- lapply(ts, function(t) t$grad)
  num <- lapply(ts, function(t) {
    x0 <- .ag_data(t)
    g <- x0 * 0
    for (k in seq_along(x0)) {
      v <- x0
      v[k] <- x0[k] + eps
      .ag_data_set(t, v)
      fp <- sum(.ag_data(loss()))
      v[k] <- x0[k] - eps
      .ag_data_set(t, v)
      fm <- sum(.ag_data(loss()))
      g[k] <- (fp - fm) / (2 * eps)
    }
    .ag_data_set(t, x0)
    g
  })
  list(ana = ana, num = num)
}

# Gradient check with a tolerance fit for the backend: f64 on the CPU, f32
# (larger steps) on Vulkan.
expect_keras_grads <- function(m, x, backend, training = FALSE, input_grad = TRUE, what = "") {
  eps <- if (backend == "cpu") 1e-6 else 1e-2
  tol <- if (backend == "cpu") 1e-6 else 3e-2
  r <- keras_gradcheck(m, x, eps, training = training, input_grad = input_grad)
  for (i in seq_along(r$ana)) {
    a <- r$ana[[i]]
    n <- r$num[[i]]
    expect_false(is.null(a), info = paste(what, backend, "gradient", i))
    err <- max(abs(a - n)) / (1 + max(abs(n)))
    expect_lt(err, tol, label = sprintf("%s on %s: relative gradient error of tensor %d", what, backend, i))
  }
}

expect_close_to <- function(a, b, backend, what = "") {
  tol <- if (backend == "cpu") 1e-9 else 2e-4
  expect_equal(dim(a), dim(b), info = what)
  err <- max(abs(a - b)) / (1 + max(abs(b)))
  expect_lt(err, tol, label = sprintf("%s on %s: relative forward error", what, backend))
}

# Two-class data the tests learn: the class is whether x1 + x2 > 1.
two_class <- function(n, p = 4, seed = 1) {
  set.seed(seed)
  x <- matrix(runif(n * p), n, p)
  cls <- as.integer(x[, 1] + x[, 2] > 1)
  list(x = x, cls = cls, y = cbind(cls == 0, cls == 1) * 1)
}
