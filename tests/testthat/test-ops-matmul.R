# ggml: mul_mat(a[K, M], b[K, N]) = t(A) %*% B; out_prod(a[M, K], b[N, K]) = A %*% t(B).
mm_sizes <- list(c(1, 1, 1), c(3, 17, 5), c(1023, 3, 17), c(17, 1023, 3), c(64, 33, 130))

test_each_backend("mul_mat matches t(A) %*% B on odd sizes, 1 and 2 threads", {
  set.seed(10)
  for (s in mm_sizes) {
    A <- rarray(s[1], s[2])
    B <- rarray(s[1], s[3])
    for (th in 1:2) {
      got <- run_graph(make_backend, list(a = A, b = B),
        function(ctx, t) ggml_mul_mat(ctx, t$a, t$b), threads = th)
      expect_identical(dim(got), if (s[3] > 1) as.integer(s[2:3]) else as.integer(s[2]))
      expect_close(got, t(A) %*% B, 1e-5, scale = sqrt(s[1]))
    }
  }
})

test_each_backend("mul_mat broadcasts a over b's batch dimensions", {
  set.seed(11)
  A <- rarray(7, 5, 2, 1)
  B <- rarray(7, 3, 4, 3)
  got <- run_graph(make_backend, list(a = A, b = B), function(ctx, t) ggml_mul_mat(ctx, t$a, t$b))
  expect_identical(dim(got), c(5L, 3L, 4L, 3L))
  for (i3 in 1:3) for (i2 in 1:4) {
    ia <- (i2 - 1) %/% 2 + 1
    expect_close(got[, , i2, i3], t(A[, , ia, 1]) %*% B[, , i2, i3], 1e-5, scale = 3)
  }
  expect_error(run_graph(make_backend, list(a = rarray(4, 3), b = rarray(5, 2)),
    function(ctx, t) ggml_mul_mat(ctx, t$a, t$b)),
    "ggml_mul_mat.*f32 \\[4, 3\\].*f32 \\[5, 2\\]", class = "ggmlR_error")
})

test_each_backend("mul_mat reads transposed views and f16/bf16 inputs", {
  set.seed(12)
  A <- rarray(40, 9)
  B <- rarray(13, 40)
  got <- run_graph(make_backend, list(a = A, b = B),
    function(ctx, t) ggml_mul_mat(ctx, t$a, ggml_transpose(ctx, t$b)))
  expect_close(got, t(A) %*% t(B), 1e-5, scale = sqrt(40))
  for (ty in c(GGML_TYPE_F16, GGML_TYPE_BF16)) {
    C <- rarray(40, 13)
    got <- run_graph(make_backend, list(a = A, b = C),
      function(ctx, t) ggml_mul_mat(ctx, t$a, t$b), types = list(a = ty, b = ty))
    expect_close(got, t(round_to(A, ty)) %*% round_to(C, ty), 1e-5, scale = sqrt(40))
  }
})

test_each_backend("out_prod matches A %*% t(B)", {
  set.seed(13)
  for (s in list(c(1, 1, 1), c(17, 3, 5), c(4, 1023, 3))) {
    A <- rarray(s[1], s[2])
    B <- rarray(s[3], s[2])
    got <- run_graph(make_backend, list(a = A, b = B),
      function(ctx, t) ggml_out_prod(ctx, t$a, t$b))
    expect_close(got, A %*% t(B), 1e-5, scale = sqrt(s[2]))
  }
  expect_error(run_graph(make_backend, list(a = rarray(4, 3), b = rarray(5, 2)),
    function(ctx, t) ggml_out_prod(ctx, t$a, t$b)), "out_prod", class = "ggmlR_error")
})
