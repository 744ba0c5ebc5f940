# ggml_cpu_add() / ggml_cpu_mul(): the element-wise results, without a graph,
# equal the graph ops' results and base R's values rounded to f32.

f32 <- function(x) readBin(writeBin(as.numeric(x), raw(), size = 4L), "double", n = length(x), size = 4L)

test_that("ggml_cpu_add and ggml_cpu_mul equal the graph ops and base R in f32", {
  set.seed(21)
  x <- f32(rnorm(30) * 10)
  y <- f32(rnorm(30))
  ctx <- ggml_init(4 * 1024 * 1024)
  on.exit(ggml_free(ctx))
  a <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 6, 5), x)
  b <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 30), y)
  s <- ggml_cpu_add(a, b)
  p <- ggml_cpu_mul(a, b)
  expect_type(s, "double")
  expect_identical(s, f32(x + y))
  expect_identical(p, f32(x * y))
  b2 <- ggml_reshape_2d(ctx, b, 6, 5)
  gs <- ggml_add(ctx, a, b2)
  gp <- ggml_mul(ctx, a, b2)
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, gs))
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, gp))
  expect_identical(s, ggml_get_f32(gs))
  expect_identical(p, ggml_get_f32(gp))
  # inputs unchanged
  expect_identical(ggml_get_f32(a), x)
})

test_that("ggml_cpu_add and ggml_cpu_mul reject other types, sizes and tensors without data", {
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), 1:4)
  i <- ggml_set_i32(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4), 1:4)
  short <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
  expect_error(ggml_cpu_add(a, i), "must be f32", class = "ggmlR_error")
  e <- expect_error(ggml_cpu_mul(a, short), "4 elements and b 3", class = "ggmlR_error")
  expect_identical(as.character(conditionCall(e)[[1]]), "ggml_cpu_mul")
  expect_error(ggml_cpu_add(a, list()), "ggml_tensor", class = "ggmlR_error")
  nctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(nctx), add = TRUE)
  n <- ggml_new_tensor_1d(nctx, GGML_TYPE_F32, 4)
  expect_error(ggml_cpu_add(a, n), "no data", class = "ggmlR_error")
})
