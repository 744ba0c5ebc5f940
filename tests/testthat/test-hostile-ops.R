# Hostile arguments to the transformer, convolution, row, index and element
# ops: wrong shapes, wrong types, out-of-range parameters and coordinates.
# Each is a ggmlR_error saying what was wrong, raised in the call of the
# user's function; nothing crashes (cases run in a child, helper-hostile.R).

ops_setup <- quote({
  ctx <- ggml_init(128 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  idx <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2)
  t3 <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 2, 3)
  k <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 2, 5)
  pos <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)
  dctx <- ggml_init(1024 * 1024)
  da <- ggml_new_tensor_2d(dctx, GGML_TYPE_F32, 4, 3)
  di <- ggml_new_tensor_1d(dctx, GGML_TYPE_I32, 2)
})

test_that("rope, attention and GLU ops reject bad shapes, types and codes", {
  expect_hostile_errors(list(
    rope_pos_type = hcase(ggml_rope(ctx, t3, a, 8), "positions b must be a 1-D i32 tensor"),
    rope_pos_len = hcase(ggml_rope(ctx, t3, idx, 8), "needs 3 position"),
    rope_ndims_odd = hcase(ggml_rope(ctx, t3, pos, 7), "positive even number"),
    rope_ndims_big = hcase(ggml_rope(ctx, t3, pos, 16), "positive even number"),
    rope_mode_na = hcase(ggml_rope(ctx, t3, pos, 8, mode = NA), "whole numbers"),
    rope_back_pos = hcase(ggml_rope_ext_back(ctx, t3, a, NULL, 8, 0, 0, 10000, 1, 0, 1, 0, 0), "positions"),
    rope_multi_sections = hcase(ggml_rope_multi(ctx, t3, pos, NULL, 8, c(1, 1, 1), 8, 0, 10000, 1, 0, 1, 0, 0),
                                "four whole numbers"),
    # The vision mode rotates n_dims pairs, one frequency factor each: half
    # as many factors were accepted and the kernel read past them.
    rope_vision_factors = hcase(ggml_rope_multi(ctx, t3, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 12),
                                                ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), 4, c(1, 1, 0, 0),
                                                GGML_ROPE_TYPE_VISION), "at least n_dims = 4 values"),
    flash_shape = hcase(ggml_flash_attn_ext(ctx, t3, a, b, NULL, 1, 0, 0), "flash_attn_ext"),
    flash_back_shape = hcase(ggml_flash_attn_back(ctx, t3, a, b, a, FALSE), "flash_attn_back"),
    soft_max_mask = hcase(ggml_soft_max_ext(ctx, a, t3, 1, 0), "mask"),
    soft_max_back = hcase(ggml_soft_max_ext_back(ctx, a, t3, 1, 0), "same shape"),
    glu_odd = hcase(ggml_swiglu(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5)), "even length"),
    glu_code = hcase(ggml_glu(ctx, a, 99L), "GLU code"),
    glu_split_shape = hcase(ggml_glu_split(ctx, a, t3, GGML_GLU_OP_SWIGLU), "same shape"),
    glu_i32 = hcase(ggml_swiglu(ctx, idx), "floating-point"),
    ceil_i32 = hcase(ggml_ceil(ctx, idx), "floating-point"),
    softplus_list = hcase(ggml_softplus(ctx, list()), "ggml_tensor"),
    add_inplace_shape = hcase(ggml_add_inplace(ctx, a, t3), "broadcast"),
    rms_norm_back = hcase(ggml_rms_norm_back(ctx, a, t3), "same shape"),
    silu_back = hcase(ggml_silu_back(ctx, a, t3), "same shape"),
    group_norm_0 = hcase(ggml_group_norm(ctx, t3, 0), "positive"),
    l2_norm_eps = hcase(ggml_l2_norm(ctx, a, "x"), "numbers"),
    timestep_i32 = hcase(ggml_timestep_embedding(ctx, idx, 4, 10000), "floating-point"),
    timestep_dim = hcase(ggml_timestep_embedding(ctx, a, -4, 10000), "positive")
  ), setup = ops_setup)
})

test_that("vision rope reads one frequency factor per rotated pair", {
  # Oracle: with ext_factor 0 an angle divided by a factor of 2 is the angle
  # at freq_scale 0.5, so factors of 2 for all n_dims pairs give the result
  # of freq_scale = 0.5 without factors.
  res <- hostile_run(list(vision = quote({
    x <- runif(8 * 2 * 3)
    run <- function(ff, freq_scale) {
      run_graph(ggml_backend_cpu_init, list(x = array(x, c(8, 2, 3)), p = 0:11, f = rep(2, 4)),
                function(ctx, t) ggml_rope_multi(ctx, t$x, t$p, if (ff) t$f else NULL, 4, c(1, 1, 0, 0),
                                                 GGML_ROPE_TYPE_VISION, freq_scale = freq_scale),
                types = list(p = GGML_TYPE_I32))
    }
    max(abs(run(TRUE, 1) - run(FALSE, 0.5)))
  })), setup = quote(source(Sys.getenv("HELPER_OPS"))), env = paste0("HELPER_OPS=", normalizePath(test_path("helper-ops.R"))))
  expect_identical(res$outcome, "value", info = res$message)
  expect_lt(as.numeric(res$message), 1e-6)
})

test_that("convolution, pooling and padding ops reject bad shapes and parameters", {
  expect_hostile_errors(list(
    conv_1d_shape = hcase(ggml_conv_1d(ctx, k, a, 1, 0, 1), "im2col"),
    conv_1d_stride0 = hcase(ggml_conv_1d(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 3, 2), t3, 0, 0, 1), NULL),
    conv_1d_dw = hcase(ggml_conv_1d_dw(ctx, t3, a, 1, 0, 1), "same C"),
    conv_transpose_1d = hcase(ggml_conv_transpose_1d(ctx, k, a, 1, 0, 1), "conv_transpose_1d"),
    conv_transpose_2d = hcase(ggml_conv_transpose_2d_p0(ctx, a, t3, 0), "stride must be positive"),
    conv_2d_direct = hcase(ggml_conv_2d_direct(ctx, a, t3, 1, 1, 0, 0, 1, 1), "conv_2d_direct"),
    pool_1d_k0 = hcase(ggml_pool_1d(ctx, a, GGML_OP_POOL_MAX, 0, 1, 0), "must be positive"),
    pad_reflect_big = hcase(ggml_pad_reflect_1d(ctx, a, 10, 10), "smaller than the rows"),
    pad_reflect_neg = hcase(ggml_pad_reflect_1d(ctx, a, -1, 0), ">= 0"),
    win_part_0 = hcase(ggml_win_part(ctx, t3, 0), "positive"),
    win_unpart = hcase(ggml_win_unpart(ctx, t3, 100, 100, 2), "must be"),
    get_rel_pos = hcase(ggml_get_rel_pos(ctx, a, 0, 5), "positive"),
    add_rel_pos = hcase(ggml_add_rel_pos(ctx, a, b, t3), "add_rel_pos")
  ), setup = ops_setup)
})

test_that("row, index and set ops reject bad shapes, types and ranges", {
  expect_hostile_errors(list(
    roll_na = hcase(ggml_roll(ctx, a, NA, 0, 0, 0), "numbers"),
    argsort_order = hcase(ggml_argsort(ctx, a, 7L), "SORT_ORDER"),
    top_k_big = hcase(ggml_top_k(ctx, a, 10), "between 1 and"),
    top_k_zero = hcase(ggml_top_k(ctx, a, 0), "between 1 and"),
    arange_step0 = hcase(ggml_arange(ctx, 0, 10, 0), "non-zero"),
    arange_empty = hcase(ggml_arange(ctx, 10, 0, 1), "no values"),
    arange_huge = hcase(ggml_arange(ctx, 0, 1e15, 1), "too many"),
    diag_2d = hcase(ggml_diag(ctx, a), "one row per matrix"),
    diag_mask_zero_na = hcase(ggml_diag_mask_zero(ctx, a, NA), "numbers"),
    count_equal_shape = hcase(ggml_count_equal(ctx, a, t3), "same shape"),
    get_rows_back_type = hcase(ggml_get_rows_back(ctx, a, a, b), "must be i32"),
    repeat_back = hcase(ggml_repeat_back(ctx, a, t3), "multiple"),
    mul_mat_id = hcase(ggml_mul_mat_id(ctx, a, b, idx), "ids"),
    set_too_big = hcase(ggml_set(ctx, a, t3, 16, 48, 192, 0), "^ggml_set\\([^:]*\\): set: .* past the end of a"),
    set_1d_types = hcase(ggml_set_1d(ctx, a, idx, 1e6), "floating-point, or of one type"),
    set_2d_misaligned = hcase(ggml_set_2d(ctx, a, b, 16, 3), "multiples of a's element size")
  ), setup = ops_setup)
})

test_that("scalars and single elements reject bad values and coordinates", {
  res <- expect_hostile_errors(list(
    new_f32_chr = hcase(ggml_new_f32(dctx, "a"), "single number"),
    new_i32_frac = hcase(ggml_new_i32(dctx, 2.5), "whole number"),
    new_i32_big = hcase(ggml_new_i32(dctx, 2^40), NULL),
    set_f32_nd_oob = hcase(ggml_set_f32_nd(da, 10, 0, 0, 0, 1), "outside the tensor's sizes"),
    get_f32_1d_oob = hcase(ggml_get_f32_1d(da, 100), "outside the tensor's 12 elements"),
    get_i32_nd_neg = hcase(ggml_get_i32_nd(di, -1, 0, 0, 0), "outside"),
    set_i32_1d_na = hcase(ggml_set_i32_1d(di, NA, 1), "whole numbers"),
    set_f32_1d_vec = hcase(ggml_set_f32_1d(da, 0, 1:2), "single number"),
    no_memory = hcase(ggml_get_f32_1d(a, 0), "no data")
  ), setup = ops_setup)
  # The error is raised in the user's call, not in an internal helper.
  call <- tryCatch({
    ctx <- ggml_init(1024 * 1024)
    on.exit(ggml_free(ctx))
    ggml_set_f32_nd(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2), 5, 0, 0, 0, 1)
  }, ggmlR_error = function(e) conditionCall(e))
  expect_identical(as.character(call[[1L]]), "ggml_set_f32_nd")
})
