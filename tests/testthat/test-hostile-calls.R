# Errors name the function the user called: each condition's call is the
# exported function (not an internal helper such as .set() or
# rs_tensor_get(), and not base R's switch()), its class is ggmlR_error, and
# its message is the package's own (no base-R text such as "EXPR must be a
# length 1 vector"). Cases run in a child process (helper-hostile.R).

calls_setup <- quote({
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  ggml_set_f32(a, 1:12)
  x <- ag_tensor(matrix(1:6, 2, 3))
})

# `code` made to fail with its message led by the name of the function its
# condition's call names ("<none>" without a call), class kept.
named <- function(code) {
  bquote({
    e <- tryCatch(.(code), error = function(e) e)
    if (inherits(e, "error")) {
      f <- conditionCall(e)
      f <- if (is.call(f)) paste(deparse(f[[1L]]), collapse = "") else "<none>"
      stop(structure(class = class(e), list(message = paste0(f, ": ", conditionMessage(e)), call = NULL)))
    }
    e
  })
}
ncase <- function(code, pattern) list(code = named(substitute(code)), pattern = pattern)

test_that("errors raised inside a helper's argument name the user's function", {
  cases <- list(
    get_data_offset_na = ncase(ggml_backend_tensor_get_data(a, offset = NA), "^ggml_backend_tensor_get_data: `offset`"),
    get_data_offset_odd = ncase(ggml_backend_tensor_get_data(a, offset = 3), "^ggml_backend_tensor_get_data: `offset`"),
    set_data_offset_na = ncase(ggml_backend_tensor_set_data(a, 1, offset = NA), "^ggml_backend_tensor_set_data: `offset`"),
    set_data_offset_chr = ncase(ggml_backend_tensor_set_data(a, 1, offset = "4"), "^ggml_backend_tensor_set_data: `offset`"),
    get_first_not_tensor = ncase(ggml_backend_tensor_get_f32_first(NA), "^ggml_backend_tensor_get_(f32_first|data): `tensor`"),
    set_1d_not_tensor = ncase(ggml_set_1d(ctx, NA, a), "^ggml_set_1d: `tensor`"),
    set_1d_inplace_not_tensor = ncase(ggml_set_1d_inplace(ctx, list(), a), "^ggml_set_1d_inplace: `tensor`"),
    set_2d_not_tensor = ncase(ggml_set_2d(ctx, NA, a, 16, 0), "^ggml_set_2d: `tensor`"),
    set_2d_inplace_not_tensor = ncase(ggml_set_2d_inplace(ctx, "a", a, 16, 0), "^ggml_set_2d_inplace: `tensor`"),
    ag_clamp_lo_na = ncase(ag_clamp(x, lo = NA), "^ag_clamp: `lo`"),
    ag_clamp_hi_chr = ncase(ag_clamp(x, lo = 0, hi = "1"), "^ag_clamp: `hi`"),
    ag_mean_dim_na = ncase(ag_mean(x, dim = NA), "^ag_mean: `dim`"),
    ag_sum_dim_three = ncase(ag_sum(x, dim = 3), "^ag_sum: `dim`"),
    ag_pow_p_vec = ncase(ag_pow(x, c(1, 2)), "^ag_pow: `p`"),
    ag_scale_na = ncase(ag_scale(x, NA), "^ag_scale: `scalar`")
  )
  expect_hostile_errors(cases, setup = calls_setup)
})

test_that("an error under tryCatch() names the function called, not doTryCatch()", {
  cases <- list(
    load_param_num = ncase(ncnn_net(1)$load_param(1), "^ncnn_net\\(1\\)\\$load_param: `path`"),
    load_param_na = ncase(ncnn_net(1)$load_param(NA), "^ncnn_net\\(1\\)\\$load_param: `path`"),
    load_param_folder = ncase(ncnn_net(1)$load_param(tempdir()), "^ncnn_net\\(1\\)\\$load_param: .*is a folder"),
    gguf_folder = ncase(gguf_load(tempdir()), "^gguf_load: .*is a folder; `path` must be the path of a GGUF file"),
    gguf_missing = ncase(gguf_load(tempfile()), "^gguf_load: there is no file")
  )
  expect_hostile_errors(cases, setup = calls_setup)
})

test_that("sizes past R's integers and non-nodes name the model function", {
  cases <- list(
    dataset_ndata_huge = ncase(ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 4, 1, 1e15),
                               "^ggml_opt_dataset_init: `ndata` must be a whole number"),
    dataset_datapoint_huge = ncase(ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 2^31, 1, 10),
                                   "^ggml_opt_dataset_init: `ne_datapoint` must be a whole number"),
    dense_units_huge = ncase(ggml_layer_dense(ggml_input(4), 1e10), "^ggml_layer_dense: `units` must be a whole number"),
    topo_sort_na = ncase(nn_topo_sort(NA), "^nn_topo_sort: `outputs` must be a ggml_tensor_node"),
    topo_sort_list = ncase(nn_topo_sort(list(1)), "^nn_topo_sort: `outputs` must be a ggml_tensor_node")
  )
  expect_hostile_errors(cases, setup = calls_setup)
  # Whole numbers in range are still taken.
  ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 4, 1, 10)
  expect_s3_class(ds, "ggml_opt_dataset")
  expect_length(nn_topo_sort(ggml_layer_dense(ggml_input(4), 2)), 2L)
})

test_that("a scale mode that is not one number is the package's error, not switch()'s", {
  cases <- list(
    upscale_mode_list = ncase(ggml_upscale(ctx, a, 2, mode = list()), "^ggml_upscale: `mode` .*not an object of type list"),
    upscale_mode_na = ncase(ggml_upscale(ctx, a, 2, mode = NA), "^ggml_upscale: `mode` .*not NA"),
    upscale_mode_vec = ncase(ggml_upscale(ctx, a, 2, mode = 0:1), "^ggml_upscale: `mode` .*vector of length 2"),
    upscale_mode_chr = ncase(ggml_upscale(ctx, a, 2, mode = "bilinear"), "^ggml_upscale: `mode`"),
    upscale_mode_three = ncase(ggml_upscale(ctx, a, 2, mode = 3), "^ggml_upscale: `mode` .*not 3")
  )
  expect_hostile_errors(cases, setup = calls_setup)
  # The valid modes still build their op.
  ctx <- ggml_init(1024 * 1024)
  on.exit(ggml_free(ctx))
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3)
  for (m in 0:2) expect_identical(ggml_tensor_shape(ggml_upscale(ctx, a, 2, mode = m))[1:2], c(8, 6))
})

# Every exported function that takes a context or a tensor, called with each
# of its other arguments in turn set to a hostile value (the rest valid):
# whatever fails is a ggmlR_error whose call is the function called (or
# another exported function it called, or a method of one), with no base-R
# text in its message.
test_that("hostile arguments to every function of a context or tensor name that function", {
  ns <- asNamespace("ggmlR")
  ex <- sort(getNamespaceExports("ggmlR"))
  ex <- ex[vapply(ex, function(n) is.function(get(n, ns)), TRUE)]
  tensor_args <- c("a", "b", "c", "x", "tensor", "t", "src", "src0", "src1", "q", "k", "v", "y", "input")
  vals <- list(na = quote(NA), chr = quote("x"), lst = quote(list()), neg = quote(-1), big = quote(1e15))
  cases <- list()
  for (f in ex) {
    fm <- formals(get(f, ns))
    nms <- setdiff(names(fm), "...")
    if (!("ctx" %in% nms || any(nms %in% tensor_args)) || !startsWith(f, "ggml_")) next
    req <- nms[vapply(nms, function(n) identical(fm[[n]], quote(expr = )), TRUE)]
    for (target in setdiff(nms, c("ctx", tensor_args))) for (v in names(vals)) {
      args <- list()
      for (n in union(req, target)) {
        args[[n]] <- if (n == target) vals[[v]] else if (n == "ctx") quote(ctx) else if (n %in% tensor_args) quote(a) else quote(1)
      }
      cases[[paste(f, target, v, sep = "__")]] <- named(as.call(c(as.name(f), args)))
    }
  }
  expect_gt(length(cases), 300)
  res <- hostile_run(cases, setup = calls_setup, timeout = 600)
  expect_identical(nrow(res), length(cases))
  leak <- "missing value where|argument of length 0|argument is of length zero|non-numeric argument|the condition has length|invalid arguments|cannot open the connection|subscript out of bounds|is not TRUE|operator is invalid|no applicable method|EXPR must be"
  for (i in seq_len(nrow(res))) {
    r <- res[i, ]
    label <- sprintf("case '%s' (%s: %s)", r$name, r$outcome, r$message)
    expect_true(r$outcome %in% c("value", "error"), label = label)
    if (r$outcome != "error") next
    expect_true("ggmlR_error" %in% strsplit(r$class, " ")[[1L]], label = paste(label, r$class))
    called <- sub(":.*", "", r$message)
    expect_true(called %in% ex || sub("\\.[^.]+$", "", called) %in% ex, label = label)
    expect_false(grepl(leak, r$message), label = label)
  }
})
