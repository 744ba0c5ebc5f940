# Row ops (norms, sorting, counting), ops that place values by index, and
# the backward ops of this family, against base R and finite differences.

test_each_backend("l2 and group norms, argsort, top_k and count_equal", {
  set.seed(80)
  x <- rarray(5, 4)
  img <- rarray(3, 2, 5, 2)
  got <- run_graph(make_backend, list(x = x, img = img), function(ctx, t) list(
    ggml_l2_norm(ctx, t$x, 1e-12), ggml_group_norm(ctx, t$img, 2, 1e-6),
    ggml_argsort(ctx, t$x), ggml_argsort(ctx, t$x, GGML_SORT_ORDER_DESC), ggml_top_k(ctx, t$x, 2)))
  expect_close(got[[1]], sweep(x, 2, sqrt(colSums(x^2)), "/"), 1e-5)
  # 5 channels in groups of 3 and 2, per batch
  want <- img
  for (b in 1:2) for (g in list(1:3, 4:5)) {
    v <- img[, , g, b]
    want[, , g, b] <- (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-6)
  }
  expect_close(got[[2]], want, 1e-4)
  expect_equal(as.vector(got[[3]]), as.vector(apply(x, 2, order) - 1))
  expect_equal(as.vector(got[[4]]), as.vector(apply(x, 2, order, decreasing = TRUE) - 1))
  expect_equal(as.vector(got[[5]]), as.vector(apply(x, 2, function(v) order(-v)[1:2] - 1)))
  a <- c(1L, 5L, 3L, 3L, 7L, 2L)
  b <- c(1L, 4L, 3L, 3L, 6L, 2L)
  got <- run_graph(make_backend, list(a = a, b = b), function(ctx, t) ggml_count_equal(ctx, t$a, t$b),
    types = list(a = GGML_TYPE_I32, b = GGML_TYPE_I32))
  expect_equal(as.vector(got), 4)
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t) ggml_top_k(ctx, t$x, 6)),
    "between 1 and", class = "ggmlR_error")
})

test_each_backend("rms_norm_back, soft_max_ext_back and silu_back are gradients", {
  set.seed(81)
  x <- rarray(6, 3)
  dy <- rarray(6, 3)
  want <- fd_vjp(list(x = x), "x", function(ctx, t) ggml_rms_norm(ctx, t$x, 1e-3), dy)
  got <- run_graph(make_backend, list(dy = dy, x = x), function(ctx, t) ggml_rms_norm_back(ctx, t$dy, t$x, 1e-3))
  expect_close(got, want, 1e-4)
  y <- exp(0.5 * x)
  y <- sweep(y, 2, colSums(y), "/")
  want <- fd_vjp(list(x = x), "x", function(ctx, t) ggml_soft_max_ext(ctx, t$x, NULL, 0.5), dy)
  got <- run_graph(make_backend, list(dy = dy, y = y), function(ctx, t) ggml_soft_max_ext_back(ctx, t$dy, t$y, 0.5))
  expect_close(got, want, 1e-4)
  want <- fd_vjp(list(x = x), "x", function(ctx, t) ggml_silu(ctx, t$x), dy)
  got <- run_graph(make_backend, list(dy = dy, x = x), function(ctx, t) ggml_silu_back(ctx, t$dy, t$x))
  expect_close(got, want, 1e-4)
})

test_each_backend("get_rows_back and repeat_back are the gradients of get_rows and repeat", {
  set.seed(82)
  a <- rarray(3, 5)
  idx <- c(4L, 0L, 4L, 2L)
  dy <- rarray(3, 4)
  i32 <- list(idx = GGML_TYPE_I32)
  want <- fd_vjp(list(a = a, idx = idx), "a", function(ctx, t) ggml_get_rows(ctx, t$a, t$idx), dy, types = i32)
  got <- run_graph(make_backend, list(dy = dy, idx = idx, a = a), function(ctx, t)
    ggml_get_rows_back(ctx, t$dy, t$idx, t$a), types = i32)
  expect_close(got, want, 1e-4)
  b <- rarray(2, 3)
  big <- rarray(4, 6, 2)
  want <- fd_vjp(list(b = b, big = big), "b", function(ctx, t) ggml_repeat(ctx, t$b, t$big), big)
  got <- run_graph(make_backend, list(big = big, b = b), function(ctx, t) ggml_repeat_back(ctx, t$big, t$b))
  expect_close(got, want, 1e-4)
})

test_each_backend("roll, reflection padding, diagonals, arange, timestep embeddings", {
  x <- matrix(as.numeric(1:12), 4)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) list(
    ggml_roll(ctx, t$x, 1, -1), ggml_pad_reflect_1d(ctx, t$x, 2, 3), ggml_diag_mask_zero(ctx, t$x, 0),
    ggml_diag(ctx, ggml_view_1d(ctx, t$x, 3, 0)), ggml_arange(ctx, 2, 10, 2.5)))
  expect_equal(got[[1]], x[c(4, 1:3), c(2, 3, 1)])
  expect_equal(got[[2]], x[c(3, 2, 1:4, 3, 2, 1), ])
  expect_equal(got[[3]], x * (row(x) <= col(x)))
  expect_equal(got[[4]], diag(1:3))
  expect_equal(as.vector(got[[5]]), c(2, 4.5, 7, 9.5))
  ts <- c(1, 10, 100)
  got <- run_graph(make_backend, list(ts = ts), function(ctx, t) ggml_timestep_embedding(ctx, t$ts, 7, 50))
  f <- 50^(-(0:2) / 3)
  want <- sapply(ts, function(v) c(cos(v * f), sin(v * f), 0, 0))
  expect_close(got, want, 1e-5)
})

test_each_backend("windows and relative positions round-trip and match the reference", {
  m <- array(as.numeric(1:30), c(2, 5, 3, 1))
  got <- run_graph(make_backend, list(m = m), function(ctx, t) {
    w <- ggml_win_part(ctx, t$m, 2)
    list(w, ggml_win_unpart(ctx, w, 5, 3, 2))
  })
  expect_identical(dim(got[[1]]), c(2L, 2L, 2L, 6L))
  expect_equal(got[[1]][, , , 3], array(c(9, 10, 0, 0, 19, 20, 0, 0), c(2, 2, 2)))
  expect_equal(as.vector(got[[2]]), as.vector(m))
  # the reference values of ggml's test-rel-pos
  tw <- matrix(as.numeric(0:8), 3)
  th <- matrix(as.numeric(1:9), 3)
  got <- run_graph(make_backend, list(tw = tw, th = th, a = matrix(1, 9, 4)), function(ctx, t)
    ggml_add_rel_pos(ctx, t$a, ggml_get_rel_pos(ctx, t$tw, 2, 2), ggml_get_rel_pos(ctx, t$th, 2, 2)))
  expect_equal(as.vector(got), c(8, 9, 10, 9, 10, 11, 10, 11, 12, 2, 3, 4, 3, 4, 5, 4, 5, 6,
    14, 15, 16, 15, 16, 17, 16, 17, 18, 8, 9, 10, 9, 10, 11, 10, 11, 12))
})

test_each_backend("set writes into a copy, or into the tensor in place", {
  a <- matrix(0, 4, 3)
  b <- matrix(1:4, 2)
  got <- run_graph(make_backend, list(a = a, b = b), function(ctx, t) list(
    ggml_set(ctx, t$a, t$b, 16, 48, 48, 20), ggml_set_1d(ctx, t$a, ggml_view_1d(ctx, t$b, 3, 0), 8),
    ggml_set_2d(ctx, t$a, t$b, 32, 4), t$a))
  want <- a
  want[2:3, 2:3] <- b
  expect_equal(got[[1]], want)
  expect_equal(as.vector(got[[2]]), c(0, 0, 1, 2, 3, rep(0, 7)))
  want <- a
  want[2:3, c(1, 3)] <- b
  expect_equal(got[[3]], want)
  expect_equal(got[[4]], a) # not in place: a is unchanged
  got <- run_graph(make_backend, list(a = a, b = b), function(ctx, t) {
    list(ggml_set_inplace(ctx, t$a, t$b, 16, 48, 48, 0), t$a)
  })
  expect_equal(got[[2]], got[[1]]) # the result is a's memory
  got <- got[[1]]
  want <- a
  want[1:2, 1:2] <- b
  expect_equal(got, want)
  expect_error(run_graph(make_backend, list(a = a, b = b), function(ctx, t) ggml_set(ctx, t$a, t$b, 16, 48, 48, 40)),
    "past the end", class = "ggmlR_error")
})

test_each_backend("mul_mat_id multiplies each column with its expert", {
  set.seed(83)
  w <- rarray(4, 3, 5)
  x <- rarray(4, 2, 3)
  ids <- matrix(c(4L, 0L, 1L, 1L, 2L, 3L), 2)
  got <- run_graph(make_backend, list(w = w, x = x, ids = ids), function(ctx, t)
    ggml_mul_mat_id(ctx, t$w, t$x, t$ids), types = list(ids = GGML_TYPE_I32))
  want <- array(0, c(3, 2, 3))
  for (tk in 1:3) for (i in 1:2) want[, i, tk] <- t(w[, , ids[i, tk] + 1]) %*% x[, i, tk]
  expect_close(got, want, 1e-5)
})

test_each_backend("upscale interpolates bilinearly and bicubically at pixel centres", {
  x <- matrix(c(0, 4, 8, 12), 2)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) list(
    ggml_upscale(ctx, t$x, 2, GGML_SCALE_MODE_BILINEAR), ggml_upscale(ctx, t$x, 2, GGML_SCALE_MODE_BICUBIC)))
  # source position (i + 0.5) / 2 - 0.5, clamped at the edges
  pos <- pmin(pmax((0:3 + 0.5) / 2 - 0.5, 0), 1)
  lin <- outer(pos, pos, function(u, v) 4 * u + 8 * v)
  expect_close(got[[1]], lin, 1e-6)
  expect_identical(dim(got[[2]]), c(4L, 4L))
  expect_true(all(is.finite(got[[2]])) && any(!got[[2]] %in% x))
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t) ggml_upscale(ctx, t$x, 2, 5L)),
    "mode", class = "ggmlR_error")
})
