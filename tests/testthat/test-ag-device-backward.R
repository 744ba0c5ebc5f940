# On device "gpu" the backward pass runs on the device: all of it is one graph
# (one queue submission on Vulkan) however deep the model, gradients stay in
# the pass pool, the optimizer reads them there, and a training step
# downloads nothing but the loss and batch norm's batch statistics.

mlp <- function(depth, d = 8L) {
  layers <- list(ag_linear(4L, d), ag_batch_norm(d), list(forward = ag_relu), ag_dropout(0.2))
  for (i in seq_len(depth - 1L)) layers <- c(layers, list(ag_linear(d, d, "relu")))
  do.call(ag_sequential, c(layers, list(ag_linear(d, 3L))))
}

# Submissions and download bytes of backward(), of optimizer$step() and of a
# whole step (tape, backward, step, zero_grad), after two warm-up steps.
step_traffic <- function(depth, be, x, y) {
  model <- mlp(depth)
  opt <- optimizer_adam(model$parameters(), lr = 0.01)
  subs <- function() ggml_vulkan_submission_count(be)
  down <- function() ag_memory_stats()$download_bytes
  step <- function() {
    d0 <- down()
    with_grad_tape(loss <- ag_softmax_cross_entropy_loss(model$forward(ag_tensor(x)), y))
    k0 <- subs(); d1 <- down()
    g <- backward(loss)
    k1 <- subs(); d2 <- down()
    keys <- ls(g)
    opt$step(g)
    k2 <- subs(); d3 <- down()
    opt$zero_grad()
    l <- loss$data[1]
    list(bwd_subs = k1 - k0, bwd_down = d2 - d1, opt_subs = k2 - k1, opt_down = d3 - d2,
         step_down = down() - d0 - 4, loss = l, n_grads = length(keys))
  }
  step(); step()
  r <- step()
  r$n_params <- length(model$parameters())
  r
}

test_that("backward() on \"gpu\" is one submission and downloads nothing, at any depth", {
  skip_if_no_vulkan()
  set.seed(81)
  on_device("gpu", {
    be <- ggmlR:::.ag_device_state$backend
    skip_if_not(isTRUE(ggml_vulkan_is_backend(be)), "the best backend is not Vulkan")
    x <- matrix(stats::rnorm(4 * 16), 4, 16)
    y <- sample(0:2, 16, replace = TRUE)
    # Long graphs are cut into submissions of about 0.2 s of device time,
    # predicted from the times measured so far; on lavapipe the device is
    # the CPU, and on a machine loaded far beyond its cores a measured time
    # can be long enough to cut even this small graph. A cut that depth
    # causes happens every time; one that load causes does not repeat.
    for (attempt in 1:3) {
      a <- step_traffic(1L, be, x, y)
      b <- step_traffic(5L, be, x, y)
      if (identical(a$bwd_subs, b$bwd_subs) && identical(a$opt_subs, b$opt_subs)) break
    }
    expect_identical(a$n_grads, a$n_params)
    expect_identical(b$n_grads, b$n_params)
    # the whole backward pass: one graph, whatever the number of layers
    expect_lte(a$bwd_subs, 2)
    expect_identical(b$bwd_subs, a$bwd_subs)
    expect_equal(a$bwd_down, 0)
    expect_equal(b$bwd_down, 0)
    # Adam updates every parameter in one graph, from the device gradients
    expect_lte(a$opt_subs, 2)
    expect_identical(b$opt_subs, a$opt_subs)
    expect_equal(b$opt_down, 0)
    # a whole step downloads the loss (4 bytes, read above) and the batch
    # statistics of the batch norm layer (2 x 8 features x 4 bytes), nothing else
    expect_equal(a$step_down, 2 * 8 * 4)
    expect_equal(b$step_down, 2 * 8 * 4)
  })
})

test_that("device gradients read from R, clipped and rescued match \"cpu\"", {
  set.seed(82)
  W0 <- matrix(stats::rnorm(12), 3, 4)
  x <- matrix(stats::rnorm(20), 4, 5)
  run <- function(device) on_device(device, {
    w <- ag_param(W0)
    with_grad_tape(loss <- ag_sum(ag_mul(ag_tanh(ag_matmul(w, x)), 3)))
    g <- backward(loss)
    norm <- clip_grad_norm(list(w = w), g, max_norm = 0.5)
    clipped <- g[[as.character(w$id)]]
    with_grad_tape(ag_sum(ag_matmul(w, x)))     # frees the pass pool
    list(norm = norm, clipped = clipped, after_reset = g[[as.character(w$id)]], acc = w$grad)
  })
  cpu <- run("cpu")
  gpu <- run("gpu")
  expect_f32_close(gpu$norm, cpu$norm, what = "norm")
  expect_f32_close(gpu$clipped, cpu$clipped, what = "clipped gradient")
  expect_equal(sqrt(sum(gpu$clipped^2)), 0.5, tolerance = 1e-4)
  expect_f32_close(gpu$after_reset, cpu$after_reset, what = "gradient after a pass reset")
  expect_f32_close(gpu$acc, cpu$acc, what = "accumulated $grad")
})

# One SGD step, then zero_grad(): the parameter's gradient and the stepped
# backward() result's entry read NULL; the weights moved by lr * gradient.
zero_grad_releases <- function(tol) {
  w <- ag_param(matrix(1:6 / 6, 2, 3))
  x <- matrix(1:12 / 12, 3, 4)
  opt <- optimizer_sgd(list(w = w), lr = 0.1)
  with_grad_tape(loss <- ag_sum(ag_matmul(w, x)))
  g <- backward(loss)
  want <- matrix(rowSums(x), 2, 3, byrow = TRUE)
  expect_equal(g[[as.character(w$id)]], want, tolerance = tol)
  opt$step(g)
  opt$zero_grad()
  expect_null(w$grad)
  expect_null(g[[as.character(w$id)]])
  expect_equal(w$data, matrix(1:6 / 6, 2, 3) - 0.1 * want, tolerance = tol)
  list(w = w, x = x, want = want)
}

test_that("zero_grad() on \"cpu\" releases the stepped gradients; the parameters train on", {
  on_device("cpu", {
    r <- zero_grad_releases(1e-12)
    with_grad_tape(loss <- ag_sum(ag_matmul(r$w, r$x)))
    expect_equal(backward(loss)[[as.character(r$w$id)]], r$want, tolerance = 1e-12)
  })
})

test_that("zero_grad() on \"gpu\" releases the stepped gradients; other reads still work", {
  on_device("gpu", {
    r <- zero_grad_releases(1e-6)
    d0 <- ag_memory_stats()$download_bytes
    with_grad_tape(loss <- ag_sum(ag_matmul(r$w, r$x)))
    expect_equal(ag_memory_stats()$download_bytes - d0, 0)
  })
})
