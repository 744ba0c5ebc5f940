# f64 tensors (type code 28): the CPU backend computes them in double
# precision, so results agree with base R to rounding; the Vulkan backend
# refuses them with an error that names the op and says what to use.
F64 <- 28L

f64_graph <- function(inputs, build, threads = NULL) {
  types <- setNames(rep(list(F64), length(inputs)), names(inputs))
  run_graph(function() ggml_backend_cpu_init(), inputs, build, types = types, threads = threads)
}

test_that("f64 is a known type: size 8, name f64", {
  expect_identical(ggml_type_size(F64), 8)
  expect_identical(ggml_type_name(F64), "f64")
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  t <- ggml_new_tensor_2d(ctx, F64, 3, 2)
  v <- c(0.1, 1 / 3, -1e300, 5e-324, pi, exp(1))
  ggml_backend_tensor_set_data(t, v)
  # values go in and come out unrounded
  expect_identical(ggml_backend_tensor_get_data(t), v)
  expect_identical(ggml_tensor_type(t), F64)
})

test_that("f64 element-wise, reduction and movement ops match base R in double precision", {
  set.seed(90)
  for (th in 1:2) {
    x <- matrix(rnorm(257 * 130), 257, 130)
    y <- rnorm(257)
    p <- abs(x) + 0.5
    got <- f64_graph(list(x = x, y = y, p = p), function(ctx, t) list(
      ggml_add(ctx, t$x, t$y),
      ggml_div(ctx, t$x, t$p),
      ggml_scale(ctx, t$x, 1 / 3),
      ggml_clamp(ctx, t$x, -0.1, 0.7),
      ggml_tanh(ctx, t$x),
      ggml_exp(ctx, t$x),
      ggml_log(ctx, t$p),
      ggml_sqrt(ctx, t$p),
      ggml_sigmoid(ctx, t$x),
      ggml_soft_max(ctx, t$x),
      ggml_sum_rows(ctx, t$x),
      ggml_sum(ctx, t$x),
      ggml_mean(ctx, t$x),
      ggml_norm(ctx, t$x, 1e-12),
      ggml_cont(ctx, ggml_transpose(ctx, t$x)),
      ggml_concat(ctx, t$x, t$p, 1),
      ggml_repeat(ctx, t$y, t$x)), threads = th)
    tol <- 1e-13
    expect_close(got[[1]], x + y, tol)
    expect_close(got[[2]], x / p, tol)
    expect_close(got[[3]], x / 3, tol)
    expect_close(got[[4]], pmin(pmax(x, -0.1), 0.7), 0)
    expect_close(got[[5]], tanh(x), tol)
    expect_close(got[[6]], exp(x), tol)
    expect_close(got[[7]], log(p), tol)
    expect_close(got[[8]], sqrt(p), tol)
    expect_close(got[[9]], 1 / (1 + exp(-x)), tol)
    expect_close(got[[10]], apply(x, 2, function(v) exp(v - max(v)) / sum(exp(v - max(v)))), tol)
    expect_close(got[[11]], colSums(x), tol, scale = 16)
    expect_close(got[[12]], sum(x), tol, scale = 16)
    expect_close(got[[13]], colMeans(x), tol)
    expect_close(got[[14]], apply(x, 2, function(v) (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-12)), 1e-12)
    expect_close(got[[15]], t(x), 0)
    expect_close(got[[16]], cbind(x, p), 0)
    expect_close(got[[17]], matrix(y, 257, 130), 0)
  }
})

test_that("f64 products match %*% to rounding, transposed operands included", {
  set.seed(91)
  a <- matrix(rnorm(70 * 90), 70, 90)   # ggml [70, 90]: K = 70, M = 90
  b <- matrix(rnorm(70 * 40), 70, 40)   # [70, 40]: N = 40
  for (th in 1:2) {
    got <- f64_graph(list(a = a, b = b), function(ctx, t) list(
      ggml_mul_mat(ctx, t$a, t$b),
      # strided views are read in place
      ggml_mul_mat(ctx, ggml_transpose(ctx, ggml_cont(ctx, ggml_transpose(ctx, t$a))), t$b),
      ggml_out_prod(ctx, ggml_transpose(ctx, t$a), ggml_transpose(ctx, t$b))),
      threads = th)
    want <- t(a) %*% b
    expect_close(got[[1]], want, 1e-13, scale = 8)
    expect_close(got[[2]], want, 1e-13, scale = 8)
    expect_close(got[[3]], want, 1e-13, scale = 8)
  }
  # An f64 result keeps what f32 would lose.
  got <- f64_graph(list(a = c(1, 1e-12), b = c(1, 1)), function(ctx, t) ggml_mul_mat(ctx, t$a, t$b))
  expect_identical(as.vector(got), 1 + 1e-12)
})

test_that("f64 and f32 tensors mix: the result is f64 where either is", {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  a <- ggml_new_tensor_1d(ctx, F64, 2)
  b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
  ggml_backend_tensor_set_data(a, c(1e-12, 2))
  ggml_backend_tensor_set_data(b, c(1, 0.5))
  s <- ggml_add(ctx, a, b)
  c32 <- ggml_cpy(ctx, a, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2))
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, s))
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, c32))
  expect_identical(ggml_tensor_type(s), F64)
  expect_identical(ggml_backend_tensor_get_data(s), c(1 + 1e-12, 2.5))
  # copied into an f32 tensor, 1e-12 is rounded to f32
  v32 <- ggml_backend_tensor_get_data(c32)
  expect_identical(v32[2], 2)
  expect_false(v32[1] == 1e-12)
  expect_equal(v32[1], 1e-12, tolerance = 1e-7)
})

test_that("the Vulkan backend refuses f64 tensors, naming the op and f32", {
  skip_if_no_vulkan()
  err <- tryCatch(
    run_graph(function() ggml_vulkan_init(0L), list(x = matrix(1, 2, 2)),
              function(ctx, t) ggml_relu(ctx, t$x), types = list(x = F64)),
    error = identity)
  expect_s3_class(err, "ggmlR_error")
  expect_match(conditionMessage(err), "UNARY.*f64.*GGML_TYPE_F32")
})
