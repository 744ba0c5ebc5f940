test_that("ag_linear computes W x + b with an activation", {
  set.seed(40)
  l <- ag_linear(3, 2, activation = "tanh")
  x <- rmat(3, 5)
  expect_identical(dim(l$W), c(2L, 3L))
  expect_identical(l$b$data, matrix(0, 2, 1))
  l$b$data <- matrix(c(0.1, -0.2), 2, 1)
  y <- l$forward(ag_tensor(x))$data
  expect_lt(max_abs(y, tanh(l$W$data %*% x + c(0.1, -0.2))), 1e-12)
  expect_named(l$parameters(), c("W", "b"))
  expect_error(ag_linear(3, 2, "swish"), "activation")
})

test_that("ag_sequential chains layers and names their parameters", {
  m <- ag_sequential(ag_linear(4, 3, "relu"), ag_dropout(0.5), ag_linear(3, 2))
  expect_named(m$parameters(), c("layer1_W", "layer1_b", "layer3_W", "layer3_b"))
  expect_output(print(m), "3 layers")
  ag_eval(m)
  expect_false(m$layers[[2]]$training)
  x <- rmat(4, 6)
  p <- m$parameters()
  ref <- p$layer3_W$data %*% pmax(p$layer1_W$data %*% x, 0)
  expect_lt(max_abs(m$forward(ag_tensor(x))$data, ref), 1e-12)
  ag_train(m)
  expect_true(m$layers[[2]]$training)
  expect_error(ag_sequential(ag_linear(1, 1), 3), "not a layer")
})

test_that("dropout drops with the given rate and rescales; identity in eval", {
  set.seed(41)
  d <- ag_dropout(0.25)
  x <- ag_param(matrix(1, 50, 40))
  with_grad_tape(y <- d$forward(x))
  v <- y$data
  expect_true(all(v == 0 | abs(v - 4 / 3) < 1e-12))
  expect_equal(mean(v == 0), 0.25, tolerance = 0.1)
  with_grad_tape(loss <- ag_sum(d$forward(x)))
  backward(loss)
  expect_true(all(x$grad == 0 | abs(x$grad - 4 / 3) < 1e-12))
  ag_eval(d)
  expect_identical(d$forward(x), x)
  expect_error(ag_dropout(1), "rate")
})

test_that("batch norm matches the formula and its gradient is exact", {
  set.seed(42)
  bn <- ag_batch_norm(3, momentum = 0.2)
  bn$gamma$data <- matrix(c(1, 2, 0.5), 3, 1)
  bn$beta$data <- matrix(c(0, 1, -1), 3, 1)
  x <- rmat(3, 6) * 3
  ref <- function(x, g, b) {
    mu <- rowMeans(x); v <- rowMeans((x - mu)^2)
    (x - mu) / sqrt(v + 1e-5) * as.vector(g) + as.vector(b)
  }
  y <- bn$forward(ag_tensor(x))$data
  expect_lt(max_abs(y, ref(x, bn$gamma$data, bn$beta$data)), 1e-12)
  mu <- rowMeans(x); v <- rowMeans((x - mu)^2)
  expect_lt(max_abs(bn$running_mean, 0.2 * mu), 1e-12)
  expect_lt(max_abs(bn$running_var, 0.8 + 0.2 * v), 1e-12)
  # exact gradients for x, gamma and beta (batch statistics included)
  W <- rmat(3, 6)
  xt <- ag_param(x)
  with_grad_tape(loss <- ag_sum(ag_mul(bn$forward(xt), W)))
  backward(loss)
  g0 <- bn$gamma$data; b0 <- bn$beta$data
  expect_lt(max_abs(xt$grad, fd_grad(function(m) sum(ref(m, g0, b0) * W), x)), 1e-6)
  expect_lt(max_abs(bn$gamma$grad, fd_grad(function(m) sum(ref(x, m, b0) * W), g0)), 1e-6)
  expect_lt(max_abs(bn$beta$grad, fd_grad(function(m) sum(ref(x, g0, m) * W), b0)), 1e-6)
  # eval mode uses the running statistics
  ag_eval(bn)
  ye <- bn$forward(ag_tensor(x))$data
  want <- (x - as.vector(bn$running_mean)) / sqrt(as.vector(bn$running_var) + 1e-5) * as.vector(g0) + as.vector(b0)
  expect_lt(max_abs(ye, want), 1e-12)
  xt2 <- ag_param(x)
  expect_true(ag_gradcheck(function(l) ag_sum(ag_mul(bn$forward(l$x), W)),
                           list(x = xt2, gamma = bn$gamma, beta = bn$beta), quiet = TRUE))
  expect_error(bn$forward(ag_tensor(rmat(4, 2))), "gamma.*3x1")
})

test_that("embedding looks up columns and scatters gradients", {
  set.seed(43)
  e <- ag_embedding(5, 3)
  idx <- c(0L, 4L, 4L, 2L)
  wd <- e$weight$data
  with_grad_tape(loss <- ag_sum(ag_mul(e$forward(idx), matrix(1:12, 3, 4))))
  expect_equal(loss$data[1], sum(wd[, idx + 1L] * matrix(1:12, 3, 4)))
  backward(loss)
  g <- matrix(0, 3, 5)
  g[, 1] <- 1:3; g[, 5] <- 4:6 + 7:9; g[, 3] <- 10:12
  expect_equal(e$weight$grad, g)
  expect_error(e$forward(5L), "out of range")
  expect_error(e$forward(-1L), "0-based")
})

test_that("multi-head attention matches a base R reference", {
  set.seed(44)
  mha <- ag_multihead_attention(4, 2)
  mha$b_o$data <- matrix(rnorm(4), 4, 1)
  q <- rmat(4, 3); kv <- rmat(4, 5)
  ref <- function(q, k, v, causal = FALSE) {
    Q <- mha$W_q$data %*% q; K <- mha$W_k$data %*% k; V <- mha$W_v$data %*% v
    heads <- lapply(1:2, function(h) {
      r <- (2 * h - 1):(2 * h)
      s <- t(K[r, , drop = FALSE]) %*% Q[r, , drop = FALSE] / sqrt(2)
      if (causal) s[row(s) > col(s)] <- -Inf
      a <- exp(sweep(s, 2, apply(s, 2, max))); a <- sweep(a, 2, colSums(a), "/")
      V[r, , drop = FALSE] %*% a
    })
    mha$W_o$data %*% do.call(rbind, heads) + as.vector(mha$b_o$data)
  }
  expect_lt(max_abs(mha$forward(ag_tensor(q), ag_tensor(kv), ag_tensor(kv))$data, ref(q, kv, kv)), 1e-12)
  x <- rmat(4, 4)
  expect_lt(max_abs(mha$forward(ag_tensor(x), causal_mask = TRUE)$data, ref(x, x, x, TRUE)), 1e-12)
  xt <- ag_param(x)
  ins <- c(list(x = xt), mha$parameters())
  expect_true(ag_gradcheck(function(l) ag_sum(ag_tanh(mha$forward(l$x, causal_mask = TRUE))), ins, quiet = TRUE))
  expect_error(ag_multihead_attention(5, 2), "multiple")
})

test_that("ag_linear's fused op has the gradients of W %*% x + b and its activation", {
  set.seed(45)
  for (act in list(NULL, "relu", "sigmoid", "tanh", "softmax")) {
    l <- ag_linear(3, 4, activation = act)
    l$b$data <- rmat(4, 1)
    x <- ag_param(rmat(3, 5))
    W <- rmat(4, 5)
    expect_true(ag_gradcheck(function(i) ag_sum(ag_mul(l$forward(i$x), W)),
                             list(x = x, W = l$W, b = l$b), quiet = TRUE), info = format(act))
  }
  expect_error(ag_linear(3, 2)$forward(ag_tensor(rmat(4, 2))), "ag_linear: non-conformable")
})
