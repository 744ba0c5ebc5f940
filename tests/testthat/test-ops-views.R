# Every op reads strided sources: each is given a transposed or permuted view
# and compared with base R on the equivalent R array.
test_each_backend("every op computes on non-contiguous views", {
  set.seed(70)
  x <- rarray(17, 3)      # viewed transposed: [3, 17]
  xt <- t(x)
  sm <- function(m) apply(m, 2, function(v) exp(v - max(v)) / sum(exp(v - max(v))))
  y <- rarray(17, 4)
  got <- run_graph(make_backend, list(x = x, y = y, i = c(4L, 0L, 16L)), function(ctx, t) {
    v <- ggml_transpose(ctx, t$x)
    list(
      ggml_scale(ctx, v, 3), ggml_add1(ctx, v, ggml_view_1d(ctx, t$x, 1, 4 * 5)),
      ggml_leaky_relu(ctx, v, 0.1), ggml_clamp(ctx, v, -0.2, 0.3),
      ggml_sum(ctx, v), ggml_sum_rows(ctx, v), ggml_mean(ctx, v), ggml_argmax(ctx, v),
      ggml_soft_max(ctx, v), ggml_soft_max_ext(ctx, v, v, 0.5), ggml_norm(ctx, v, 1e-5),
      ggml_rms_norm(ctx, v, 1e-5), ggml_diag_mask_inf(ctx, v, 1),
      ggml_dup(ctx, v), ggml_repeat(ctx, v, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 6, 17)),
      ggml_concat(ctx, v, v, 0), ggml_pad(ctx, v, 1, 2), ggml_upscale(ctx, v, 2),
      ggml_out_prod(ctx, v, ggml_transpose(ctx, t$y)),
      ggml_get_rows(ctx, v, t$i))
  }, types = list(i = GGML_TYPE_I32))
  expect_close(got[[1]], 3 * xt)
  expect_close(got[[2]], xt + x[6])
  expect_close(got[[3]], ifelse(xt > 0, xt, 0.1 * xt))
  expect_close(got[[4]], pmin(pmax(xt, -0.2), 0.3))
  expect_close(got[[5]], sum(x), 1e-5, scale = 8)
  expect_close(got[[6]], colSums(xt), 1e-5, scale = 2)
  expect_close(got[[7]], colMeans(xt))
  expect_identical(as.vector(got[[8]]), apply(xt, 2, which.max) - 1L)
  expect_close(got[[9]], sm(xt))
  expect_close(got[[10]], sm(1.5 * xt))
  expect_close(got[[11]], apply(xt, 2, function(v) (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5)))
  expect_close(got[[12]], apply(xt, 2, function(v) v / sqrt(mean(v^2) + 1e-5)))
  want <- xt
  want[row(xt) - 1 > 1 + col(xt) - 1] <- -Inf
  expect_close(got[[13]], want, 0)
  expect_close(got[[14]], xt, 0)
  expect_close(got[[15]], rbind(xt, xt), 0)
  expect_close(got[[16]], rbind(xt, xt), 0)
  expect_close(got[[17]], rbind(cbind(xt, matrix(0, 3, 2)), 0), 0)
  expect_close(got[[18]], xt[rep(1:3, each = 2), rep(1:17, each = 2)], 0)
  expect_close(got[[19]], xt %*% y, 1e-5, scale = 4)
  expect_close(got[[20]], xt[, c(5, 1, 17)], 0)
})

test_each_backend("image ops on a permuted input match the contiguous input", {
  set.seed(71)
  img <- rarray(6, 5, 2, 1)
  k <- rarray(3, 2, 2, 3)
  stored <- aperm(img, c(2, 1, 3, 4))  # [5, 6, 2, 1]; permuting back gives img
  got <- run_graph(make_backend, list(s = stored, x = img, k = k), function(ctx, t) {
    v <- ggml_permute(ctx, t$s, 1, 0, 2, 3)
    list(ggml_conv_2d(ctx, t$k, v, 1, 1, 1, 0), ggml_conv_2d(ctx, t$k, t$x, 1, 1, 1, 0),
         ggml_pool_2d(ctx, v, GGML_OP_POOL_MAX, 2, 2, 1, 1),
         ggml_pool_2d(ctx, t$x, GGML_OP_POOL_MAX, 2, 2, 1, 1),
         ggml_im2col(ctx, t$k, v, 2, 1, 0, 1, 1, 1, TRUE, GGML_TYPE_F32),
         ggml_im2col(ctx, t$k, t$x, 2, 1, 0, 1, 1, 1, TRUE, GGML_TYPE_F32))
  })
  expect_close(got[[1]], got[[2]], 0)
  expect_close(got[[3]], got[[4]], 0)
  expect_close(got[[5]], got[[6]], 0)
  expect_close(got[[4]][1, 1, ], apply(img[1:2, 1:2, , 1], 3, max), 0)
})
