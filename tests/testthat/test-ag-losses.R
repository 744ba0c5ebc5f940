test_that("mse loss matches mean((pred - target)^2)", {
  set.seed(10)
  check_op(function(l) ag_mse_loss(l$x1, l$x2), function(l) matrix(mean((l$x1 - l$x2)^2)),
           list(rmat(3, 4), rmat(3, 4)))
})

test_that("cross-entropy on probabilities matches -sum(y log p) / n", {
  set.seed(11)
  p <- rmat(3, 4, 0.05, 0.95)
  y <- diag(3)[, c(1, 2, 3, 2)]
  check_op(function(l) ag_cross_entropy_loss(l$x1, l$x2),
           function(l) matrix(-sum(l$x2 * log(l$x1)) / ncol(l$x1)), list(p, y),
           grad = c(TRUE, FALSE))
  # clamped away from 0
  z <- ag_cross_entropy_loss(ag_tensor(matrix(c(0, 1), 2, 1)), matrix(c(1, 0), 2, 1))
  expect_equal(z$data, matrix(-log(1e-7)))
})

test_that("softmax cross-entropy matches base R and takes class indices", {
  set.seed(12)
  l <- rmat(4, 5, -3, 3)
  y <- diag(4)[, c(1, 4, 2, 2, 3)]
  ref <- function(l) {
    lp <- sweep(l$x1, 2, apply(l$x1, 2, function(v) max(v) + log(sum(exp(v - max(v))))))
    matrix(-sum(l$x2 * lp) / ncol(l$x1))
  }
  check_op(function(l) ag_softmax_cross_entropy_loss(l$x1, l$x2), ref, list(l, y))
  idx <- c(0L, 3L, 1L, 1L, 2L)
  a <- ag_softmax_cross_entropy_loss(ag_tensor(l), idx)$data
  b <- ag_softmax_cross_entropy_loss(ag_tensor(l), matrix(idx, 1))$data
  expect_lt(max_abs(a, ref(list(x1 = l, x2 = y))), 1e-12)
  expect_identical(a, b)
  expect_error(ag_softmax_cross_entropy_loss(ag_tensor(l), c(0L, 4L, 1L, 1L, 2L)), "0-based")
  # gradient (p - y) / n for one-hot targets
  x <- ag_param(l)
  with_grad_tape(loss <- ag_softmax_cross_entropy_loss(x, idx))
  backward(loss)
  p <- exp(l) / rep(colSums(exp(l)), each = 4)
  expect_lt(max_abs(x$grad, (p - y) / 5), 1e-12)
})

test_that("losses check shapes", {
  expect_error(ag_mse_loss(ag_tensor(matrix(1, 2, 2)), matrix(1, 2, 3)), "same shape", class = "ggmlR_error")
})
