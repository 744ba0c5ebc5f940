# Bad arguments to the quantization and attention functions: a ggmlR_error
# whose call is the user's function (not an internal helper) and whose
# message names the argument; no R warning on the way.

expect_user_error <- function(expr, fn, pattern) {
  e <- NULL
  expect_no_warning(e <- tryCatch(expr, ggmlR_error = function(e) e))
  expect_s3_class(e, "ggmlR_error")
  expect_identical(deparse(conditionCall(e)[[1]]), fn)
  expect_match(conditionMessage(e), pattern)
}

test_that("quantizers and dequantizers name themselves and the bad argument", {
  expect_user_error(quantize_q4_0("a"), "quantize_q4_0", "`src_data` must be a numeric vector")
  expect_user_error(quantize_row_q8_0_ref(list(1, 2)), "quantize_row_q8_0_ref", "`src_data` must be a numeric vector")
  expect_user_error(dequantize_row_q4_0(as.raw(1:17)), "dequantize_row_q4_0", "17 bytes, not a whole number of q4_0 blocks \\(18 bytes")
  expect_user_error(ggml_quantize_chunk(GGML_TYPE_Q4_0, "x", 1, 32), "ggml_quantize_chunk", "`src` must be a numeric vector")
  expect_user_error(ggml_quantize_chunk(GGML_TYPE_F16, rnorm(32), 2, 32), "ggml_quantize_chunk", "32 values were given for 2 rows of 32")
  expect_user_error(ggml_quantize_chunk("q4_0", rnorm(32), 1, 32), "ggml_quantize_chunk", "`type` must be one type code")
  expect_user_error(ggml_quantize_init("a"), "ggml_quantize_init", "`type` must be one type code")
  expect_user_error(ggml_quantize_requires_imatrix(NA), "ggml_quantize_requires_imatrix", "`type` must be one type code")
  expect_user_error(ggml_blck_size(NA), "ggml_blck_size", "`type` must be one type code")
  expect_user_error(ggml_is_quantized(c(2, 8)), "ggml_is_quantized", "`type` must be one type code")
  expect_user_error(ggml_type_sizef(1000), "ggml_type_sizef", "unsupported tensor type code 1000")
  expect_user_error(ggml_quant_block_info(2.5), "ggml_quant_block_info", "`type` must be one type code")
  expect_user_error(iq3xs_init_impl(7), "iq3xs_init_impl", "`grid_size` must be 256 \\(IQ3_XXS\\) or 512")
  expect_user_error(iq3xs_free_impl("a"), "iq3xs_free_impl", "`grid_size` must be 256")
  # the good calls still work
  expect_identical(ggml_blck_size(GGML_TYPE_Q4_K), 256L)
  expect_equal(ggml_type_sizef(GGML_TYPE_Q4_0), 18 / 32)
  expect_length(ggml_quantize_chunk(GGML_TYPE_F16, rnorm(64), 2, 32), 128L)
  expect_length(dequantize_row_q4_0(as.raw(rep(0, 36))), 64L)
})

test_that("flash attention names the bad argument and the user's call", {
  ctx <- ggml_init(4 * 1024 * 1024)
  on.exit(ggml_free(ctx))
  q <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 3, 2)
  k <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 5, 2)
  d <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 2, 3)
  expect_user_error(ggml_flash_attn_ext(ctx, q, k, k), "ggml_flash_attn_ext", "`scale` is missing")
  expect_user_error(ggml_flash_attn_ext(ctx, q, k, k, NULL, c(1, 2)), "ggml_flash_attn_ext", "`scale` must be one finite number")
  expect_user_error(ggml_flash_attn_ext(ctx, q, k, k, NULL, 0.5, max_bias = NA), "ggml_flash_attn_ext", "`max_bias` must be one finite number")
  expect_user_error(ggml_flash_attn_ext(ctx, q, k, k, 5, 0.5), "ggml_flash_attn_ext", "`mask` must be a ggml_tensor, not 5")
  expect_user_error(ggml_flash_attn_ext(ctx, q, "k", k, NULL, 0.5), "ggml_flash_attn_ext", "`k` must be a ggml_tensor")
  expect_user_error(ggml_flash_attn_back(ctx, q, k, k, "d"), "ggml_flash_attn_back", "`d` must be a ggml_tensor")
  expect_user_error(ggml_flash_attn_back(ctx, q, k, k, d, masked = NA), "ggml_flash_attn_back", "`masked` must be TRUE or FALSE")
  expect_user_error(ggml_flash_attn_ext(ctx, q, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 5, 5, 2), k, NULL, 0.5),
    "ggml_flash_attn_ext", "need the same head size")
  # quantized keys and values are read by the forward pass only; q stays floating-point
  kq <- ggml_new_tensor_3d(ctx, GGML_TYPE_Q4_K, 256, 5, 2)
  q256 <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, 3, 2)
  expect_user_error(ggml_flash_attn_back(ctx, q256, kq, kq, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, 2, 3)),
    "ggml_flash_attn_back", "k must be a floating-point tensor")
  expect_user_error(ggml_flash_attn_ext(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 256, 3, 2), kq, kq, NULL, 1),
    "ggml_flash_attn_ext", "q must be a floating-point tensor")
  expect_s3_class(ggml_flash_attn_ext(ctx, q256, kq, kq, NULL, 1 / 16), "ggml_tensor")
  # the good calls still build their nodes
  expect_s3_class(ggml_flash_attn_ext(ctx, q, k, k, NULL, 0.5), "ggml_tensor")
  expect_s3_class(ggml_flash_attn_back(ctx, q, k, k, d, masked = FALSE), "ggml_tensor")
})
