# Hostile arguments to the ggml_* API: NA, negative, fractional and huge
# sizes, wrong types, strings that are not text, misaligned views, freed and
# stale objects, graphs deep enough to overflow a recursive drop. Cases run
# in a child process (helper-hostile.R).

ggml_setup <- quote({
  ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  idx <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2)
  cpu <- ggml_backend_cpu_init()
})

test_that("bad sizes and types of new tensors and contexts are errors", {
  bad <- list(NA, NA_real_, -1, 2.5, Inf, NaN, "4", list(4), NULL, 1e300, 2^62, -2^31)
  cases <- list()
  for (i in seq_along(bad)) {
    v <- bad[[i]]
    cases[[sprintf("new_tensor_1d_%02d", i)]] <- bquote(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, .(v)))
    cases[[sprintf("new_tensor_2d_%02d", i)]] <- bquote(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, .(v)))
    cases[[sprintf("init_%02d", i)]] <- bquote(ggml_init(.(v)))
  }
  cases <- c(cases, list(
    n_dims_na = quote(ggml_new_tensor(ctx, GGML_TYPE_F32, n_dims = NA, ne = c(2, 2))),
    n_dims_6 = quote(ggml_new_tensor(ctx, GGML_TYPE_F32, n_dims = 6, ne = rep(2, 6))),
    n_dims_chr = quote(ggml_new_tensor(ctx, GGML_TYPE_F32, n_dims = "2", ne = c(2, 2))),
    ne_chr = quote(ggml_new_tensor(ctx, GGML_TYPE_F32, n_dims = 2, ne = c("a", "b"))),
    type_na = quote(ggml_new_tensor_1d(ctx, NA, 4)),
    type_999 = quote(ggml_new_tensor_1d(ctx, 999L, 4)),
    type_chr = quote(ggml_new_tensor_1d(ctx, "f32", 4)),
    huge_4d = quote(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2^20, 2^20, 2^20, 2^20)),
    ctx_not_ctx = quote(ggml_new_tensor_1d(list(), GGML_TYPE_F32, 4)),
    ctx_freed = quote({ c2 <- ggml_init(1024); ggml_free(c2); ggml_new_tensor_1d(c2, GGML_TYPE_F32, 4) }),
    init_no_alloc_na = quote(ggml_init(1024, no_alloc = NA)),
    init_huge_alloc = quote(ggml_init(1e15, no_alloc = FALSE))
  ))
  res <- hostile_run(cases, setup = ggml_setup)
  expect_gte(nrow(res), 48)
  expect_hostile(res)
})

test_that("names that are not text and misaligned views are errors", {
  expect_hostile_errors(list(
    set_name_ff = hcase(ggml_set_name(a, rawToChar(as.raw(0xff))), "not valid UTF-8"),
    set_name_na = hcase(ggml_set_name(a, NA_character_), NULL),
    set_name_vec = hcase(ggml_set_name(a, c("x", "y")), NULL),
    view_offset_3 = hcase(ggml_view_1d(ctx, a, 4, offset = 3), "offset 3 is not a multiple of the f32 element size"),
    view_offset_2 = hcase(ggml_view_1d(ctx, a, 2, offset = 2), "multiple of"),
    view_2d_stride = hcase(ggml_view_2d(ctx, a, 2, 2, nb1 = 6, offset = 0), "stride 6 is not a multiple"),
    view_3d_stride = hcase(ggml_view_3d(ctx, a, 2, 1, 1, nb1 = 16, nb2 = 10, offset = 0), "stride 10"),
    view_i32_offset = hcase(ggml_view_1d(ctx, idx, 1, offset = 1), "multiple of"),
    view_negative = hcase(ggml_view_1d(ctx, a, 2, offset = -4), NULL),
    view_past_end = hcase(ggml_view_1d(ctx, a, 13, offset = 0), "spans bytes"),
    view_huge = hcase(ggml_view_1d(ctx, a, 2^62, offset = 0), NULL),
    reshape_mismatch = hcase(ggml_reshape_2d(ctx, a, 5, 5), "elements"),
    reshape_na = hcase(ggml_reshape_1d(ctx, a, NA), NULL),
    permute_dup = hcase(ggml_permute(ctx, a, 0, 0, 1, 2), "order"),
    permute_na = hcase(ggml_permute(ctx, a, NA, 1, 2, 3), NULL),
    concat_dim = hcase(ggml_concat(ctx, a, b, dim = 7), NULL),
    mul_mat_shape = hcase(ggml_mul_mat(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 2)), NULL),
    add_shape = hcase(ggml_add(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 2)), NULL),
    pool_kernel = hcase(ggml_pool_2d(ctx, a, 0L, 2^40, 2^40), NULL),
    pad_huge = hcase(ggml_pad(ctx, a, 2^62, 2^62), NULL),
    upscale_huge = hcase(ggml_upscale(ctx, a, 2^40), NULL),
    diag_na = hcase(ggml_diag_mask_inf(ctx, a, NA), NULL),
    scale_chr = hcase(ggml_scale(ctx, a, "2"), NULL),
    op_on_list = hcase(ggml_relu(ctx, list(1)), NULL)
  ), setup = ggml_setup)
})

test_that("data, buffers and backends: wrong lengths, freed objects, NA threads", {
  expect_hostile_errors(list(
    set_data_short = hcase({ buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_tensor_set_data(a, 1:3, offset = 11) }, NULL),
    set_data_offset_na = hcase({ buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_tensor_set_data(a, 1, offset = NA) }, NULL),
    set_data_chr = hcase({ buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_tensor_set_data(a, letters) }, NULL),
    get_data_many = hcase({ buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_tensor_get_data(a, n_elements = 1e12) }, NULL),
    get_data_offset = hcase({ buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_tensor_get_data(a, offset = -1) }, NULL),
    no_memory = hcase(ggml_backend_tensor_get_data(a), "no_alloc|memory|no data"),
    freed_buffer_read = hcase({ buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_buffer_free(buf); ggml_backend_tensor_get_data(a) }, "freed"),
    freed_backend = hcase({ be <- ggml_backend_cpu_init(); ggml_backend_free(be); ggml_backend_alloc_ctx_tensors(ctx, be) }, "freed"),
    threads_na = hcase(ggml_backend_cpu_set_n_threads(cpu, NA), NULL),
    threads_zero = hcase(ggml_backend_cpu_set_n_threads(cpu, 0), NULL),
    threads_huge = hcase(ggml_backend_cpu_set_n_threads(cpu, 1e6), NULL),
    compute_not_graph = hcase(ggml_backend_graph_compute(cpu, list()), NULL),
    compute_freed_ctx = hcase({ g <- ggml_build_forward_expand(ctx, ggml_relu(ctx, a)); ggml_free(ctx); ggml_backend_graph_compute(cpu, g) }, NULL),
    get_rows_big_index = hcase({
      r <- ggml_get_rows(ctx, a, idx)
      buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
      ggml_backend_tensor_set_data(a, 1:12)
      ggml_backend_tensor_set_data(idx, c(0L, 2147483647L))
      ggml_backend_graph_compute(cpu, ggml_build_forward_expand(ctx, r))
    }, "row index 2147483647 is out of range"),
    # 16777217 has no f32 form: the index is named exactly, not as 16777216.
    get_rows_index_past_f32 = hcase({
      r <- ggml_get_rows(ctx, a, idx)
      buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
      ggml_backend_tensor_set_data(a, 1:12)
      ggml_backend_tensor_set_data(idx, c(16777217L, 0L))
      ggml_backend_graph_compute(cpu, ggml_build_forward_expand(ctx, r))
    }, "row index 16777217 is out of range"),
    get_rows_negative = hcase({
      r <- ggml_get_rows(ctx, a, idx)
      buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
      ggml_backend_tensor_set_data(a, 1:12)
      ggml_backend_tensor_set_data(idx, c(-1L, 0L))
      ggml_backend_graph_compute(cpu, ggml_build_forward_expand(ctx, r))
    }, "out of range")
  ), setup = ggml_setup)
})

test_that("a freed buffer's tensors can be given memory again, as the error says", {
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  cpu <- ggml_backend_cpu_init()
  buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  ggml_backend_tensor_set_data(a, 1:4)
  ggml_backend_buffer_free(buf)
  expect_error(ggml_backend_tensor_get_data(a), "freed", class = "ggmlR_error")
  buf2 <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
  expect_false(is.null(buf2))
  ggml_backend_tensor_set_data(a, 5:8)
  expect_equal(ggml_backend_tensor_get_data(a), 5:8)
  ggml_free(ctx)
})

test_that("freeing a graph of 200000 chained ops does not overflow the stack", {
  res <- hostile_run(list(deep = quote({
    ctx <- ggml_init(200010 * ggml_tensor_overhead(), no_alloc = TRUE)
    y <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1)
    for (i in 1:200000) y <- ggml_neg(ctx, y)
    ggml_free(ctx)
    rm(y)
    invisible(gc())
    # the session goes on: a new graph works
    ctx <- ggml_init(2^20)
    x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
    ggml_backend_tensor_set_data(x, c(-1, 2))
    z <- ggml_relu(ctx, x)
    ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, z))
    ggml_backend_tensor_get_data(z)
  })), timeout = 300)
  expect_identical(res$outcome, "value", info = res$message)
  expect_identical(res$message, "0 2")
})

test_that("expert ids out of range are errors on the CPU and on Vulkan, not zeros", {
  bad_ids <- function(backend_init, ids) bquote({
    be <- .(backend_init)
    ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
    w <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 2, 3)   # 3 experts of [4, 2]
    x <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 2, 2)
    id <- ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 2)
    y <- ggml_mul_mat_id(ctx, w, x, id)
    buf <- ggml_backend_alloc_ctx_tensors(ctx, be)
    ggml_backend_tensor_set_data(w, rep(1, 24))
    ggml_backend_tensor_set_data(x, rep(1, 16))
    ggml_backend_tensor_set_data(id, .(ids))
    ggml_backend_graph_compute(be, ggml_build_forward_expand(ctx, y))
    ggml_backend_tensor_get_data(y)
  })
  cases <- list(
    cpu_past = bad_ids(quote(ggml_backend_cpu_init()), c(0L, 1L, 3L, 2L)),
    cpu_negative = bad_ids(quote(ggml_backend_cpu_init()), c(0L, -1L, 1L, 2L)),
    cpu_good = bad_ids(quote(ggml_backend_cpu_init()), c(0L, 1L, 2L, 2L))
  )
  if (ggml_vulkan_available()) {
    cases$vulkan_past <- bad_ids(quote(ggml_vulkan_init(0L)), c(0L, 1L, 2147483647L, 2L))
    cases$vulkan_negative <- bad_ids(quote(ggml_vulkan_init(0L)), c(-2147483647L, 1L, 1L, 2L))
    cases$vulkan_good <- bad_ids(quote(ggml_vulkan_init(0L)), c(0L, 1L, 2L, 2L))
  }
  res <- hostile_run(cases)
  good <- grepl("_good$", res$name)
  expect_hostile(res[!good, ], pattern = "mul_mat_id: expert id -?[0-9]+ is out of range: there are 3 experts")
  expect_identical(res$outcome[good], rep("value", sum(good)))
  # every product of ones over K = 4
  expect_identical(res$message[good], rep("4 4 4 4 4 4 4 4", sum(good)))
})

test_that("offsets, strides and axes whose arithmetic overflows are errors", {
  expect_hostile_errors(list(
    view_4d_offset_far = hcase(ggml_view_4d(ctx, a, 4, 3, 1, 1, 16, 48, 48, 2^40), "spans bytes .* but the viewed data has 48 bytes"),
    view_2d_stride_huge = hcase(ggml_view_2d(ctx, a, 4, 3, 2^62, 0), "too large to address"),
    view_3d_stride_wrap = hcase(ggml_view_3d(ctx, a, 4, 1, 2, 16, 2^63, 0), NULL),
    view_4d_sizes_wrap = hcase(ggml_view_4d(ctx, a, 2^31, 2^31, 2^31, 2^31, 16, 48, 48, 0), NULL),
    view_offset_wrap = hcase(ggml_view_1d(ctx, a, 2, offset = 2^64 - 8), NULL),
    reshape_wrap = hcase(ggml_reshape_4d(ctx, a, 2^16, 2^16, 2^16, 2^16), NULL),
    permute_past = hcase(ggml_permute(ctx, a, 0, 1, 2, 7), "0, 1, 2 and 3 in some order"),
    permute_negative = hcase(ggml_permute(ctx, a, 0, 1, 2, -1), NULL),
    concat_negative = hcase(ggml_concat(ctx, a, b, -1), "must be 0, 1, 2, 3 or 4, not -1"),
    set_1d_far = hcase(ggml_set_1d(ctx, a, b, 2^40), "past the end of a"),
    set_2d_far = hcase(ggml_set_2d(ctx, a, b, 16, 2^62), NULL),
    get_rows_2d_index = hcase(ggml_get_rows(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)), NULL),
    top_k_negative = hcase(ggml_top_k(ctx, a, -1), "between 1 and")
  ), setup = ggml_setup)
})
