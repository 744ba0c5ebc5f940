# Tensors of five dimensions. Oracle: base R's five-dimensional arrays (the
# fifth dimension is R's fifth, as ne0 is R's first).

# b broadcast to dims `d` (each size of b divides d's), as an array.
bcast <- function(b, d) {
  idx <- arrayInd(seq_len(prod(d)), d)
  db <- dim(b)
  array(b[(idx - 1L) %% matrix(db, nrow(idx), length(db), byrow = TRUE) + 1L], d)
}

# a and b joined along dimension k (1-based).
concat_r <- function(a, b, k) {
  dn <- dim(a)
  dn[k] <- dim(a)[k] + dim(b)[k]
  out <- array(0, dn)
  ia <- lapply(dn, seq_len)
  ia[[k]] <- seq_len(dim(a)[k])
  out <- do.call(`[<-`, c(list(out), ia, list(value = a)))
  ia[[k]] <- dim(a)[k] + seq_len(dim(b)[k])
  do.call(`[<-`, c(list(out), ia, list(value = b)))
}

D5 <- c(3L, 2L, 2L, 2L, 3L)

test_that("five-dimensional tensors: constructors, shape, strides, print and values", {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  a <- ggml_new_tensor_5d(ctx, GGML_TYPE_F32, 3, 2, 2, 2, 3)
  b <- ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, D5)
  expect_identical(ggml_n_dims(a), 5L)
  expect_identical(ggml_tensor_shape(a), as.numeric(D5))
  expect_identical(ggml_tensor_shape(b), as.numeric(D5))
  expect_identical(ggml_nelements(a), 72)
  expect_identical(ggml_nbytes(a), 288)
  expect_identical(ggml_tensor_nb(a), c(4, 12, 24, 48, 96))
  expect_identical(ggml_nrows(a), 24)
  expect_identical(dim(a), D5)
  # a fifth size of 1 is not a dimension
  c4 <- ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, c(3, 2, 1, 1, 1))
  expect_identical(ggml_n_dims(c4), 2L)
  expect_identical(ggml_tensor_shape(c4), c(3, 2, 1, 1))
  x <- array(seq_len(72) / 8, D5)
  ggml_set_f32(a, x)
  expect_identical(as.array(a), x)
  expect_output(print(a), "f32 \\[3, 2, 2, 2, 3\\]")
  expect_true(ggml_is_contiguous(a))
  expect_true(ggml_are_same_shape(a, b))
})

test_that("reshape_5d, views and permute keep the fifth dimension", {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  x <- array(seq_len(72), D5)
  m <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 12, 6), as.vector(x))
  r <- ggml_reshape_5d(ctx, m, 3, 2, 2, 2, 3)
  expect_identical(ggml_tensor_shape(r), as.numeric(D5))
  expect_identical(as.array(r), array(as.double(x), D5))
  back <- ggml_reshape_4d(ctx, r, 3, 2, 2, 6)
  expect_identical(ggml_tensor_shape(back), c(3, 2, 2, 6))
  # dimension i goes to position axis_i; the fifth stays
  p <- ggml_cont(ctx, ggml_permute(ctx, r, 2, 0, 1, 3))
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, p))
  expect_identical(ggml_tensor_shape(p), c(2, 2, 3, 2, 3))
  expect_identical(as.array(p), aperm(array(as.double(x), D5), c(2, 3, 1, 4, 5)))
  t <- ggml_cont(ctx, ggml_transpose(ctx, r))
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, t))
  expect_identical(as.array(t), aperm(array(as.double(x), D5), c(2, 1, 3, 4, 5)))
})

test_each_backend("element-wise maps walk all five dimensions", {
  set.seed(5)
  x <- array(runif(72, 0.1, 2), D5)
  ops <- list(
    relu = list(ggml_relu, function(v) pmax(v, 0)),
    neg = list(ggml_neg, function(v) -v),
    sqrt = list(ggml_sqrt, sqrt),
    exp = list(ggml_exp, exp),
    scale = list(function(ctx, a) ggml_scale(ctx, a, 2.5), function(v) 2.5 * v)
  )
  for (nm in names(ops)) {
    got <- run_graph(make_backend, list(a = x), function(ctx, t) ops[[nm]][[1]](ctx, t$a))
    expect_identical(dim(got), D5, label = nm)
    expect_close(got, ops[[nm]][[2]](x), tol = 1e-5)
  }
})

test_each_backend("binary ops on five dimensions, broadcasting along every one", {
  set.seed(6)
  a <- array(runif(72, 0.5, 2), D5)
  for (db in list(D5, c(3L, 1L, 2L, 1L, 1L), c(3L, 2L, 2L, 2L, 1L), c(1L, 2L, 1L, 1L, 3L))) {
    b <- array(runif(prod(db), 0.5, 2), db)
    want <- bcast(b, D5)
    got <- run_graph(make_backend, list(a = a, b = b), function(ctx, t) {
      list(ggml_add(ctx, t$a, t$b), ggml_sub(ctx, t$a, t$b), ggml_mul(ctx, t$a, t$b), ggml_div(ctx, t$a, t$b))
    })
    expect_close(got[[1]], a + want)
    expect_close(got[[2]], a - want)
    expect_close(got[[3]], a * want)
    expect_close(got[[4]], a / want)
  }
  # a four-dimensional b is broadcast over the fifth dimension
  b4 <- array(runif(24), D5[1:4])
  got <- run_graph(make_backend, list(a = a, b = b4), function(ctx, t) ggml_add(ctx, t$a, t$b))
  expect_close(got, a + bcast(array(b4, c(D5[1:4], 1L)), D5))
})

test_each_backend("concat along each of the five dimensions", {
  set.seed(7)
  a <- array(rnorm(72), D5)
  for (k in 0:4) {
    db <- D5
    db[k + 1L] <- 2L
    b <- array(rnorm(prod(db)), db)
    got <- run_graph(make_backend, list(a = a, b = b), function(ctx, t) ggml_concat(ctx, t$a, t$b, dim = k))
    expect_identical(dim(got), dim(concat_r(a, b, k + 1L)), label = paste("dim", k))
    expect_close(got, concat_r(a, b, k + 1L))
  }
  # two four-dimensional tensors joined along the fifth
  a4 <- array(rnorm(24), D5[1:4])
  got <- run_graph(make_backend, list(a = a4, b = a4 * 2), function(ctx, t) ggml_concat(ctx, t$a, t$b, dim = 4))
  expect_identical(dim(got), c(D5[1:4], 2L))
  expect_close(got, c(a4, a4 * 2))
})

test_each_backend("row ops, repeat and copies on five dimensions", {
  set.seed(8)
  x <- array(rnorm(72), D5)
  got <- run_graph(make_backend, list(a = x), function(ctx, t) {
    list(ggml_sum_rows(ctx, t$a), ggml_soft_max(ctx, t$a), ggml_cont(ctx, ggml_transpose(ctx, t$a)),
         ggml_rms_norm(ctx, t$a, 1e-6))
  })
  expect_close(got[[1]], apply(x, 2:5, sum))
  sm <- apply(x, 2:5, function(v) exp(v - max(v)) / sum(exp(v - max(v))))
  expect_close(got[[2]], sm)
  expect_close(got[[3]], aperm(x, c(2, 1, 3, 4, 5)))
  expect_close(got[[4]], apply(x, 2:5, function(v) v / sqrt(mean(v^2) + 1e-6)), tol = 1e-4)
  small <- array(rnorm(6), c(3L, 2L, 1L, 1L, 1L))
  got <- run_graph(make_backend, list(a = small, b = x), function(ctx, t) ggml_repeat(ctx, t$a, t$b))
  expect_close(got, bcast(small, D5))
})

test_that("the total sum and type conversions of five dimensions on the CPU", {
  set.seed(9)
  x <- array(round(rnorm(72), 3), D5)
  got <- run_graph(function() ggml_backend_cpu_init(), list(a = x), function(ctx, t) {
    list(ggml_sum(ctx, t$a), ggml_cpy(ctx, t$a, ggml_new_tensor(ctx, GGML_TYPE_F16, 5L, D5)))
  })
  expect_close(got[[1]], sum(x), tol = 1e-5)
  expect_close(got[[2]], x, tol = 1e-3)
})

test_that("an op Vulkan has no five-dimensional form for falls back to the CPU in the scheduler", {
  skip_if_no_vulkan()
  set.seed(10)
  x <- array(round(rnorm(72), 3), D5)
  vk <- ggml_vulkan_init(0)
  sched <- ggml_backend_sched_new(list(vk))
  ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit({ ggml_backend_sched_free(sched); ggml_free(ctx); ggml_backend_free(vk) })
  a <- ggml_set_input(ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, D5))
  h <- ggml_relu(ctx, ggml_scale(ctx, a, 2))
  y <- ggml_sum(ctx, h)
  gr <- ggml_build_forward_expand(ctx, y)
  ggml_backend_sched_alloc_graph(sched, gr)
  ggml_backend_tensor_set_data(a, as.vector(x))
  ggml_backend_sched_graph_compute(sched, gr)
  expect_close(ggml_backend_tensor_get_data(y), sum(pmax(2 * x, 0)), tol = 1e-5)
  expect_identical(ggml_backend_name(ggml_backend_sched_get_tensor_backend(sched, h)), "Vulkan0")
  expect_identical(ggml_backend_name(ggml_backend_sched_get_tensor_backend(sched, y)), "CPU")
  # computed on Vulkan directly, the same graph is refused with a way out
  ctx2 <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx2), add = TRUE)
  a2 <- ggml_new_tensor(ctx2, GGML_TYPE_F32, 5L, D5)
  y2 <- ggml_sum(ctx2, a2)
  buf <- ggml_backend_alloc_ctx_tensors(ctx2, vk)
  on.exit(ggml_backend_buffer_free(buf), add = TRUE, after = FALSE)
  ggml_backend_tensor_set_data(a2, as.vector(x))
  expect_error(ggml_backend_graph_compute(vk, ggml_build_forward_expand(ctx2, y2)),
    class = "ggmlR_error", regexp = "up to four dimensions.*scheduler")
})

test_that("bad five-dimensional input is a clear error", {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  expect_error(ggml_new_tensor(ctx, GGML_TYPE_F32, 6L, rep(2, 6)), class = "ggmlR_error", regexp = "1, 2, 3, 4 or 5")
  expect_error(ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, c(2, 2, 2, 2)), class = "ggmlR_error", regexp = "4 size")
  expect_error(ggml_new_tensor_5d(ctx, GGML_TYPE_F32, 2, 2, 2, 2, -1), class = "ggmlR_error")
  expect_error(ggml_new_tensor_5d(ctx, GGML_TYPE_F32, 2, 2, 2, 2, NA), class = "ggmlR_error")
  expect_error(ggml_new_tensor_5d(ctx, GGML_TYPE_F32, 2, 2, 2, 2, c(1, 2)), class = "ggmlR_error", regexp = "ne4")
  a <- ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, D5)
  expect_error(ggml_mul_mat(ctx, a, a), class = "ggmlR_error", regexp = "up to four dimensions.*ggml_reshape_4d")
  expect_error(ggml_conv_2d(ctx, a, a), class = "ggmlR_error", regexp = "four dimensions")
  b2 <- ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, c(3, 2, 2, 2, 2))
  expect_error(ggml_add(ctx, a, b2), class = "ggmlR_error", regexp = "fifth size of b")
  expect_error(ggml_add(ctx, b2, a), class = "ggmlR_error", regexp = "fifth size of b")
  expect_error(ggml_concat(ctx, a, a, dim = 5), class = "ggmlR_error", regexp = "0, 1, 2, 3 or 4")
  expect_error(ggml_concat(ctx, a, ggml_new_tensor(ctx, GGML_TYPE_F32, 5L, c(3, 2, 2, 1, 3)), dim = 4),
    class = "ggmlR_error", regexp = "dimensions 0 to 3")
  expect_error(ggml_concat(ctx, a, b2, dim = 1), class = "ggmlR_error", regexp = "fifth size")
  expect_error(ggml_reshape_5d(ctx, a, 3, 2, 2, 2, 2), class = "ggmlR_error", regexp = "elements")
  # the context is still usable
  ok <- ggml_add(ctx, a, a)
  expect_identical(ggml_tensor_shape(ok), as.numeric(D5))
})
