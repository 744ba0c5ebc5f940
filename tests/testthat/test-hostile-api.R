# Hostile arguments to devices, buffers, schedulers, graph allocators, meta
# devices, events, plans and the graph and tensor tools: wrong types, NA and
# out-of-range numbers, freed and foreign objects. Each case must be a
# ggmlR_error (no abort, no panic text). Cases run in a child process
# (helper-hostile.R).

api_setup <- quote({
  ctx <- ggml_init(64 * ggml_tensor_overhead(), no_alloc = TRUE)
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  y <- ggml_relu(ctx, ggml_scale(ctx, a, 2))
  g <- ggml_build_forward_expand(ctx, y)
  cpu <- ggml_backend_cpu_init()
  dev <- ggml_backend_dev_by_type(ggml_backend_device_type_cpu())
  freed_buf <- {
    c2 <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
    t2 <- ggml_new_tensor_1d(c2, GGML_TYPE_F32, 4)
    b <- ggml_backend_alloc_ctx_tensors(c2, cpu)
    ggml_backend_buffer_free(b)
    b
  }
  freed_backend <- { b <- ggml_backend_cpu_init(); ggml_backend_free(b); b }
})

test_that("hostile arguments to the device, buffer and scheduler API are clean errors", {
  cases <- list(
    dev_get_na = quote(ggml_backend_dev_get(NA)),
    dev_get_frac = quote(ggml_backend_dev_get(0.5)),
    dev_get_chr = quote(ggml_backend_dev_get("0")),
    dev_by_name_na = quote(ggml_backend_dev_by_name(NA_character_)),
    dev_by_name_vec = quote(ggml_backend_dev_by_name(c("CPU", "CPU"))),
    dev_by_type_chr = quote(ggml_backend_dev_by_type("cpu")),
    dev_name_list = quote(ggml_backend_dev_name(list())),
    dev_init_backend = quote(ggml_backend_dev_init(cpu)),
    dev_supports_op_num = quote(ggml_backend_dev_supports_op(dev, 1)),
    dev_supports_buft_num = quote(ggml_backend_dev_supports_buft(dev, 1)),
    reg_get_neg_na = quote(ggml_backend_reg_get(NA)),
    reg_dev_get_frac = quote(ggml_backend_reg_dev_get(ggml_backend_reg_by_name("CPU"), 0.5)),
    reg_name_dev = quote(ggml_backend_reg_name(dev)),
    init_by_name_num = quote(ggml_backend_init_by_name(1)),
    load_num = quote(ggml_backend_load(1)),
    get_device_freed = quote(ggml_backend_get_device(freed_backend)),
    buffer_usage_na = quote(ggml_backend_buffer_set_usage(freed_buf, NA)),
    buffer_clear_freed = quote(ggml_backend_buffer_clear(freed_buf, 0)),
    buffer_clear_neg = quote({ b <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_buffer_clear(b, -1) }),
    buffer_clear_chr = quote({ b <- ggml_backend_alloc_ctx_tensors(ctx, cpu); ggml_backend_buffer_clear(b, "0") }),
    multi_mixed = quote(ggml_backend_multi_buffer_alloc_buffer(list(freed_buf, 1))),
    multi_freed = quote(ggml_backend_multi_buffer_alloc_buffer(list(freed_buf))),
    sched_empty = quote(ggml_backend_sched_new(list())),
    sched_freed_backend = quote(ggml_backend_sched_new(list(freed_backend))),
    sched_graph_num = quote(ggml_backend_sched_alloc_graph(ggml_backend_sched_new(list(cpu)), 1)),
    sched_get_backend_na = quote(ggml_backend_sched_get_backend(ggml_backend_sched_new(list(cpu)), NA)),
    sched_pin_foreign = quote(ggml_backend_sched_set_tensor_backend(ggml_backend_sched_new(list(cpu)), y,
                                                                   ggml_backend_cpu_init())),
    sched_pin_not_tensor = quote(ggml_backend_sched_set_tensor_backend(ggml_backend_sched_new(list(cpu)), 1, cpu)),
    gallocr_freed_backend = quote(ggml_gallocr_new(freed_backend)),
    gallocr_graph_chr = quote(ggml_gallocr_alloc_graph(ggml_gallocr_new(), "g")),
    gallocr_buffer_id = quote(ggml_gallocr_get_buffer_size(ggml_gallocr_new(), 2)),
    meta_empty = quote(ggml_backend_meta_device(list(), function(i, n) NULL)),
    meta_not_fn = quote(ggml_backend_meta_device(list(dev), "f")),
    meta_env = quote(ggml_backend_meta_device(list(dev), function(i, n) NULL, env = 1)),
    event_not_device = quote(ggml_backend_event_new(cpu)),
    event_record_freed = quote(ggml_backend_event_record(ggml_backend_event_new(dev), freed_backend)),
    plan_freed_backend = quote(ggml_backend_graph_plan_create(freed_backend, g)),
    plan_not_plan = quote(ggml_backend_graph_plan_compute(cpu, 1)),
    async_get_size_na = quote(ggml_backend_tensor_get_async(cpu, a, 0, NA)),
    async_set_size_neg = quote(ggml_backend_tensor_set_async(cpu, a, 1:12, size = -8)),
    async_set_chr = quote(ggml_backend_tensor_set_async(cpu, a, "x"))
  )
  res <- hostile_run(cases, setup = api_setup)
  expect_identical(nrow(res), length(cases))
  expect_hostile(res)
})

test_that("hostile arguments to graph, tensor and context tools are clean errors", {
  cases <- list(
    node_na = quote(ggml_graph_node(g, NA)),
    node_huge = quote(ggml_graph_node(g, 1e12)),
    node_not_graph = quote(ggml_graph_node(a, 0)),
    get_tensor_na = quote(ggml_graph_get_tensor(g, NA_character_)),
    view_reversed = quote(ggml_graph_view(g, 2, 0)),
    view_huge = quote(ggml_graph_view(g, 0, 1e15)),
    dump_dot_na = quote(ggml_graph_dump_dot(g, NULL, NA_character_)),
    dump_dot_dir = quote(ggml_graph_dump_dot(g, NULL, tempdir())),
    compute_threads_neg = quote(ggml_graph_compute_with_ctx(ctx, g, -1)),
    op_name_na = quote(ggml_op_name(NA)),
    op_name_neg = quote(ggml_op_name(-1)),
    op_symbol_chr = quote(ggml_op_symbol("ADD")),
    unary_name_huge = quote(ggml_unary_op_name(1e9)),
    op_params_long = quote(ggml_set_op_params(a, raw(100))),
    op_params_bad = quote(ggml_set_op_params(a, c(1, 300))),
    op_params_i32_big = quote(ggml_set_op_params_i32(a, 0, 2^40)),
    op_params_index = quote(ggml_get_op_params_f32(a, -1)),
    layout_not_tensor = quote(ggml_is_contiguous_0(ctx)),
    compare_not_tensor = quote(ggml_are_same_shape(a, list())),
    flag_not_tensor = quote(ggml_set_input(1)),
    dup_freed_ctx = quote({ c5 <- ggml_init(1024); ggml_free(c5); ggml_dup_tensor(c5, a) }),
    copy_no_memory = quote(ggml_tensor_copy(a, a)),
    next_tensor_foreign = quote({ c6 <- ggml_init(1024 * 1024); ggml_get_next_tensor(c6, a) }),
    reset_not_ctx = quote(ggml_reset(a)),
    no_alloc_chr = quote(ggml_set_no_alloc(ctx, "yes")),
    estimate_chr = quote(ggml_estimate_memory(GGML_TYPE_F32, "10")),
    estimate_type = quote(ggml_estimate_memory(999, 10)),
    init_auto_neg = quote(ggml_init_auto(10, extra_mb = -1)),
    temp_ctx_bad = quote(ggml_with_temp_ctx(-1, 1)),
    threads_na = quote(ggml_set_n_threads(NA)),
    threads_huge = quote(ggml_set_n_threads(1e9)),
    seed_chr = quote(ggml_set_seed("1")),
    cpu_add_no_data = quote(ggml_cpu_add(a, a))
  )
  res <- hostile_run(cases, setup = api_setup)
  expect_identical(nrow(res), length(cases))
  expect_hostile(res)
})
