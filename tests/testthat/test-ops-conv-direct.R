# 1-D, depthwise, direct and transposed convolutions and 1-D pooling against
# loops over their definitions (conv2d_ref is in helper-conv.R).

conv1d_ref <- function(x, k, s = 1, p = 0, d = 1) {
  # x [L, Cin, N], k [K, Cin, Cout] -> [OL, Cout, N]
  dx <- dim(x); dk <- dim(k)
  ol <- (dx[1] + 2 * p - d * (dk[1] - 1) - 1) %/% s + 1
  out <- array(0, c(ol, dk[3], dx[3]))
  for (n in seq_len(dx[3])) for (o in seq_len(dk[3])) for (i in seq_len(ol)) {
    acc <- 0
    for (ci in seq_len(dx[2])) for (kk in seq_len(dk[1])) {
      ix <- (i - 1) * s + (kk - 1) * d - p + 1
      if (ix >= 1 && ix <= dx[1]) acc <- acc + k[kk, ci, o] * x[ix, ci, n]
    }
    out[i, o, n] <- acc
  }
  out
}

deconv1d_ref <- function(x, k, s) {
  # x [L, Cin], k [K, Cout, Cin] -> [(L - 1) s + K, Cout]
  out <- matrix(0, (nrow(x) - 1) * s + dim(k)[1], dim(k)[2])
  for (l in seq_len(nrow(x))) for (ci in seq_len(ncol(x))) for (kk in seq_len(dim(k)[1])) {
    out[(l - 1) * s + kk, ] <- out[(l - 1) * s + kk, ] + x[l, ci] * k[kk, , ci]
  }
  out
}

deconv2d_ref <- function(x, k, s) {
  # x [W, H, Cin], k [KW, KH, Cout, Cin] -> [(W - 1) s + KW, (H - 1) s + KH, Cout]
  dx <- dim(x); dk <- dim(k)
  out <- array(0, c((dx[1] - 1) * s + dk[1], (dx[2] - 1) * s + dk[2], dk[3]))
  for (ix in seq_len(dx[1])) for (iy in seq_len(dx[2])) for (ci in seq_len(dx[3]))
    for (kx in seq_len(dk[1])) for (ky in seq_len(dk[2])) {
      ox <- (ix - 1) * s + kx
      oy <- (iy - 1) * s + ky
      out[ox, oy, ] <- out[ox, oy, ] + x[ix, iy, ci] * k[kx, ky, , ci]
    }
  out
}

test_each_backend("conv_1d and conv_1d_dw match direct sums", {
  set.seed(70)
  x <- rarray(11, 3, 2)
  k <- rarray(3, 3, 4)
  got <- run_graph(make_backend, list(x = x, k = k), function(ctx, t) list(
    ggml_conv_1d(ctx, t$k, t$x, 2, 1, 1),
    ggml_conv_1d_ph(ctx, t$k, t$x, 1, 2)))
  expect_close(got[[1]], conv1d_ref(x, k, 2, 1, 1), 1e-5)
  expect_close(got[[2]], conv1d_ref(x, k, 1, 1, 2), 1e-5)
  kd <- rarray(3, 1, 3)
  got <- run_graph(make_backend, list(x = x, k = kd), function(ctx, t) ggml_conv_1d_dw(ctx, t$k, t$x, 1, 1, 1))
  want <- array(0, dim(got))
  for (ch in 1:3) want[, ch, ] <- conv1d_ref(x[, ch, , drop = FALSE], array(kd[, 1, ch], c(3, 1, 1)), 1, 1, 1)
  expect_close(got, want, 1e-5)
})

test_each_backend("depthwise and direct 2-D convolutions match direct sums", {
  set.seed(71)
  x <- rarray(8, 6, 3, 2)
  kd <- rarray(3, 3, 1, 3)
  kf <- rarray(3, 2, 3, 4)
  got <- run_graph(make_backend, list(x = x, kd = kd, kf = kf), function(ctx, t) list(
    ggml_conv_2d_dw(ctx, t$kd, t$x, 2, 1, 1, 0, 1, 2),
    ggml_conv_2d_dw_direct(ctx, t$kd, t$x, 1, 1, 1, 1, 1, 1),
    ggml_conv_2d_direct(ctx, t$kf, t$x, 2, 1, 1, 1, 1, 1)), types = list(kd = GGML_TYPE_F16))
  kd16 <- round_to(kd, GGML_TYPE_F16)
  dw_ref <- function(s, p, d) {
    parts <- lapply(1:3, function(ch) conv2d_ref(x[, , ch, , drop = FALSE], kd16[, , , ch, drop = FALSE], s, p, d))
    out <- array(0, c(dim(parts[[1]])[1:2], 3, 2))
    for (ch in 1:3) out[, , ch, ] <- parts[[ch]][, , 1, ]
    out
  }
  expect_close(got[[1]], dw_ref(c(2, 1), c(1, 0), c(1, 2)), 1e-5)
  expect_close(got[[2]], dw_ref(c(1, 1), c(1, 1), c(1, 1)), 1e-5)
  expect_close(got[[3]], conv2d_ref(x, kf, c(2, 1), c(1, 1)), 1e-5)
  expect_error(run_graph(make_backend, list(x = x, k = rarray(3, 3, 1, 2)), function(ctx, t)
    ggml_conv_2d_dw(ctx, t$k, t$x)), "conv_2d_dw", class = "ggmlR_error")
})

test_each_backend("transposed convolutions and pool_1d", {
  set.seed(72)
  x <- rarray(5, 2)
  k <- rarray(3, 4, 2)
  x2 <- rarray(4, 3, 2)
  k2 <- rarray(2, 3, 3, 2)
  got <- run_graph(make_backend, list(x = x, k = k, x2 = x2, k2 = k2), function(ctx, t) list(
    ggml_conv_transpose_1d(ctx, t$k, t$x, 2, 0, 1),
    ggml_conv_transpose_2d_p0(ctx, t$k2, t$x2, 2)), types = list(k = GGML_TYPE_F16))
  expect_close(got[[1]], deconv1d_ref(x, round_to(k, GGML_TYPE_F16), 2), 1e-5)
  expect_close(got[[2]], deconv2d_ref(x2, k2, 2), 1e-5)
  p <- matrix(c(1, 3, 2, 4, 5, 2, 8, 1, 0, 6), 5)
  got <- run_graph(make_backend, list(p = p), function(ctx, t) list(
    ggml_pool_1d(ctx, t$p, GGML_OP_POOL_MAX, 2),
    ggml_pool_1d(ctx, t$p, GGML_OP_POOL_AVG, 3, 2, 1)))
  expect_equal(as.vector(got[[1]]), c(3, 4, 8, 1))
  expect_close(got[[2]], c(4 / 3, 3, 3, 10 / 3, 3, 2), 1e-6)
})
