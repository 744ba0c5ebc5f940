# The transformer, convolution, row and index ops through the R API on the
# Vulkan backend (lavapipe in CI) give the CPU backend's results.

vk_vs_cpu <- function(inputs, build, tol = 1e-4, types = list()) {
  got <- run_graph(function() ggml_vulkan_init(0L), inputs, build, types = types)
  want <- run_graph(function() ggml_backend_cpu_init(), inputs, build, types = types)
  expect_close(got, want, tol)
}

test_that("rope, attention, GLU and softmax ops on Vulkan equal the CPU backend", {
  skip_if_no_vulkan()
  set.seed(31)
  x <- array(rnorm(8 * 2 * 3), c(8, 2, 3))
  pos <- c(0L, 3L, 7L)
  vk_vs_cpu(list(x = x, p = pos), function(ctx, t) ggml_rope(ctx, t$x, t$p, 8, GGML_ROPE_TYPE_NORM),
            types = list(p = GGML_TYPE_I32))
  vk_vs_cpu(list(x = x, p = pos), function(ctx, t) {
    ggml_rope_ext(ctx, t$x, t$p, NULL, 6, GGML_ROPE_TYPE_NEOX, 0, 500, 0.5, 0, 1, 32, 1)
  }, types = list(p = GGML_TYPE_I32))
  q <- array(rnorm(4 * 3 * 2), c(4, 3, 2))
  k <- array(rnorm(4 * 5 * 2), c(4, 5, 2))
  v <- array(rnorm(4 * 5 * 2), c(4, 5, 2))
  vk_vs_cpu(list(q = q, k = k, v = v), function(ctx, t) ggml_flash_attn_ext(ctx, t$q, t$k, t$v, NULL, 0.5))
  g <- matrix(rnorm(6 * 4), 6, 4)
  for (f in list(ggml_swiglu, ggml_geglu, ggml_reglu, ggml_geglu_erf, ggml_geglu_quick)) {
    vk_vs_cpu(list(g = g), function(ctx, t) f(ctx, t$g))
  }
  vk_vs_cpu(list(g = g, m = matrix(rnorm(24), 6, 4)), function(ctx, t) ggml_soft_max_ext_back(ctx, t$m, ggml_soft_max(ctx, t$g)))
  vk_vs_cpu(list(g = g), function(ctx, t) ggml_l2_norm(ctx, t$g))
  vk_vs_cpu(list(g = array(rnorm(2 * 2 * 4), c(2, 2, 4))), function(ctx, t) ggml_group_norm(ctx, t$g, 2))
})

test_that("convolution, pooling, row and index ops on Vulkan equal the CPU backend", {
  skip_if_no_vulkan()
  set.seed(32)
  x <- matrix(rnorm(12 * 2), 12, 2)
  k <- array(rnorm(3 * 2 * 4), c(3, 2, 4))
  vk_vs_cpu(list(k = k, x = x), function(ctx, t) ggml_conv_1d(ctx, t$k, t$x, 2, 1, 1))
  vk_vs_cpu(list(k = array(rnorm(3 * 4 * 2), c(3, 4, 2)), x = x),
            function(ctx, t) ggml_conv_transpose_1d(ctx, t$k, t$x, 2, 0, 1))
  img <- array(rnorm(6 * 5 * 3), c(6, 5, 3, 1))
  k2 <- array(rnorm(3 * 3 * 3 * 2), c(3, 3, 3, 2))
  vk_vs_cpu(list(k = k2, x = img), function(ctx, t) ggml_conv_2d_direct(ctx, t$k, t$x, 1, 2, 1, 0, 1, 1))
  vk_vs_cpu(list(k = array(rnorm(3 * 3 * 1 * 3), c(3, 3, 1, 3)), x = img),
            function(ctx, t) ggml_conv_2d_dw_direct(ctx, t$k, t$x, 1, 1, 1, 1, 1, 1))
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_pool_1d(ctx, t$x, GGML_OP_POOL_AVG, 3, 2, 1))
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_pad_reflect_1d(ctx, t$x, 2, 3))
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_roll(ctx, t$x, 5, 1))
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_argsort(ctx, t$x, GGML_SORT_ORDER_DESC), tol = 0)
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_top_k(ctx, t$x, 4), tol = 0)
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_floor(ctx, ggml_scale(ctx, t$x, 3)), tol = 0)
  vk_vs_cpu(list(x = x[, 1]), function(ctx, t) ggml_diag(ctx, t$x))
  vk_vs_cpu(list(x = matrix(rnorm(16), 4, 4)), function(ctx, t) ggml_diag_mask_zero(ctx, t$x, 1))
  vk_vs_cpu(list(x = x), function(ctx, t) ggml_repeat_back(ctx, t$x, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 12)))
})
