# In-place ops compute into their first argument's memory and return a view
# of it; the new element-wise functions and clamp's argument names.

test_each_backend("in-place ops write their result into the first argument", {
  set.seed(90)
  x <- rarray(5, 3)
  y <- rarray(5, 3) + 3
  ops <- list(
    abs = list(function(ctx, t) ggml_abs_inplace(ctx, t$x), abs(x)),
    sqr = list(function(ctx, t) ggml_sqr_inplace(ctx, t$x), x^2),
    exp = list(function(ctx, t) ggml_exp_inplace(ctx, t$x), exp(x)),
    neg = list(function(ctx, t) ggml_neg_inplace(ctx, t$x), -x),
    tanh = list(function(ctx, t) ggml_tanh_inplace(ctx, t$x), tanh(x)),
    floor = list(function(ctx, t) ggml_floor_inplace(ctx, t$x), floor(x)),
    softplus = list(function(ctx, t) ggml_softplus_inplace(ctx, t$x), log1p(exp(x))),
    scale = list(function(ctx, t) ggml_scale_inplace(ctx, t$x, 3), 3 * x),
    add = list(function(ctx, t) ggml_add_inplace(ctx, t$x, t$y), x + y),
    div = list(function(ctx, t) ggml_div_inplace(ctx, t$x, t$y), x / y),
    leaky = list(function(ctx, t) ggml_leaky_relu(ctx, t$x, 0.1, inplace = TRUE), ifelse(x > 0, x, 0.1 * x)),
    soft_max = list(function(ctx, t) ggml_soft_max_inplace(ctx, t$x), sweep(exp(x), 2, colSums(exp(x)), "/")),
    rms_norm = list(function(ctx, t) ggml_rms_norm_inplace(ctx, t$x, 1e-6), sweep(x, 2, sqrt(colMeans(x^2) + 1e-6), "/")),
    mask = list(function(ctx, t) ggml_diag_mask_inf_inplace(ctx, t$x, 0), ifelse(row(x) > col(x), -Inf, x)))
  for (nm in names(ops)) {
    got <- run_graph(make_backend, list(x = x, y = y), function(ctx, t) list(ops[[nm]][[1]](ctx, t), t$x))
    expect_close(got[[1]], ops[[nm]][[2]], 1e-5)
    expect_close(got[[2]], ops[[nm]][[2]], 1e-5) # x itself holds the result
  }
  expect_error(run_graph(make_backend, list(x = x), function(ctx, t) .op(ctx, "sum", list(t$x), inplace = TRUE)),
    "cannot be written into a's memory", class = "ggmlR_error")
})

test_each_backend("the new element-wise functions match base R; clamp takes min_val and max_val", {
  x <- c(-2.5, -1.2, -0.5, 0, 0.5, 1.5, 2.5, 30)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) list(
    ggml_sgn(ctx, t$x), ggml_ceil(ctx, t$x), ggml_floor(ctx, t$x), ggml_round(ctx, t$x),
    ggml_softplus(ctx, t$x), ggml_gelu_erf(ctx, t$x), ggml_gelu_quick(ctx, t$x),
    ggml_clamp(ctx, t$x, min_val = -1, max_val = 1), ggml_clamp(ctx, t$x, min = 0, max = 2)))
  expect_equal(as.vector(got[[1]]), sign(x))
  expect_equal(as.vector(got[[2]]), ceiling(x))
  expect_equal(as.vector(got[[3]]), floor(x))
  expect_equal(as.vector(got[[4]]), sign(x) * floor(abs(x) + 0.5)) # halves away from zero, as C
  expect_close(got[[5]], log1p(exp(x)), 1e-6)
  expect_close(got[[6]], x * pnorm(x), 1e-6)
  expect_close(got[[7]], x / (1 + exp(-1.702 * x)), 1e-6)
  expect_equal(as.vector(got[[8]]), pmin(pmax(x, -1), 1))
  expect_equal(as.vector(got[[9]]), pmin(pmax(x, 0), 2))
})
