test_each_backend("transpose and permute + cont match aperm", {
  set.seed(30)
  x <- rarray(3, 4, 5, 2)
  for (axes in list(c(1, 0, 2, 3), c(2, 0, 1, 3), c(3, 2, 1, 0), c(0, 1, 3, 2))) {
    got <- run_graph(make_backend, list(x = x), function(ctx, t)
      ggml_cont(ctx, ggml_permute(ctx, t$x, axes[1], axes[2], axes[3], axes[4])))
    expect_identical(dim(got), dim(aperm(x, perm_of(axes))))
    expect_close(got, aperm(x, perm_of(axes)), 0)
  }
  m <- rarray(17, 3)
  got <- run_graph(make_backend, list(m = m), function(ctx, t) ggml_cont(ctx, ggml_transpose(ctx, t$m)))
  expect_close(got, t(m), 0)
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t)
    ggml_permute(ctx, t$x, 0, 0, 1, 2)), "axes", class = "ggmlR_error")
})

test_each_backend("reshape and views see the same memory", {
  set.seed(31)
  x <- rarray(6, 4)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) list(
    ggml_cont(ctx, ggml_reshape_3d(ctx, t$x, 3, 2, 4)),
    ggml_cont(ctx, ggml_view_1d(ctx, t$x, 5, offset = 4 * 7)),
    ggml_cont(ctx, ggml_view_2d(ctx, t$x, 3, 2, nb1 = 4 * 12, offset = 4 * 1)),
    ggml_cont(ctx, ggml_view_3d(ctx, t$x, 2, 2, 2, nb1 = 4 * 6, nb2 = 4 * 12, offset = 0)),
    ggml_cont(ctx, ggml_view_4d(ctx, t$x, 1, 2, 2, 2, nb1 = 4, nb2 = 4 * 6, nb3 = 4 * 12))))
  expect_close(got[[1]], array(x, c(3, 2, 4)), 0)
  expect_close(got[[2]], x[8:12], 0)
  expect_close(got[[3]], x[2:4, c(1, 3)], 0)
  expect_close(got[[4]], array(x[1:2, c(1, 2, 3, 4)], c(2, 2, 2)), 0)
  expect_close(got[[5]], array(x[1:2, 1:4], c(1, 2, 2, 2)), 0)
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t)
    ggml_view_1d(ctx, t$x, 20, offset = 4 * 10)), "view spans", class = "ggmlR_error")
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t)
    ggml_reshape_2d(ctx, t$x, 5, 5)), "25 elements", class = "ggmlR_error")
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t)
    ggml_reshape_1d(ctx, ggml_transpose(ctx, t$x), 24)), "not contiguous", class = "ggmlR_error")
})

test_each_backend("ops compute on views of views", {
  set.seed(32)
  x <- rarray(4, 6)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) {
    v <- ggml_view_2d(ctx, t$x, 4, 3, nb1 = 4 * 8, offset = 4 * 4)  # columns 2, 4, 6
    ggml_scale(ctx, ggml_transpose(ctx, v), 2)
  })
  expect_close(got, 2 * t(x[, c(2, 4, 6)]))
})

test_each_backend("cpy converts types into the destination, dup copies", {
  set.seed(33)
  x <- rarray(17, 3)
  got <- run_graph(make_backend, list(x = x, h = matrix(0, 3, 17), i = integer(51)),
    function(ctx, t) list(
      ggml_cpy(ctx, ggml_transpose(ctx, t$x), t$h),
      ggml_cpy(ctx, ggml_scale(ctx, t$x, 10), t$i),
      ggml_dup(ctx, t$x)),
    types = list(h = GGML_TYPE_F16, i = GGML_TYPE_I32))
  expect_close(got[[1]], round_to(t(x), GGML_TYPE_F16), 0)
  expect_identical(as.vector(got[[2]]), as.integer(round(as.vector(x) * 10)))
  expect_close(got[[3]], x, 0)
  expect_error(run_graph(make_backend, list(x = x, h = 1:3), function(ctx, t)
    ggml_cpy(ctx, t$x, t$h)), "51 elements and b 3", class = "ggmlR_error")
})

test_each_backend("repeat and concat", {
  set.seed(34)
  a <- rarray(2, 3)
  got <- run_graph(make_backend, list(a = a, b = array(0, c(4, 6, 2))),
    function(ctx, t) ggml_repeat(ctx, t$a, t$b))
  expect_close(got, array(a[rep(1:2, 2), rep(1:3, 2)], c(4, 6, 2)), 0)
  x <- rarray(3, 2, 2, 2)
  for (d in 0:3) {
    ne_y <- dim(x)
    ne_y[d + 1] <- 1
    y <- rarray(ne_y)
    got <- run_graph(make_backend, list(x = x, y = y),
      function(ctx, t) ggml_concat(ctx, t$x, t$y, d))
    want_dim <- dim(x)
    want_dim[d + 1] <- want_dim[d + 1] + 1
    expect_identical(dim(got), as.integer(want_dim))
    want <- array(0, want_dim)
    idx_x <- lapply(dim(x), seq_len)
    want <- do.call(`[<-`, c(list(want), idx_x, list(value = x)))
    idx_y <- lapply(ne_y, seq_len)
    idx_y[[d + 1]] <- want_dim[d + 1]
    want <- do.call(`[<-`, c(list(want), idx_y, list(value = y)))
    expect_close(got, want, 0)
  }
  expect_error(run_graph(make_backend, list(x = rarray(2, 3), y = rarray(3, 3)),
    function(ctx, t) ggml_concat(ctx, t$x, t$y, 1)), "differ in dimension 0", class = "ggmlR_error")
})

test_each_backend("get_rows picks rows by 0-based index", {
  set.seed(35)
  emb <- rarray(5, 7)
  idx <- c(6L, 0L, 3L, 3L)
  got <- run_graph(make_backend, list(e = emb, i = idx),
    function(ctx, t) ggml_get_rows(ctx, t$e, t$i), types = list(i = GGML_TYPE_I32))
  expect_close(got, emb[, idx + 1], 0)
  got <- run_graph(make_backend, list(e = emb, i = idx),
    function(ctx, t) ggml_get_rows(ctx, t$e, t$i), types = list(e = GGML_TYPE_F16, i = GGML_TYPE_I32))
  expect_close(got, round_to(emb, 1)[, idx + 1], 0)
  expect_error(run_graph(make_backend, list(e = emb, i = c(1L, 7L)),
    function(ctx, t) ggml_get_rows(ctx, t$e, t$i), types = list(i = GGML_TYPE_I32)),
    "row index 7 is out of range", class = "ggmlR_error")
  expect_error(run_graph(make_backend, list(e = emb, i = c(1, 2)),
    function(ctx, t) ggml_get_rows(ctx, t$e, t$i)), "must be an i32", class = "ggmlR_error")
})

test_each_backend("pad appends zeros and upscale repeats elements", {
  set.seed(36)
  x <- rarray(3, 2, 2)
  got <- run_graph(make_backend, list(x = x), function(ctx, t)
    list(ggml_pad(ctx, t$x, 2, 1, 0, 1), ggml_upscale(ctx, t$x, 3)))
  want <- array(0, c(5, 3, 2, 2))
  want[1:3, 1:2, 1:2, 1] <- x
  expect_close(got[[1]], want, 0)
  expect_close(got[[2]], x[rep(1:3, each = 3), rep(1:2, each = 3), ], 0)
})
