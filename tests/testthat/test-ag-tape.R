test_that("tensors are environments with the documented fields", {
  t <- ag_tensor(matrix(1:6, 2, 3))
  expect_true(is.environment(t))
  # class "ag_tensor"; before R 4.4 also the S4 bit, for `%*%` (R/ag_tensor_s4.R)
  expect_identical(class(t), "ag_tensor")
  expect_true(inherits(t, "ag_tensor"))
  expect_identical(isS4(t), getRversion() < "4.4.0")
  for (f in c("id", "data", "grad", "requires_grad", "grad_fn", "device", "dtype", "ptr",
              "shape", "ctx_gen", "ctx_scope")) {
    expect_true(exists(f, envir = t, inherits = FALSE), info = f)
  }
  expect_identical(t$data, matrix(as.double(1:6), 2, 3))
  expect_identical(dim(t), c(2L, 3L))
  expect_identical(as.matrix(t), t$data)
  expect_false(t$requires_grad)
  expect_null(t$grad)
  expect_identical(ag_tensor(1:3)$shape, c(3L, 1L))
  t$device <- "gpu"
  expect_identical(t$device, "gpu")
  t$data <- matrix(0, 3, 3)
  expect_identical(t$shape, c(3L, 3L))
  expect_identical(dim(t), c(3L, 3L))
  expect_true(ag_param(1)$requires_grad)
  expect_output(print(ag_param(matrix(1:4, 2))), "ag_tensor 2x2.*requires_grad")
  expect_error(ag_tensor("a"), "numeric")
  expect_error(ag_tensor(1, device = "tpu"), "device")
})

test_that("backward fills $grad of leaves and returns gradients by id", {
  w <- ag_param(matrix(c(1, 2, 3, 4), 2, 2))
  x <- ag_tensor(matrix(c(1, -1), 2, 1))
  with_grad_tape({
    h <- ag_matmul(w, x)
    loss <- ag_sum(ag_mul(h, h))
  })
  expect_identical(loss$grad_fn, "ag_sum")
  grads <- backward(loss)
  expect_s3_class(grads, "ag_grads")
  want <- 2 * (w$data %*% x$data) %*% t(x$data)
  expect_equal(grads[[as.character(w$id)]], want)
  expect_equal(get0(as.character(w$id), envir = grads), want)
  expect_equal(w$grad, want)
  expect_null(x$grad)
  expect_false(exists(as.character(x$id), envir = grads))
  # the tape was consumed
  expect_error(backward(loss), "not recorded", class = "ggmlR_error")
  # gradients accumulate until cleared
  with_grad_tape(loss <- ag_sum(ag_mul(ag_matmul(w, x), ag_matmul(w, x))))
  backward(loss)
  expect_equal(w$grad, 2 * want)
  w$grad <- NULL
  expect_null(w$grad)
})

test_that("ops outside a tape are not recorded", {
  w <- ag_param(matrix(1, 2, 2))
  loss <- ag_sum(w)
  expect_true(loss$requires_grad)
  expect_error(backward(loss), "with_grad_tape")
})

test_that("an error in the middle of a tape leaves everything usable", {
  set.seed(20)
  model <- ag_sequential(ag_linear(3, 4, "relu"), ag_linear(4, 2))
  opt <- optimizer_adam(model$parameters(), lr = 0.01)
  x <- matrix(rnorm(3 * 8), 3, 8)
  y <- matrix(rnorm(2 * 8), 2, 8)
  before <- lapply(model$parameters(), function(p) p$data)
  expect_error(with_grad_tape({
    h <- model$forward(ag_tensor(x))
    ag_matmul(h, h)                     # bad shapes
  }), "non-conformable")
  expect_error(with_grad_tape({
    h <- model$forward(ag_tensor(x))
    stop("user code failed")
  }), "user code failed")
  expect_identical(lapply(model$parameters(), function(p) p$data), before)
  with_grad_tape(loss <- ag_mse_loss(model$forward(ag_tensor(x)), y))
  grads <- backward(loss)
  expect_length(ls(grads), 4L)
  opt$step(grads)
  opt$zero_grad()
  after <- lapply(model$parameters(), function(p) p$data)
  expect_false(identical(after, before))
  # the same step in base R matches the engine's forward
  p <- before
  ref <- p$layer2_W %*% pmax(p$layer1_W %*% x + as.vector(p$layer1_b), 0) + as.vector(p$layer2_b)
  expect_lt(abs(loss$data[1] - mean((ref - y)^2)), 1e-12)
})

test_that("ag_gradcheck reports mismatches", {
  w <- ag_param(matrix(c(0.5, -0.3), 2, 1))
  expect_output(ok <- ag_gradcheck(function(l) ag_sum(ag_tanh(l$w)), list(w = w)), "all gradients match")
  expect_true(ok)
  # a function whose value does not follow its tape: the checker must notice
  bad <- function(l) ag_add(ag_sum(l$w), sum(l$w$data^2))
  expect_false(ag_gradcheck(bad, list(w = w), quiet = TRUE))
  expect_silent(ag_gradcheck(function(l) ag_sum(l$w), list(w = w), quiet = TRUE))
})

test_that("devices and dtypes are settable and recorded on tensors", {
  old <- ag_device("gpu")
  on.exit(ag_device(old))
  expect_identical(ag_default_device(), "gpu")
  t <- ag_tensor(1:2)
  expect_identical(t$device, "gpu")
  expect_identical(ag_to_device(t, "cpu")$device, "cpu")
  expect_identical(ag_to_device(t, "gpu"), t)
  expect_error(ag_device("tpu"), "device")
  od <- ag_dtype("f16")
  expect_identical(ag_default_dtype(), "f16")
  ag_dtype(od)
  # results on "gpu" (f32 on the residency backend) match the cpu results
  a <- matrix(runif(6), 2, 3)
  expect_equal(ag_relu(ag_tensor(a))$data, ag_relu(ag_tensor(a, device = "cpu"))$data,
               tolerance = 1e-6)
})

test_that("residency fields are plain, assignable fields of the tensor", {
  t <- ag_param(matrix(1:4, 2, 2))
  t$device <- "gpu"
  t$ptr <- "some handle"
  t$ctx_gen <- 3L
  t$ctx_scope <- "persistent"
  expect_identical(t$ctx_scope, "persistent")
  expect_identical(t$ctx_gen, 3L)
  # A pointer that is not live memory of its pool is never read.
  expect_error(get(".ag_data", envir = asNamespace("ggmlR"))(t), "freed by a reset",
               class = "ggmlR_stale_error")
  # installing a host value drops the device pointer
  get(".ag_data_set", envir = asNamespace("ggmlR"))(t, matrix(0, 2, 2))
  expect_null(t$ptr)
  expect_identical(t$data, matrix(0, 2, 2))
})

test_that("tensors that did not survive serialisation fail clearly", {
  f <- tempfile(fileext = ".rds")
  on.exit(unlink(f))
  saveRDS(ag_tensor(1:3), f)
  t <- readRDS(f)
  expect_error(t$data, "did not survive|released", class = "ggmlR_error")
  expect_error(ag_relu(t), "did not survive|released", class = "ggmlR_error")
})

test_that("ag_gradcheck returns a plain logical and prints per input", {
  w <- ag_param(matrix(c(0.2, 0.4), 2, 1))
  out <- capture.output(ok <- ag_gradcheck(function(l) ag_sum(ag_exp(l$w)), list(w = w), verbose = TRUE))
  expect_identical(ok, TRUE)
  expect_true(any(grepl("^gradcheck w", out)))
  expect_true(any(grepl("analytical", out)))
})
