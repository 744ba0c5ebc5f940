test_each_backend("a 3-layer MLP forward pass on a batch of 256 matches base R", {
  set.seed(50)
  n_in <- 64; h1 <- 128; h2 <- 33; n_out <- 10; batch <- 256
  X <- rarray(n_in, batch)
  W1 <- rarray(n_in, h1) / 8; b1 <- as.vector(rarray(h1))
  W2 <- rarray(h1, h2) / 8; b2 <- as.vector(rarray(h2))
  W3 <- rarray(h2, n_out) / 4; b3 <- as.vector(rarray(n_out))
  got <- run_graph(make_backend,
    list(x = X, w1 = W1, b1 = b1, w2 = W2, b2 = b2, w3 = W3, b3 = b3),
    function(ctx, t) {
      l1 <- ggml_relu(ctx, ggml_add(ctx, ggml_mul_mat(ctx, t$w1, t$x), t$b1))
      l2 <- ggml_relu(ctx, ggml_add(ctx, ggml_mul_mat(ctx, t$w2, l1), t$b2))
      ggml_soft_max(ctx, ggml_add(ctx, ggml_mul_mat(ctx, t$w3, l2), t$b3))
    })
  relu <- function(z) pmax(z, 0)
  A1 <- relu(t(W1) %*% X + b1)
  A2 <- relu(t(W2) %*% A1 + b2)
  Z <- t(W3) %*% A2 + b3
  P <- apply(Z, 2, function(v) exp(v - max(v)) / sum(exp(v - max(v))))
  expect_identical(dim(got), c(10L, 256L))
  expect_close(got, P, 1e-5)
  expect_close(colSums(got), rep(1, batch), 1e-5)
})
