test_that("matmul matches %*% and its gradient finite differences", {
  set.seed(1)
  check_op(function(l) ag_matmul(l$x1, l$x2), function(l) l$x1 %*% l$x2,
           list(rmat(3, 5), rmat(5, 4)))
  check_op(function(l) l$x1 %*% l$x2, function(l) l$x1 %*% l$x2,
           list(rmat(2, 3), rmat(3, 2)), grad = c(FALSE, TRUE))
})

test_that("element-wise arithmetic matches base R, with recycling", {
  set.seed(2)
  a <- rmat(3, 4)
  others <- list(same = rmat(3, 4, 0.5, 2), col = rmat(3, 1, 0.5, 2), row = rmat(1, 4, 0.5, 2))
  expand <- function(b) b[rep(seq_len(nrow(b)), length.out = 3), rep(seq_len(ncol(b)), length.out = 4), drop = FALSE]
  ops <- list(add = list(ag_add, `+`), sub = list(ag_sub, `-`), mul = list(ag_mul, `*`), div = list(ag_div, `/`))
  for (op in ops) for (b in others) {
    check_op(function(l) op[[1]](l$x1, l$x2), function(l) op[[2]](l$x1, expand(l$x2)), list(a, b))
  }
  # numbers are [1, 1] values
  x <- ag_param(a)
  expect_lt(max_abs(ag_add(x, 2)$data, a + 2), 1e-12)
  expect_lt(max_abs(ag_div(1, x)$data, 1 / a), 1e-12)
})

test_that("Ops and %*% methods record on the tape", {
  set.seed(3)
  a <- rmat(2, 2, 0.5, 1.5)
  b <- rmat(2, 2)
  check_op(function(l) (l$x1 * 2 - l$x2 / 3 + 1)^2 %*% (-l$x2),
           function(l) ((l$x1 * 2 - l$x2 / 3 + 1)^2) %*% (-l$x2), list(a, b))
  check_op(function(l) 1 - l$x1 / l$x2, function(l) 1 - l$x1 / l$x2, list(a, a + 1))
  x <- ag_tensor(a)
  expect_identical(x > 1, a > 1)
  expect_error(x ^ x, "single number")
})

test_that("activations and element-wise functions match base R", {
  set.seed(4)
  a <- rmat(4, 3, -2, 2)
  a[abs(a) < 0.05] <- 0.3
  check_op(function(l) ag_relu(l$x1), function(l) pmax(l$x1, 0), list(a))
  check_op(function(l) ag_sigmoid(l$x1), function(l) 1 / (1 + exp(-l$x1)), list(a))
  check_op(function(l) ag_tanh(l$x1), function(l) tanh(l$x1), list(a))
  check_op(function(l) ag_exp(l$x1), function(l) exp(l$x1), list(a))
  check_op(function(l) ag_scale(l$x1, -1.5), function(l) l$x1 * -1.5, list(a))
  p <- abs(a) + 0.1
  check_op(function(l) ag_log(l$x1), function(l) log(l$x1), list(p))
  check_op(function(l) ag_pow(l$x1, 3.5), function(l) l$x1^3.5, list(p))
  check_op(function(l) ag_pow(l$x1, 2), function(l) l$x1^2, list(a))
  check_op(function(l) ag_clamp(l$x1, -1, 1), function(l) pmin(pmax(l$x1, -1), 1), list(a))
  check_op(function(l) ag_clamp(l$x1, lo = 0), function(l) pmax(l$x1, 0), list(a))
})

test_that("softmax is column-wise and matches base R", {
  set.seed(5)
  sm <- function(m) { e <- exp(sweep(m, 2, apply(m, 2, max))); sweep(e, 2, colSums(e), "/") }
  check_op(function(l) ag_softmax(l$x1), function(l) sm(l$x1), list(rmat(4, 3, -3, 3)))
  expect_equal(colSums(ag_softmax(ag_tensor(rmat(5, 2)))$data), c(1, 1))
})

test_that("sum and mean reduce like sum, rowSums and colSums", {
  set.seed(6)
  a <- rmat(3, 5)
  check_op(function(l) ag_sum(l$x1), function(l) matrix(sum(l$x1)), list(a))
  check_op(function(l) ag_sum(l$x1, dim = 1), function(l) matrix(rowSums(l$x1), ncol = 1), list(a))
  check_op(function(l) ag_sum(l$x1, dim = 2), function(l) matrix(colSums(l$x1), nrow = 1), list(a))
  check_op(function(l) ag_mean(l$x1), function(l) matrix(mean(l$x1)), list(a))
  check_op(function(l) ag_mean(l$x1, dim = 1), function(l) matrix(rowMeans(l$x1), ncol = 1), list(a))
  check_op(function(l) ag_mean(l$x1, dim = 2, keepdim = TRUE), function(l) matrix(colMeans(l$x1), nrow = 1), list(a))
  expect_error(ag_sum(ag_tensor(a), dim = 3), "dim")
})

test_that("reshape and transpose match matrix() and t()", {
  set.seed(7)
  a <- rmat(4, 3)
  check_op(function(l) ag_reshape(l$x1, 2, 6), function(l) matrix(l$x1, 2, 6), list(a))
  check_op(function(l) ag_reshape(l$x1, -1, 2), function(l) matrix(l$x1, 6, 2), list(a))
  check_op(function(l) ag_transpose(l$x1), function(l) t(l$x1), list(a))
  expect_error(ag_reshape(ag_tensor(a), 5, 5), "cannot reshape")
})

test_that("bad shapes give clear errors naming the op and the shapes", {
  a <- ag_tensor(matrix(1, 2, 3))
  expect_error(ag_matmul(a, a), "ag_matmul.*2x3 %\\*% 2x3", class = "ggmlR_error")
  expect_error(ag_add(a, matrix(1, 3, 3)), "ag_add: shapes 2x3 and 3x3", class = "ggmlR_error")
  expect_error(ag_relu("a"), "numeric", class = "ggmlR_error")
  expect_error(ag_scale(a, "x"), "single number", class = "ggmlR_error")
})
