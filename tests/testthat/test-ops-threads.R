# Inputs large enough that the CPU kernels split their work across threads.
test_each_backend("large inputs give the same results with 1 and 2 threads", {
  set.seed(60)
  x <- rarray(257, 300)
  y <- as.vector(rarray(257))
  small <- rarray(129, 150)
  for (th in 1:2) {
    got <- run_graph(make_backend, list(x = x, y = y, s = small), function(ctx, t) list(
      ggml_add(ctx, t$x, t$y),
      ggml_tanh(ctx, t$x),
      ggml_soft_max(ctx, t$x),
      ggml_rms_norm(ctx, t$x, 1e-6),
      ggml_sum_rows(ctx, t$x),
      ggml_cont(ctx, ggml_transpose(ctx, t$x)),
      ggml_repeat(ctx, t$y, t$x),
      ggml_concat(ctx, t$x, t$x, 1),
      ggml_pad(ctx, t$x, 3, 2),
      ggml_upscale(ctx, t$s, 2),
      ggml_diag_mask_inf(ctx, t$x, 5)), threads = th)
    expect_close(got[[1]], x + y)
    expect_close(got[[2]], tanh(x))
    expect_close(got[[3]], apply(x, 2, function(v) exp(v - max(v)) / sum(exp(v - max(v)))))
    expect_close(got[[4]], apply(x, 2, function(v) v / sqrt(mean(v^2) + 1e-6)))
    expect_close(got[[5]], colSums(x), 1e-5, scale = 16)
    expect_close(got[[6]], t(x), 0)
    expect_close(got[[7]], matrix(y, 257, 300), 0)
    expect_close(got[[8]], cbind(x, x), 0)
    expect_close(got[[9]], rbind(cbind(x, matrix(0, 257, 2)), matrix(0, 3, 302)), 0)
    expect_close(got[[10]], small[rep(1:129, each = 2), rep(1:150, each = 2)], 0)
    want <- x
    want[row(x) - 1 > 5 + col(x) - 1] <- -Inf
    expect_close(got[[11]], want, 0)
  }
  img <- rarray(64, 48, 8, 2)
  k <- rarray(3, 3, 8, 16)
  ref <- NULL
  for (th in 1:2) {
    got <- run_graph(make_backend, list(k = k, x = img), function(ctx, t) list(
      ggml_conv_2d(ctx, t$k, t$x, 1, 1, 1, 1),
      ggml_pool_2d(ctx, t$x, GGML_OP_POOL_AVG, 2, 2)), threads = th)
    if (is.null(ref)) ref <- got else expect_close(got[[1]], ref[[1]], 1e-6, scale = 3)
    expect_close(got[[2]], (img[c(TRUE, FALSE), c(TRUE, FALSE), , ] + img[c(FALSE, TRUE), c(TRUE, FALSE), , ] +
      img[c(TRUE, FALSE), c(FALSE, TRUE), , ] + img[c(FALSE, TRUE), c(FALSE, TRUE), , ]) / 4, 1e-6)
  }
})
