test_each_backend("conv_2d matches a direct convolution", {
  set.seed(40)
  cases <- list(
    list(x = c(5, 5, 1, 1), k = c(3, 3, 1, 1), s = c(1, 1), p = c(1, 1), d = c(1, 1)),
    list(x = c(9, 7, 3, 2), k = c(3, 2, 3, 4), s = c(2, 1), p = c(1, 0), d = c(1, 1)),
    list(x = c(17, 6, 2, 1), k = c(3, 3, 2, 3), s = c(1, 2), p = c(2, 1), d = c(2, 1)),
    list(x = c(4, 4, 2, 1), k = c(1, 1, 2, 5), s = c(1, 1), p = c(0, 0), d = c(1, 1))
  )
  for (cs in cases) {
    x <- rarray(cs$x)
    k <- rarray(cs$k)
    got <- run_graph(make_backend, list(k = k, x = x), function(ctx, t)
      ggml_conv_2d(ctx, t$k, t$x, cs$s[1], cs$s[2], cs$p[1], cs$p[2], cs$d[1], cs$d[2]))
    want <- conv2d_ref(x, k, cs$s, cs$p, cs$d)
    expect_identical(as.integer(ggml_shape4(got)), as.integer(ggml_shape4(want)))
    expect_close(got, want, 1e-5, scale = 3)
  }
  # An f16 kernel (im2col then runs in f16, as in ggml).
  x <- rarray(6, 5, 2, 1)
  k <- rarray(3, 3, 2, 2)
  got <- run_graph(make_backend, list(k = k, x = x), function(ctx, t)
    ggml_conv_2d(ctx, t$k, t$x, 1, 1, 1, 1), types = list(k = GGML_TYPE_F16))
  expect_close(got, conv2d_ref(round_to(x, 1), round_to(k, 1), p = c(1, 1)), 2e-3, scale = 3)
  expect_error(run_graph(make_backend, list(k = rarray(3, 3, 2, 1), x = rarray(5, 5, 3, 1)),
    function(ctx, t) ggml_conv_2d(ctx, t$k, t$x)), "same number of channels", class = "ggmlR_error")
  expect_error(run_graph(make_backend, list(k = rarray(7, 3, 1, 1), x = rarray(5, 5, 1, 1)),
    function(ctx, t) ggml_conv_2d(ctx, t$k, t$x)), "does not fit", class = "ggmlR_error")
})

test_each_backend("conv_2d is built from im2col and mul_mat nodes", {
  ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx))
  k <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 2, 4)
  x <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 8, 8, 2, 1)
  y <- ggml_conv_2d(ctx, k, x, p0 = 1, p1 = 1)
  expect_identical(ggml_tensor_shape(y), c(8, 8, 4, 1))
  # im2col, reshape, reshape, mul_mat, reshape, permute, cont
  expect_identical(ggml_graph_n_nodes(ggml_build_forward_expand(ctx, y)), 7L)
})

test_each_backend("im2col unfolds patches like ggml (2-D and 1-D)", {
  set.seed(41)
  x <- rarray(5, 4, 2, 1)
  k <- array(0, c(2, 3, 2, 1))
  got <- run_graph(make_backend, list(k = k, x = x), function(ctx, t)
    ggml_im2col(ctx, t$k, t$x, 2, 1, 1, 0, 1, 1, TRUE, GGML_TYPE_F32))
  ow <- (5 + 2 - 2) %/% 2 + 1
  oh <- (4 - 3) + 1
  expect_identical(dim(got), as.integer(c(2 * 3 * 2, ow, oh)))
  for (y in 1:oh) for (xx in 1:ow) for (c in 1:2) for (ky in 1:3) for (kx in 1:2) {
    ix <- (xx - 1) * 2 + kx - 1 - 1 + 1
    iy <- y + ky - 1
    want <- if (ix >= 1 && ix <= 5) x[ix, iy, c, 1] else 0
    expect_identical(got[(c - 1) * 6 + (ky - 1) * 2 + kx, xx, y], want)
  }
  # 1-D: x [W, C, N], kernel [KW, C, OC].
  x1 <- rarray(7, 2, 3)
  k1 <- array(0, c(3, 2, 1))
  got <- run_graph(make_backend, list(k = k1, x = x1), function(ctx, t)
    ggml_im2col(ctx, t$k, t$x, 1, 0, 0, 0, 2, 0, FALSE, GGML_TYPE_F16))
  expect_identical(dim(got), c(6L, 3L, 3L))
  for (n in 1:3) for (xx in 1:3) for (c in 1:2) for (kx in 1:3) {
    expect_identical(got[(c - 1) * 3 + kx, xx, n], round_to(x1[xx + (kx - 1) * 2, c, n], 1))
  }
})

test_each_backend("pool_2d max and average, with padding", {
  set.seed(42)
  x <- rarray(7, 6, 3, 2)
  for (op in c(GGML_OP_POOL_MAX, GGML_OP_POOL_AVG)) {
    for (cs in list(list(k = c(2, 2), s = c(2, 2), p = c(0, 0)),
                    list(k = c(3, 2), s = c(1, 2), p = c(1, 1)),
                    list(k = c(1, 1), s = c(1, 1), p = c(0, 0)))) {
      got <- run_graph(make_backend, list(x = x), function(ctx, t)
        ggml_pool_2d(ctx, t$x, op, cs$k[1], cs$k[2], cs$s[1], cs$s[2], cs$p[1], cs$p[2]))
      expect_close(got, pool_ref(x, op, cs$k, cs$s, cs$p), 1e-6)
    }
  }
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t)
    ggml_pool_2d(ctx, t$x, 5, 2, 2)), "GGML_OP_POOL_MAX", class = "ggmlR_error")
})
