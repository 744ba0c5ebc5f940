# Every Keras-style layer: its forward pass against base R, and its
# gradients (weights and input) against central differences, on the CPU and
# on Vulkan.

sig <- function(z) 1 / (1 + exp(-z))

# Base R oracles, one sample at a time (x: the sample as an R array).
ref_dense <- function(x, w, act = identity) act(w$weight %*% as.vector(x) + w$bias)
ref_conv2d <- function(x, K, b, kh, kw, sh = 1, sw = 1) {
  H <- dim(x)[1]; W <- dim(x)[2]
  oh <- (H - kh) %/% sh + 1; ow <- (W - kw) %/% sw + 1
  out <- array(0, c(oh, ow, nrow(K)))
  for (i in seq_len(oh)) for (j in seq_len(ow)) {
    r <- (i - 1) * sh + seq_len(kh); q <- (j - 1) * sw + seq_len(kw)
    out[i, j, ] <- K %*% as.vector(aperm(x[r, q, , drop = FALSE], c(3, 2, 1))) + b
  }
  out
}
chan_first <- function(a) as.vector(aperm(a, rev(seq_along(dim(a)))))

test_that("dense: forward with each activation, and gradients", {
  set.seed(1)
  x <- matrix(rnorm(5 * 3), 5, 3)
  acts <- list(relu = function(z) pmax(z, 0), sigmoid = sig, tanh = tanh,
               silu = function(z) z * sig(z),
               gelu = function(z) 0.5 * z * (1 + tanh(sqrt(2 / pi) * (z + 0.044715 * z^3))),
               hardsigmoid = function(z) pmin(pmax(z / 6 + 0.5, 0), 1),
               hardswish = function(z) z * pmin(pmax(z / 6 + 0.5, 0), 1),
               leaky_relu = function(z) ifelse(z > 0, z, 0.01 * z),
               elu = function(z) ifelse(z > 0, z, exp(z) - 1))
  for (be in keras_backends()) {
    for (a in names(acts)) {
      m <- one_layer(3, function(i) ggml_layer_dense(i, 4, activation = a), be)
      w <- lapply(last_weights(m), function(p) p$data)
      ref <- t(apply(x, 1, function(r) ref_dense(r, w, acts[[a]])))
      expect_close_to(keras_forward(m, x), ref, be, paste("dense", a))
    }
    m <- one_layer(3, function(i) ggml_layer_dense(i, 4, activation = "tanh"), be)
    expect_keras_grads(m, x, be, what = "dense")
    m <- one_layer(3, function(i) ggml_layer_dense(i, 4, activation = "softmax"), be)
    p <- keras_forward(m, x)
    expect_close_to(rowSums(p), matrix(1, 5, 1)[, 1], be, "softmax rows")
    expect_keras_grads(m, x, be, what = "dense softmax")
  }
})

test_that("batch norm: batch statistics in training, running statistics in evaluation", {
  set.seed(2)
  x <- matrix(rnorm(6 * 3, 2, 3), 6, 3)
  for (be in keras_backends()) {
    m <- one_layer(3, function(i) ggml_layer_batch_norm(i, momentum = 0.5), be)
    w <- last_weights(m)
    .ag_data_set(w$gamma, matrix(c(1, 2, 0.5), 3))
    .ag_data_set(w$beta, matrix(c(0, -1, 1), 3))
    if (be == "vulkan") .nn_make_resident(m$compilation$runtime)
    mu <- colMeans(x)
    v <- colMeans(sweep(x, 2, mu)^2)
    ref <- sweep(sweep(sweep(x, 2, mu), 2, sqrt(v + 1e-5), "/"), 2, c(1, 2, 0.5), "*")
    ref <- sweep(ref, 2, c(0, -1, 1), "+")
    expect_close_to(keras_forward(m, x, training = TRUE), ref, be, "batch norm (training)")
    rt <- m$compilation$runtime
    key <- rt$plan$steps[[2]]$key
    # momentum 0.5 from (0, 1); the running variance is unbiased
    expect_close_to(rt$bn[[key]]$mean, matrix(0.5 * mu, 3), be, "running mean")
    expect_close_to(rt$bn[[key]]$var, matrix(0.5 + 0.5 * v * 6 / 5, 3), be, "running variance")
    rm <- rt$bn[[key]]$mean[, 1]
    rv <- rt$bn[[key]]$var[, 1]
    ref_eval <- sweep(sweep(sweep(x, 2, rm), 2, sqrt(rv + 1e-5), "/"), 2, c(1, 2, 0.5), "*")
    expect_close_to(keras_forward(m, x), sweep(ref_eval, 2, c(0, -1, 1), "+"), be, "batch norm (evaluation)")
    expect_keras_grads(m, x, be, training = TRUE, what = "batch norm")
    # per channel over positions and samples for an image
    xi <- array(rnorm(3 * 2 * 2 * 2), c(3, 2, 2, 2))
    mi <- one_layer(c(2, 2, 2), function(i) ggml_layer_batch_norm(i), be)
    out <- keras_forward(mi, xi, training = TRUE)
    ch <- matrix(out, ncol = 1)
    per <- array(out, c(3, 2, 2, 2))  # [sample, c, w, h]
    for (c in 1:2) {
      vals <- as.vector(per[, c, , ])
      expect_lt(abs(mean(vals)), 1e-4)
      expect_lt(abs(mean(vals^2) - 1), 1e-2)
    }
    expect_keras_grads(mi, xi, be, training = TRUE, what = "batch norm (image)")
  }
})

test_that("dropout: identity in evaluation, inverted dropout in training", {
  set.seed(3)
  x <- matrix(1, 200, 5)
  for (be in keras_backends()) {
    m <- one_layer(5, function(i) ggml_layer_dropout(i, 0.4), be)
    expect_close_to(keras_forward(m, x), x, be, "dropout (evaluation)")
    tr <- keras_forward(m, x, training = TRUE)
    expect_true(all(abs(tr) < 1e-6 | abs(tr - 1 / 0.6) < 1e-5))
    expect_lt(abs(mean(tr == 0) - 0.4), 0.06)
    md <- one_layer(5, function(i) ggml_layer_dense(ggml_layer_dropout(i, 0.5), 3), be)
    expect_keras_grads(md, x[1:4, ] * 0.5, be, training = TRUE, what = "dropout")
  }
})

test_that("embedding: columns of the table; gradients reach the rows looked up", {
  set.seed(4)
  idx <- matrix(c(0L, 3L, 3L, 1L, 2L, 0L), 3, 2)
  for (be in keras_backends()) {
    m <- one_layer(2, function(i) ggml_layer_embedding(i, vocab_size = 5, dim = 3), be, dtype = "int32")
    W <- last_weights(m)$weight$data
    ref <- t(apply(idx, 1, function(r) as.vector(W[, r + 1])))
    expect_close_to(keras_forward(m, idx), ref, be, "embedding")
    expect_keras_grads(m, idx, be, input_grad = FALSE, what = "embedding")
  }
})

test_that("LSTM and GRU: forward against the recurrences in base R, and gradients", {
  set.seed(5)
  n <- 3; L <- 4; Fi <- 2; u <- 3
  x <- array(rnorm(n * L * Fi), c(n, L, Fi))
  lstm_ref <- function(xs, w, seqs) {
    h <- rep(0, u); c <- rep(0, u); hs <- NULL
    for (t in seq_len(L)) {
      z <- w$W_gates %*% xs[t, ] + w$U_gates %*% h + w$b_gates
      i <- sig(z[1:u]); f <- sig(z[u + 1:u]); g <- tanh(z[2 * u + 1:u]); o <- sig(z[3 * u + 1:u])
      c <- f * c + i * g
      h <- o * tanh(c)
      hs <- c(hs, h)
    }
    if (seqs) hs else h
  }
  gru_ref <- function(xs, w, seqs) {
    h <- rep(0, u); hs <- NULL
    for (t in seq_len(L)) {
      zx <- w$W_gates %*% xs[t, ] + w$b_gates
      zh <- w$U_gates %*% h + w$b_recurrent
      z <- sig(zx[1:u] + zh[1:u]); r <- sig(zx[u + 1:u] + zh[u + 1:u])
      hh <- tanh(zx[2 * u + 1:u] + r * zh[2 * u + 1:u])
      h <- z * h + (1 - z) * hh
      hs <- c(hs, h)
    }
    if (seqs) hs else h
  }
  for (be in keras_backends()) {
    for (kind in c("lstm", "gru")) {
      for (seqs in c(FALSE, TRUE)) {
        f <- if (kind == "lstm") ggml_layer_lstm else ggml_layer_gru
        m <- one_layer(c(L, Fi), function(i) f(i, u, return_sequences = seqs), be)
        w <- lapply(last_weights(m), function(p) p$data)
        if (kind == "gru") {
          .ag_data_set(last_weights(m)$b_recurrent, matrix(rnorm(3 * u, 0, 0.3), 3 * u))
          if (be == "vulkan") .nn_make_resident(m$compilation$runtime)
          w$b_recurrent <- last_weights(m)$b_recurrent$data
        }
        rf <- if (kind == "lstm") lstm_ref else gru_ref
        ref <- t(sapply(seq_len(n), function(s) rf(x[s, , ], w, seqs)))
        if (!seqs && u > 1) ref <- matrix(ref, n)
        expect_close_to(keras_forward(m, x), ref, be, paste(kind, seqs))
      }
      m <- one_layer(c(L, Fi), function(i) f(i, 2, return_sequences = TRUE), be)
      expect_keras_grads(m, x[1:2, , , drop = FALSE], be, what = kind)
    }
  }
})

test_that("conv_2d, conv_1d and max pooling: forward against base R, and gradients", {
  set.seed(6)
  x <- array(rnorm(2 * 5 * 6 * 2), c(2, 5, 6, 2))
  for (be in keras_backends()) {
    m <- one_layer(c(5, 6, 2), function(i) ggml_layer_conv_2d(i, 3, c(3, 2), strides = c(1, 2)), be)
    w <- lapply(last_weights(m), function(p) p$data)
    ref <- t(sapply(1:2, function(s) chan_first(ref_conv2d(x[s, , , ], w$kernel, w$bias, 3, 2, 1, 2))))
    expect_close_to(keras_forward(m, x), ref, be, "conv_2d")
    expect_keras_grads(m, x[1, , , , drop = FALSE], be, what = "conv_2d")
    # "same" padding keeps the size; the padding reads zeros
    ms <- one_layer(c(5, 6, 2), function(i) ggml_layer_conv_2d(i, 2, 3, padding = "same"), be)
    ws <- lapply(last_weights(ms), function(p) p$data)
    xp <- array(0, c(2, 7, 8, 2))
    xp[, 2:6, 2:7, ] <- x
    ref <- t(sapply(1:2, function(s) chan_first(ref_conv2d(xp[s, , , ], ws$kernel, ws$bias, 3, 3))))
    expect_close_to(keras_forward(ms, x), ref, be, "conv_2d same")
    expect_keras_grads(ms, x[1, , , , drop = FALSE], be, what = "conv_2d same")
    # conv_1d over a sequence c(L, C)
    xs <- array(rnorm(2 * 6 * 2), c(2, 6, 2))
    m1 <- one_layer(c(6, 2), function(i) ggml_layer_conv_1d(i, 3, 3, activation = "relu"), be)
    w1 <- lapply(last_weights(m1), function(p) p$data)
    ref1 <- t(sapply(1:2, function(s) {
      o <- sapply(1:4, function(t) pmax(w1$kernel %*% as.vector(t(xs[s, t:(t + 2), ])) + w1$bias, 0))
      as.vector(o)
    }))
    expect_close_to(keras_forward(m1, xs), ref1, be, "conv_1d")
    expect_keras_grads(m1, xs[1, , , drop = FALSE], be, what = "conv_1d")
    mp <- one_layer(c(5, 6, 2), function(i) ggml_layer_max_pooling_2d(i, c(2, 3)), be)
    refp <- t(sapply(1:2, function(s) {
      o <- array(0, c(2, 2, 2))
      for (i in 1:2) for (j in 1:2) for (c in 1:2) o[i, j, c] <- max(x[s, 2 * i - 1:0, 3 * j - 2:0, c])
      chan_first(o)
    }))
    expect_close_to(keras_forward(mp, x), refp, be, "max pooling")
    expect_keras_grads(one_layer(c(5, 6, 2), function(i) ggml_layer_dense(ggml_layer_max_pooling_2d(i, 2), 2), be),
                       x[1, , , , drop = FALSE], be, what = "max pooling")
    # overlapping windows (stride below the window): an input can be the
    # maximum of several windows and gets each one's gradient
    mo <- one_layer(c(5, 6, 2), function(i) ggml_layer_max_pooling_2d(i, c(3, 2), strides = c(1, 2)), be)
    refo <- t(sapply(1:2, function(s) {
      o <- array(0, c(3, 3, 2))
      for (i in 1:3) for (j in 1:3) for (c in 1:2) o[i, j, c] <- max(x[s, i + 0:2, 2 * j - 1:0, c])
      chan_first(o)
    }))
    expect_close_to(keras_forward(mo, x), refo, be, "overlapping max pooling")
    expect_keras_grads(one_layer(c(5, 6, 2), function(i) {
      ggml_layer_dense(ggml_layer_max_pooling_2d(i, c(3, 2), strides = c(1, 2)), 2)
    }, be), x[1, , , , drop = FALSE], be, what = "overlapping max pooling")
  }
})

test_that("the engine convolution and the patch gather give the same values and gradients", {
  set.seed(61)
  x <- array(rnorm(3 * 7 * 6 * 2), c(3, 7, 6, 2))
  cases <- list(list(k = c(3, 4), s = c(2, 2), pad = "same"), list(k = c(3, 2), s = c(2, 1), pad = "valid"),
                list(k = c(5, 3), s = c(1, 3), pad = "same"))
  for (be in keras_backends()) for (cs in cases) {
    what <- sprintf("conv_2d %s stride %s %s", paste(cs$k, collapse = "x"), paste(cs$s, collapse = ","), cs$pad)
    m <- one_layer(c(7, 6, 2), function(i) ggml_layer_conv_2d(i, 3, cs$k, strides = cs$s, padding = cs$pad,
                                                              activation = "tanh"), be)
    rt <- m$compilation$runtime
    st <- rt$plan$steps[[length(rt$plan$steps)]]
    expect_false(is.null(.nn_conv_geom(st)), info = what)
    w <- last_weights(m)
    both <- lapply(c("engine", "gather"), function(path) {
      for (t in w) t$grad <- NULL
      xt <- keras_inputs(m, x, as_param = TRUE)[[1L]]
      tape <- with_grad_tape({
        out <- if (path == "engine") {
          .ag_op("conv2d", list(w$kernel, xt, w$bias), c(3, .nn_conv_geom(st)))
        } else {
          ag_tanh(.ag_op("linear", list(w$kernel, .nn_patches(rt, st, xt), w$bias), 0))
        }
        R <- matrix(seq_len(prod(out$shape)) %% 7 / 6 - 0.4, out$shape[1L])
        loss <- ag_sum(ag_mul(out, R))
      })
      backward(loss)
      list(out = .ag_data(out), gk = w$kernel$grad, gb = w$bias$grad, gx = xt$grad)
    })
    for (part in names(both[[1L]])) {
      expect_close_to(both[[1L]][[part]], both[[2L]][[part]], be, paste(what, part))
    }
  }
  # "same" with an even kernel pads more after than before: the gather builds it
  m <- one_layer(c(7, 6, 2), function(i) ggml_layer_conv_2d(i, 2, c(2, 2), padding = "same"))
  rt <- m$compilation$runtime
  expect_null(.nn_conv_geom(rt$plan$steps[[length(rt$plan$steps)]]))
  expect_keras_grads(m, x[1, , , , drop = FALSE], "cpu", what = "conv_2d 2x2 same")
})

test_that("global pooling, flatten, add and concatenate", {
  set.seed(7)
  x <- array(rnorm(3 * 3 * 4 * 2), c(3, 3, 4, 2))
  for (be in keras_backends()) {
    ga <- one_layer(c(3, 4, 2), ggml_layer_global_average_pooling_2d, be)
    gm <- one_layer(c(3, 4, 2), ggml_layer_global_max_pooling_2d, be)
    expect_close_to(keras_forward(ga, x), apply(x, c(1, 4), mean), be, "global average pooling")
    expect_close_to(keras_forward(gm, x), apply(x, c(1, 4), max), be, "global max pooling")
    head <- function(f) function(i) ggml_layer_dense(f(i), 2, activation = "tanh")
    expect_keras_grads(one_layer(c(3, 4, 2), head(ggml_layer_global_average_pooling_2d), be), x[1, , , , drop = FALSE],
                       be, what = "global average pooling")
    expect_keras_grads(one_layer(c(3, 4, 2), head(ggml_layer_global_max_pooling_2d), be), x[1, , , , drop = FALSE],
                       be, what = "global max pooling")
    expect_close_to(keras_forward(one_layer(c(3, 4, 2), ggml_layer_flatten, be), x),
                    t(apply(x, 1, chan_first)), be, "flatten")
    # residual add and concatenations (features, image channels, sequence steps)
    inp <- ggml_input(3)
    d <- ggml_layer_dense(inp, 3)
    m <- ggml_compile(ggml_model(inp, ggml_layer_add(list(inp, d, d))), loss = "mse", backend = be)
    xv <- matrix(rnorm(12), 4, 3)
    w <- lapply(m$compilation$runtime$weights[[1]], function(p) p$data)
    expect_close_to(keras_forward(m, xv), xv + 2 * t(apply(xv, 1, ref_dense, w = w)), be, "add")
    img <- ggml_input(c(3, 4, 2))
    m <- ggml_compile(ggml_model(img, ggml_layer_concatenate(list(img, img), axis = -1)), loss = "mse", backend = be)
    cat_ref <- t(sapply(1:3, function(s) chan_first(array(c(x[s, , , ], x[s, , , ]), c(3, 4, 4)))))
    expect_close_to(keras_forward(m, x), cat_ref, be, "concatenate channels")
    sq <- ggml_input(c(2, 3))
    m <- ggml_compile(ggml_model(sq, ggml_layer_concatenate(list(sq, sq), axis = 0)), loss = "mse", backend = be)
    xs <- array(rnorm(2 * 2 * 3), c(2, 2, 3))
    expect_close_to(keras_forward(m, xs),
                    t(sapply(1:2, function(s) chan_first(rbind(xs[s, , ], xs[s, , ])))), be, "concatenate steps")
  }
})
