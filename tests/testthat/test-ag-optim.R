# One step of loss = sum(w * c) has gradient c: compare each optimizer with a
# hand-written R update over several steps.
run_steps <- function(make_opt, w0, grads_seq) {
  w <- ag_param(w0)
  opt <- make_opt(list(w = w))
  for (g in grads_seq) {
    with_grad_tape(loss <- ag_sum(ag_mul(w, g)))
    opt$step(backward(loss))
    opt$zero_grad()
  }
  list(w = w$data, opt = opt)
}

set.seed(30)
w0 <- matrix(rnorm(6), 2, 3)
gs <- replicate(4, matrix(rnorm(6), 2, 3), simplify = FALSE)

test_that("sgd matches the R reference, with and without momentum", {
  w <- w0
  for (g in gs) w <- w - 0.1 * g
  expect_lt(max_abs(run_steps(function(p) optimizer_sgd(p, lr = 0.1), w0, gs)$w, w), 1e-14)
  w <- w0; v <- 0 * w0
  for (g in gs) { v <- 0.9 * v + g; w <- w - 0.05 * v }
  r <- run_steps(function(p) optimizer_sgd(p, lr = 0.05, momentum = 0.9), w0, gs)
  expect_lt(max_abs(r$w, w), 1e-14)
  expect_lt(max_abs(r$opt$state("w")$m, as.vector(v)), 1e-14)
})

adam_ref <- function(w0, gs, lr, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0) {
  w <- w0; m <- 0 * w0; v <- 0 * w0
  for (t in seq_along(gs)) {
    g <- gs[[t]]
    w <- w * (1 - lr * wd)
    m <- b1 * m + (1 - b1) * g
    v <- b2 * v + (1 - b2) * g^2
    w <- w - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  }
  w
}

test_that("adam and adamw match the R reference", {
  r <- run_steps(function(p) optimizer_adam(p, lr = 0.01), w0, gs)
  expect_lt(max_abs(r$w, adam_ref(w0, gs, 0.01)), 1e-14)
  expect_identical(r$opt$t, 4L)
  expect_identical(r$opt$state(1)$t, 4)
  r <- run_steps(function(p) optimizer_adam(p, lr = 0.02, beta1 = 0.8, beta2 = 0.99, eps = 1e-6), w0, gs)
  expect_lt(max_abs(r$w, adam_ref(w0, gs, 0.02, 0.8, 0.99, 1e-6)), 1e-14)
  r <- run_steps(function(p) optimizer_adamw(p, lr = 0.01, weight_decay = 0.1), w0, gs)
  expect_lt(max_abs(r$w, adam_ref(w0, gs, 0.01, wd = 0.1)), 1e-14)
  expect_output(print(r$opt), "ADAMW")
})

test_that("parameters without a gradient are skipped; lr changes apply", {
  a <- ag_param(matrix(1, 2, 2)); b <- ag_param(matrix(1, 2, 2))
  opt <- optimizer_sgd(list(a = a, b = b), lr = 1)
  with_grad_tape(loss <- ag_sum(a))
  opt$step(backward(loss))
  expect_equal(a$data, matrix(0, 2, 2))
  expect_equal(b$data, matrix(1, 2, 2))
  opt$lr <- 0.5
  with_grad_tape(loss <- ag_sum(a))
  opt$step(backward(loss))
  expect_equal(a$data, matrix(-0.5, 2, 2))
  expect_error(optimizer_adam(list(1, 2)), "list of ag_param")
})

test_that("clip_grad_norm rescales to max_norm and returns the norm", {
  a <- ag_param(matrix(c(3, 0), 2, 1)); b <- ag_param(matrix(4, 1, 1))
  with_grad_tape(loss <- ag_add(ag_sum(ag_mul(a, a)), ag_sum(ag_mul(b, b))))
  grads <- backward(loss)
  n <- clip_grad_norm(list(a = a, b = b), grads, max_norm = 1)
  expect_equal(n, sqrt(6^2 + 8^2))
  ga <- grads[[as.character(a$id)]]; gb <- grads[[as.character(b$id)]]
  expect_equal(sqrt(sum(ga^2) + sum(gb^2)), 1, tolerance = 1e-6)
  expect_equal(ga, matrix(c(6, 0), 2, 1) / (10 + 1e-6))
  # below the limit: unchanged
  n2 <- clip_grad_norm(list(a = a, b = b), grads, max_norm = 5)
  expect_equal(n2, 1, tolerance = 1e-6)
  expect_equal(grads[[as.character(a$id)]], ga)
})

test_that("step and cosine schedulers follow their formulas", {
  w <- ag_param(matrix(1))
  opt <- optimizer_sgd(list(w = w), lr = 0.1)
  s <- lr_scheduler_step(opt, step_size = 10, gamma = 0.5)
  lrs <- vapply(1:30, function(i) s$step(), numeric(1))
  expect_equal(lrs[c(9, 10, 19, 20, 30)], c(0.1, 0.05, 0.05, 0.025, 0.0125))
  opt2 <- optimizer_adam(list(w = w), lr = 0.1)
  cs <- lr_scheduler_cosine(opt2, T_max = 10, lr_min = 0.01)
  lrs <- vapply(1:12, function(i) cs$step(), numeric(1))
  t <- pmin(0:11, 9)
  expect_equal(lrs, 0.01 + 0.045 * (1 + cos(pi * t / 10)))
  expect_equal(opt2$lr, lrs[12])
  cr <- lr_scheduler_cosine(optimizer_sgd(list(w = w), lr = 1), T_max = 4, restart = TRUE)
  lrs <- vapply(1:8, function(i) cr$step(), numeric(1))
  expect_equal(lrs[1:4], lrs[5:8])
  expect_equal(lrs[1], 1)
})

test_that("optimizers read gradients edited in the grads object, or given as a list", {
  w <- ag_param(matrix(c(1, 2), 2, 1))
  opt <- optimizer_sgd(list(w = w), lr = 1)
  key <- as.character(w$id)
  with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
  grads <- backward(loss)
  expect_equal(grads[[key]], matrix(c(2, 4), 2, 1))
  grads[[key]] <- matrix(c(0.5, 0.5), 2, 1)
  expect_equal(get(key, envir = grads), matrix(c(0.5, 0.5), 2, 1))
  opt$step(grads)
  expect_equal(w$data, matrix(c(0.5, 1.5), 2, 1))
  assign(key, NULL, envir = grads)
  opt$step(grads)                                     # no gradient: no change
  expect_equal(w$data, matrix(c(0.5, 1.5), 2, 1))
  opt$step(list2 <- setNames(list(matrix(1, 2, 1)), key))
  expect_equal(w$data, matrix(c(-0.5, 0.5), 2, 1))
  expect_error(opt$step(setNames(list(matrix(1, 3, 1)), key)), "3 values but the parameter is 2x1")
  # list gradients can be clipped too (the norm is returned)
  expect_equal(clip_grad_norm(list(w = w), setNames(list(matrix(c(3, 4), 2, 1)), key), 1), 5)
})
