softmax_cols <- function(x) apply(x, 2, function(v) exp(v - max(v)) / sum(exp(v - max(v))))

test_each_backend("sum, sum_rows, mean and argmax", {
  set.seed(20)
  for (shape in list(1, c(3, 1), c(17, 5), c(1023, 3), c(4, 3, 2, 2))) {
    x <- rarray(shape)
    got <- run_graph(make_backend, list(x = x), function(ctx, t)
      list(ggml_sum(ctx, t$x), ggml_sum_rows(ctx, t$x), ggml_mean(ctx, t$x)))
    expect_close(got[[1]], sum(x), 1e-5, scale = sqrt(length(x)))
    rows <- matrix(x, nrow = shape[1])
    expect_close(got[[2]], colSums(rows), 1e-5, scale = sqrt(shape[1]))
    expect_close(got[[3]], colMeans(rows), 1e-5)
  }
  x <- rarray(17, 6)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) ggml_argmax(ctx, t$x))
  expect_identical(got, array(apply(x, 2, which.max) - 1L, 6))
  expect_error(run_graph(make_backend, list(x = rarray(2, 2, 2)),
    function(ctx, t) ggml_argmax(ctx, t$x)), "matrix", class = "ggmlR_error")
})

test_each_backend("soft_max and soft_max_ext with scale, mask and ALiBi", {
  set.seed(21)
  for (shape in list(c(1, 1), c(3, 17), c(1023, 2))) {
    x <- rarray(shape) * 3
    got <- run_graph(make_backend, list(x = x), function(ctx, t) ggml_soft_max(ctx, t$x))
    expect_close(got, softmax_cols(x), 1e-5)
  }
  x <- rarray(5, 4, 3)
  m <- rarray(5, 6)
  m[2, ] <- -Inf
  got <- run_graph(make_backend, list(x = x, m = m), function(ctx, t)
    list(ggml_soft_max_ext(ctx, t$x, t$m, 0.5, 0), ggml_soft_max_ext(ctx, t$x, NULL, 2),
         ggml_soft_max_ext(ctx, t$x, t$m, 0.5, 8)))
  for (h in 1:3) {
    expect_close(got[[1]][, , h], softmax_cols(x[, , h] * 0.5 + m[, 1:4]), 1e-5)
    expect_close(got[[2]][, , h], softmax_cols(x[, , h] * 2), 1e-5)
    # 3 heads: n_head_log2 = 2, m0 = 2^-4, m1 = 2^-2; slopes m0, m0^2, m1.
    slope <- c(2^-4, 2^-8, 2^-2)[h]
    expect_close(got[[3]][, , h], softmax_cols(x[, , h] * 0.5 + slope * m[, 1:4]), 1e-5)
  }
  expect_error(run_graph(make_backend, list(x = x, m = rarray(4, 4)),
    function(ctx, t) ggml_soft_max_ext(ctx, t$x, t$m)), "mask", class = "ggmlR_error")
})

test_each_backend("norm and rms_norm of rows", {
  set.seed(22)
  for (shape in list(c(3, 1), c(17, 4), c(1023, 2), c(5, 2, 3))) {
    x <- rarray(shape) * 2 + 1
    got <- run_graph(make_backend, list(x = x), function(ctx, t)
      list(ggml_norm(ctx, t$x, 1e-5), ggml_rms_norm(ctx, t$x, 1e-6)))
    rows <- matrix(x, nrow = shape[1])
    ref_norm <- apply(rows, 2, function(v) (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5))
    ref_rms <- apply(rows, 2, function(v) v / sqrt(mean(v^2) + 1e-6))
    expect_close(got[[1]], ref_norm, 1e-5)
    expect_close(got[[2]], ref_rms, 1e-5)
  }
})

test_each_backend("diag_mask_inf masks above the shifted diagonal", {
  set.seed(23)
  x <- rarray(5, 4, 2)
  for (n_past in c(0, 2)) {
    got <- run_graph(make_backend, list(x = x), function(ctx, t) ggml_diag_mask_inf(ctx, t$x, n_past))
    want <- x
    for (i1 in 1:4) for (i0 in 1:5) if (i0 - 1 > n_past + i1 - 1) want[i0, i1, ] <- -Inf
    expect_close(got, want)
    expect_identical(is.infinite(got), is.infinite(want))
  }
})
