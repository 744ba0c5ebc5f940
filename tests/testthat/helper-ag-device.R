# Running the same code on device "cpu" (f64 on the host) and "gpu" (graphs on
# the residency backend in f32) to compare them.

on_device <- function(device, code) {
  old <- ag_device(device)
  on.exit(ag_device(old), add = TRUE)
  force(code)
}

# Forward value and the gradients of sum(fn(inputs) * W) on `device`.
# `inputs` are matrices; `grad` says which become parameters.
run_op <- function(device, fn, inputs, grad, W = NULL) {
  on_device(device, {
    ts <- Map(function(m, g) if (g) ag_param(m) else ag_tensor(m), inputs, grad)
    with_grad_tape(out <- fn(ts))
    val <- out$data
    if (is.null(W)) W <- matrix(seq_along(val) %% 3 - 1 + 0.5, nrow(val))
    with_grad_tape(loss <- ag_sum(ag_mul(fn(ts), W)))
    backward(loss)
    list(value = val, grads = lapply(ts[grad], function(t) t$grad), ts = ts, W = W)
  })
}

# A relative f32 tolerance check: |a - b| <= tol * (1 + |b|).
expect_f32_close <- function(a, b, tol = 1e-4, what = "") {
  expect_equal(dim(a), dim(b), info = what)
  err <- max(abs(a - b) / (1 + abs(b)))
  expect_lte(err, tol, label = paste("relative error", what))
}
