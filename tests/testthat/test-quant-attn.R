# Fused attention with quantized keys and values (a quantized KV cache) on
# the CPU backend, against attention computed in R (f64) from the
# dequantized keys and values (the refusals: test-quant-errors.R).

# softmax(scale q.k) v per query and head, in ggml's layouts: q [D, N, H],
# k [D, M, H], v [Dv, M, H]; the result [Dv, H, N].
attention_in_r <- function(q, k, v, scale) {
  D <- dim(q)[1]; N <- dim(q)[2]; H <- dim(q)[3]; Dv <- dim(v)[1]
  out <- array(0, c(Dv, H, N))
  for (h in seq_len(H)) for (i in seq_len(N)) {
    s <- scale * colSums(q[, i, h] * k[, , h, drop = FALSE][, , 1])
    p <- exp(s - max(s))
    out[, h, i] <- v[, , h] %*% (p / sum(p))
  }
  out
}

run_attention <- function(qv, kq, vq, type, D, N, M, H, scale) {
  backend <- ggml_backend_cpu_init()
  on.exit(ggml_backend_free(backend))
  ggml_backend_cpu_set_n_threads(backend, 2)
  ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  q <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, N, H)
  k <- ggml_new_tensor_3d(ctx, type, D, M, H)
  v <- ggml_new_tensor_3d(ctx, type, D, M, H)
  o <- ggml_flash_attn_ext(ctx, q, k, v, NULL, scale)
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  ggml_backend_tensor_set_data(q, qv)
  ggml_backend_tensor_set_data(k, kq)
  ggml_backend_tensor_set_data(v, vq)
  ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, o))
  expect_equal(ggml_tensor_shape(o)[1:3], c(D, H, N))
  array(ggml_backend_tensor_get_data(o), c(D, H, N))
}

test_that("flash_attn_ext with quantized k and v matches attention over their dequantized values", {
  set.seed(5)
  for (type in c(GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_F16)) {
    D <- 256; N <- 3; M <- 7; H <- 2
    scale <- 1 / sqrt(D)
    qv <- rnorm(D * N * H)
    kv <- rnorm(D * M * H)
    vv <- rnorm(D * M * H)
    # the bytes of quantized types; f16 tensors take the values and round them
    kq <- if (type == GGML_TYPE_F16) kv else ggml_quantize_chunk(type, kv, M * H, D)
    vq <- if (type == GGML_TYPE_F16) vv else ggml_quantize_chunk(type, vv, M * H, D)
    if (type == GGML_TYPE_F16) {
      # f16 keys and values: the oracle rounds them as the engine stores them
      ctx <- ggml_init(4 * 1024 * 1024)
      t <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F16, D * M * H), kv)
      kd <- ggml_get_f32(t)
      vd <- ggml_get_f32(ggml_set_f32(t, vv))
      ggml_free(ctx)
    } else {
      kd <- .dequant(type, kq, D * M * H)
      vd <- .dequant(type, vq, D * M * H)
    }
    got <- run_attention(qv, kq, vq, type, D, N, M, H, scale)
    want <- attention_in_r(array(qv, c(D, N, H)), array(kd, c(D, M, H)), array(vd, c(D, M, H)), scale)
    expect_lt(max(abs(got - want)), 1e-4)
    # the quantization is visible: against the f32 values the error is larger
    if (type == GGML_TYPE_F16) next
    exact <- attention_in_r(array(qv, c(D, N, H)), array(kv, c(D, M, H)), array(vv, c(D, M, H)), scale)
    expect_gt(max(abs(got - exact)), 1e-4)
  }
})
