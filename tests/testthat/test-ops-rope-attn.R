# RoPE against rotation matrices, fused attention against attention written
# out with its score matrix, GLUs against their formulas; the backward ops
# against finite differences of the forward ops.

# x [ne0, heads, tokens] with pairs rotated by R(theta) = [c -s; s c].
rope_ref <- function(x, pos, n_dims, neox = FALSE, ff = NULL, back = FALSE, theta_of = NULL) {
  d <- dim(x)
  out <- x
  for (tk in seq_len(d[3])) for (h in seq_len(d[2])) for (k in 0:(n_dims / 2 - 1)) {
    th <- if (is.null(theta_of)) pos[tk] * 10000^(-2 * k / n_dims) else theta_of(tk, k)
    if (!is.null(ff)) th <- th / ff[k + 1]
    r <- matrix(c(cos(th), sin(th), -sin(th), cos(th)), 2)
    if (back) r <- t(r)
    i <- if (neox) c(k + 1, k + 1 + n_dims / 2) else c(2 * k + 1, 2 * k + 2)
    out[i, h, tk] <- r %*% x[i, h, tk]
  }
  out
}

test_each_backend("rope rotates pairs by the angles of the positions", {
  set.seed(60)
  x <- rarray(8, 2, 3)
  pos <- c(0L, 3L, 7L)
  ff <- c(1, 2, 0.5, 4)
  i32 <- list(pos = GGML_TYPE_I32)
  got <- run_graph(make_backend, list(x = x, pos = pos), function(ctx, t) list(
    ggml_rope(ctx, t$x, t$pos, 6, GGML_ROPE_TYPE_NORM),
    ggml_rope(ctx, t$x, t$pos, 8, GGML_ROPE_TYPE_NEOX)), types = i32)
  expect_close(got[[1]], rope_ref(x, pos, 6), 1e-5)
  expect_close(got[[2]], rope_ref(x, pos, 8, neox = TRUE), 1e-5)
  got <- run_graph(make_backend, list(x = x, pos = pos, ff = ff), function(ctx, t)
    ggml_rope_ext(ctx, t$x, t$pos, t$ff, n_dims = 8, mode = 0L), types = i32)
  expect_close(got, rope_ref(x, pos, 8, ff = ff), 1e-5)
  # YaRN interpolation (ext_factor 0): angles times freq_scale
  got <- run_graph(make_backend, list(x = x, pos = pos), function(ctx, t)
    ggml_rope_ext(ctx, t$x, t$pos, NULL, 8, 0L, freq_scale = 0.25), types = i32)
  expect_close(got, rope_ref(x, pos / 4, 8), 1e-5)
  # the backward pass is the transposed rotation
  got <- run_graph(make_backend, list(x = x, pos = pos), function(ctx, t)
    ggml_rope_ext_back(ctx, t$x, t$pos, NULL, 8, 2L), types = i32)
  expect_close(got, rope_ref(x, pos, 8, neox = TRUE, back = TRUE), 1e-5)
})

test_each_backend("rope_multi takes each pair's position from its section", {
  set.seed(61)
  x <- rarray(12, 2, 3)
  # four positions per token: time, height, width, extra
  pos <- c(0L, 1L, 2L, 5L, 6L, 7L, 9L, 3L, 1L, 0L, 0L, 0L)
  sec <- c(2L, 2L, 1L, 1L)
  comp <- c(rep(1, 2), rep(2, 2), 3, 4)
  theta <- function(tk, k) pos[(comp[(k %% 6) + 1] - 1) * 3 + tk] * 10000^(-2 * k / 12)
  got <- run_graph(make_backend, list(x = x, pos = pos), function(ctx, t)
    ggml_rope_multi(ctx, t$x, t$pos, NULL, n_dims = 12, sections = sec, mode = GGML_ROPE_TYPE_MROPE),
    types = list(pos = GGML_TYPE_I32))
  expect_close(got, rope_ref(x, pos, 12, neox = TRUE, theta_of = theta), 1e-5)
})

test_each_backend("rope_inplace writes into its input; rope_ext_back is the gradient", {
  set.seed(62)
  x <- rarray(6, 2, 2)
  pos <- c(4L, 9L)
  got <- run_graph(make_backend, list(x = x, pos = pos), function(ctx, t) {
    r <- ggml_rope_inplace(ctx, t$x, t$pos, 6, GGML_ROPE_TYPE_NEOX)
    list(r, t$x)
  }, types = list(pos = GGML_TYPE_I32))
  expect_close(got[[1]], rope_ref(x, pos, 6, neox = TRUE), 1e-5)
  expect_close(got[[2]], got[[1]], 0)
  dy <- rarray(6, 2, 2)
  fwd <- function(ctx, t) ggml_rope_ext(ctx, t$x, t$pos, NULL, 6, 0L, 64L, 10000, 0.5, 1, 1, 32, 1)
  want <- fd_vjp(list(x = x, pos = pos), "x", fwd, dy, types = list(pos = GGML_TYPE_I32))
  got <- run_graph(make_backend, list(dy = dy, pos = pos), function(ctx, t)
    ggml_rope_ext_back(ctx, t$dy, t$pos, NULL, 6, 0L, 64L, 10000, 0.5, 1, 1, 32, 1),
    types = list(pos = GGML_TYPE_I32))
  expect_close(got, want, 1e-4)
})

test_each_backend("rope_multi_back is the gradient of rope_multi (M-RoPE and vision)", {
  set.seed(63)
  x <- rarray(8, 2, 3)
  pos <- c(0L, 2L, 5L, 1L, 1L, 4L, 3L, 0L, 2L, 0L, 0L, 0L)  # time, height, width, extra
  dy <- rarray(8, 2, 3)
  for (cfg in list(list(n = 8, s = c(2L, 1L, 1L, 0L), mode = GGML_ROPE_TYPE_MROPE),
                   list(n = 4, s = c(1L, 1L, 0L, 0L), mode = GGML_ROPE_TYPE_VISION))) {
    fwd <- function(ctx, t) ggml_rope_multi(ctx, t$x, t$pos, NULL, cfg$n, cfg$s, cfg$mode, 0L, 100)
    want <- fd_vjp(list(x = x, pos = pos), "x", fwd, dy, types = list(pos = GGML_TYPE_I32))
    got <- run_graph(make_backend, list(dy = dy, pos = pos), function(ctx, t)
      ggml_rope_multi_back(ctx, t$dy, t$pos, NULL, cfg$n, cfg$s, cfg$mode, 0L, 100),
      types = list(pos = GGML_TYPE_I32))
    expect_close(got, want, 1e-4)
    # the forward op is a rotation: lengths of the rotated pairs are kept
    y <- run_graph(make_backend, list(x = x, pos = pos), fwd, types = list(pos = GGML_TYPE_I32))
    expect_equal(sum(y^2), sum(x^2), tolerance = 1e-5)
  }
})

# q [D, N, H], k [D, M, Hk], v [Dv, M, Hk] -> [Dv, H, N], scores written out.
attn_ref <- function(q, k, v, scale, mask = NULL, softcap = 0) {
  dq <- dim(q); dk <- dim(k)
  out <- array(0, c(dim(v)[1], dq[3], dq[2]))
  for (h in seq_len(dq[3])) {
    hk <- (h - 1) %/% (dq[3] / dk[3]) + 1
    s <- t(k[, , hk]) %*% q[, , h] * scale # [M, N]
    if (softcap > 0) s <- softcap * tanh(s / softcap)
    if (!is.null(mask)) s <- s + mask
    p <- exp(sweep(s, 2, apply(s, 2, max)))
    p <- sweep(p, 2, colSums(p), "/")
    out[, h, ] <- v[, , hk] %*% p
  }
  out
}

test_each_backend("flash_attn_ext is softmax(scale q.k + mask) v, with GQA and a soft cap", {
  set.seed(63)
  q <- rarray(8, 3, 4)
  k <- rarray(8, 5, 2)
  v <- rarray(6, 5, 2)
  mask <- matrix(0, 5, 3)
  mask[5, 1] <- -Inf
  mask[2, 3] <- -Inf
  got <- run_graph(make_backend, list(q = q, k = k, v = v, m = mask), function(ctx, t) list(
    ggml_flash_attn_ext(ctx, t$q, t$k, t$v, NULL, 0.3),
    ggml_flash_attn_ext(ctx, t$q, t$k, t$v, t$m, 0.3, logit_softcap = 2)))
  expect_identical(dim(got[[1]]), c(6L, 4L, 3L))
  expect_close(got[[1]], attn_ref(q, k, v, 0.3), 1e-5)
  expect_close(got[[2]], attn_ref(q, k, v, 0.3, mask, softcap = 2), 1e-5)
  expect_error(run_graph(make_backend, list(q = q, k = rarray(7, 5, 2), v = v), function(ctx, t)
    ggml_flash_attn_ext(ctx, t$q, t$k, t$v, NULL, 1)), "head size", class = "ggmlR_error")
})

test_each_backend("flash_attn_back gives the gradients of q, k and v", {
  set.seed(64)
  q <- rarray(4, 3, 2)
  k <- rarray(4, 3, 2)
  v <- rarray(4, 3, 2)
  d <- rarray(4, 2, 3)
  causal <- matrix(0, 3, 3)
  causal[lower.tri(causal)] <- -Inf # key m > query n
  for (masked in c(FALSE, TRUE)) {
    got <- run_graph(make_backend, list(q = q, k = k, v = v, d = d), function(ctx, t)
      ggml_flash_attn_back(ctx, t$q, t$k, t$v, t$d, masked = masked))
    mk <- if (masked) causal else matrix(0, 3, 3)
    fwd <- function(ctx, t) ggml_flash_attn_ext(ctx, t$q, t$k, t$v, t$m, 1 / 2)
    inputs <- list(q = q, k = k, v = v, m = mk)
    # 24 values each, packed at offsets 0, 24 and 48
    expect_close(got[1:24], fd_vjp(inputs, "q", fwd, d), 1e-4)
    expect_close(got[25:48], fd_vjp(inputs, "k", fwd, d), 1e-4)
    expect_close(got[49:72], fd_vjp(inputs, "v", fwd, d), 1e-4)
  }
})

test_each_backend("GLUs are act(x) * g over row halves or two tensors", {
  set.seed(65)
  a <- rarray(6, 3)
  x <- a[1:3, ]
  g <- a[4:6, ]
  gelu <- function(z) 0.5 * z * (1 + tanh(sqrt(2 / pi) * (z + 0.044715 * z^3)))
  silu <- function(z) z / (1 + exp(-z))
  got <- run_graph(make_backend, list(a = a, x = x, g = g), function(ctx, t) list(
    ggml_reglu(ctx, t$a), ggml_geglu(ctx, t$a), ggml_swiglu(ctx, t$a),
    ggml_geglu_erf(ctx, t$a), ggml_geglu_quick(ctx, t$a),
    ggml_glu(ctx, t$a, GGML_GLU_OP_SWIGLU, swapped = TRUE),
    ggml_glu_split(ctx, t$x, t$g, GGML_GLU_OP_REGLU),
    ggml_swiglu_oai(ctx, t$x, t$g, alpha = 1.5, limit = 0.5)))
  expect_close(got[[1]], pmax(x, 0) * g)
  expect_close(got[[2]], gelu(x) * g, 1e-5)
  expect_close(got[[3]], silu(x) * g, 1e-5)
  expect_close(got[[4]], x * pnorm(x) * g, 1e-5)
  expect_close(got[[5]], x / (1 + exp(-1.702 * x)) * g, 1e-5)
  expect_close(got[[6]], silu(g) * x, 1e-5)
  expect_close(got[[7]], pmax(x, 0) * g)
  xc <- pmin(x, 0.5)
  expect_close(got[[8]], xc / (1 + exp(-1.5 * xc)) * (pmin(pmax(g, -0.5), 0.5) + 1), 1e-5)
  expect_error(run_graph(make_backend, list(a = rarray(5, 2)), function(ctx, t) ggml_swiglu(ctx, t$a)),
    "even length", class = "ggmlR_error")
})
