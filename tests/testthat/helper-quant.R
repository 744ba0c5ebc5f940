# Shared by the quantization tests.

# Quantized bytes of a K x M weight matrix and its dequantized values.
weights_of <- function(type, W) {
  K <- nrow(W)
  q <- ggml_quantize_chunk(type, W, ncol(W), K, imatrix = rep(1, K))
  deq <- matrix(.dequant(type, q, length(W)), K)
  list(q = q, deq = deq)
}
.dequant <- function(type, q, n) {
  get(paste0("dequantize_row_", ggml_type_name(type)), asNamespace("ggmlR"))(q, n)
}

# Bound on |quantized product - product of the dequantized weights|: half a
# step of each block of 32 (Q8_0/Q8_1) or 256 (Q8_K) activations, times the
# weights' magnitudes; f32 rounding otherwise.
product_bound <- function(type, W, B) {
  K <- nrow(W)
  bs <- if (type %in% c(GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
    GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4)) 32 else if (type %in% c(GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
    GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS)) 256 else 0
  blk <- if (bs) rep(seq_len(K / bs), each = bs) else rep(1L, K)
  step <- apply(B, 2, function(b) if (bs) tapply(abs(b), blk, max)[blk] / 254 * 1.001 else rep(0, K))
  t(abs(W)) %*% step + 1e-5 * (t(abs(W)) %*% abs(B)) + 1e-6
}

