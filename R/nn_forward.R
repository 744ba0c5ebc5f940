# The forward pass of a model plan on the autograd engine: every layer is a
# few ag_* operations on [features, batch] tensors (layouts: R/nn_build.R),
# so inside with_grad_tape() the engine records them and computes their
# gradients; R only chooses the operations.

.nn_act_codes <- c(relu = 1, sigmoid = 2, tanh = 3)

# `activation(x)` for a value of per-sample shape `shape`.
.nn_activate <- function(x, act, shape, label) {
  if (is.null(act)) return(x)
  switch(act,
    relu = ag_relu(x),
    sigmoid = ag_sigmoid(x),
    tanh = ag_tanh(x),
    softmax = .nn_softmax(x, shape, label),
    silu = ag_mul(x, ag_sigmoid(x)),
    gelu = {
      inner <- ag_scale(ag_add(x, ag_scale(ag_pow(x, 3), 0.044715)), sqrt(2 / pi))
      ag_mul(ag_scale(x, 0.5), ag_add(ag_tanh(inner), 1))
    },
    hardsigmoid = ag_clamp(ag_add(ag_scale(x, 1 / 6), 0.5), 0, 1),
    hardswish = ag_mul(x, ag_clamp(ag_add(ag_scale(x, 1 / 6), 0.5), 0, 1)),
    leaky_relu = ag_sub(ag_relu(x), ag_scale(ag_relu(ag_scale(x, -1)), 0.01)),
    elu = ag_add(ag_relu(x), ag_sub(ag_exp(ag_scale(ag_relu(ag_scale(x, -1)), -1)), 1)),
    .abort(sprintf("layer \"%s\": unknown activation \"%s\"", label, act), call = NULL)
  )
}

# Softmax over the last axis (the channels) of each sample.
.nn_softmax <- function(x, shape, label) {
  if (length(shape) == 1L) return(ag_softmax(x))
  ag_softmax(.nn_to_channels(x, shape))
}

# Values travel between layers as [prod(shape), batch] ("flat") or, after
# layers that work per position (convolution, pooling, batch norm), as
# [C, positions * batch] ("channels"): the same memory order, so a layer
# reshapes only when it needs the other view.
.nn_flat <- function(x, shape) {
  f <- prod(shape)
  if (x$shape[1L] == f) x else ag_reshape(x, f, prod(x$shape) %/% f)
}

.nn_to_channels <- function(x, shape) {
  c <- shape[length(shape)]
  if (x$shape[1L] == c) x else ag_reshape(x, c, prod(x$shape) %/% c)
}

.nn_from_channels <- function(v, shape) .nn_flat(v, shape)

# Runs the plan. `inputs`: a list named by input id (ag tensors, or integer
# matrices [L, batch] for int32 inputs). `logits`: the id of a step whose
# final activation is left out (a loss applies it, fused). Returns an
# environment of values by step id.
.nn_run <- function(rt, inputs, training, logits = NULL) {
  vals <- new.env(parent = emptyenv())
  for (st in rt$plan$steps) {
    xs <- lapply(st$parents, function(p) vals[[p]])
    vals[[st$id]] <- if (st$type == "input") {
      inputs[[st$id]]
    } else {
      .nn_step_forward(rt, st, xs, training, identical(st$id, logits))
    }
  }
  for (id in rt$plan$outputs) vals[[id]] <- .nn_flat(vals[[id]], .nn_step(rt$plan, id)$out_shape)
  vals
}

.nn_step_forward <- function(rt, st, xs, training, no_act) {
  cfg <- st$config
  w <- if (!is.null(st$key)) rt$weights[[st$key]]
  x <- xs[[1L]]
  s1 <- st$in_shapes[[1L]]
  act <- if (no_act) NULL else cfg$activation
  switch(st$type,
    dense = {
      code <- if (!is.null(act) && act %in% names(.nn_act_codes)) .nn_act_codes[[act]] else 0
      out <- .ag_op("linear", list(w$weight, .nn_flat(x, s1), w$bias), code)
      if (code == 0) .nn_activate(out, act, st$out_shape, st$label) else out
    },
    flatten = .nn_flat(x, s1),
    dropout = .nn_dropout(x, cfg$rate, training),
    batch_norm = .nn_batch_norm(rt, st, x, w, training),
    embedding = .nn_embedding(x, w, st),
    lstm = .nn_lstm(.nn_flat(x, s1), w, st, act),
    gru = .nn_gru(.nn_flat(x, s1), w, st, act),
    add = {
      same <- all(vapply(xs, function(v) identical(v$shape, x$shape), logical(1L)))
      Reduce(ag_add, if (same) xs else lapply(xs, .nn_flat, shape = s1))
    },
    concatenate = .nn_concatenate(xs, st),
    global_average_pooling_2d = .nn_global_pool(x, st$in_shapes[[1L]], "mean"),
    global_max_pooling_2d = .nn_global_pool(x, st$in_shapes[[1L]], "max"),
    conv_2d = , conv_1d = .nn_conv(rt, st, x, w, act),
    max_pooling_2d = .nn_max_pool(rt, st, x),
    .abort(sprintf("layer \"%s\": unknown layer type \"%s\"", st$label, st$type), call = NULL)
  )
}

.nn_dropout <- function(x, rate, training) {
  if (!training || rate == 0) return(x)
  d <- x$shape
  keep <- stats::runif(d[1L] * d[2L]) >= rate
  ag_mul(x, matrix(keep / (1 - rate), d[1L], d[2L]))
}

# Batch norm per channel: the features of a vector, the channels (rows of
# the [C, positions * batch] view) of a sequence or an image.
.nn_batch_norm <- function(rt, st, x, w, training) {
  s <- st$in_shapes[[1L]]
  c <- .nn_channels(s)
  xr <- if (length(s) == 1L) x else .nn_to_channels(x, s)
  bn <- rt$bn[[st$key]]
  eps <- st$config$eps
  if (training) {
    r <- .ag_op("batch_norm", list(xr, w$gamma, w$beta), c(eps, 1), aux = TRUE)
    m <- st$config$momentum %||% 0.1
    # The engine returns the batch mean and (biased) variance; the running
    # variance is kept unbiased, as Keras and PyTorch do.
    cnt <- xr$shape[2L]
    bv <- r[[2L]][c + seq_len(c)] * if (cnt > 1) cnt / (cnt - 1) else 1
    rt$bn[[st$key]] <- list(mean = (1 - m) * bn$mean + m * matrix(r[[2L]][seq_len(c)], c, 1L),
                            var = (1 - m) * bn$var + m * matrix(bv, c, 1L))
    out <- r[[1L]]
  } else {
    out <- .ag_op("batch_norm", list(xr, w$gamma, w$beta, bn$mean, bn$var), c(eps, 0))
  }
  out
}

.nn_embedding <- function(idx, w, st) {
  vocab <- st$config$vocab_size
  if (is_ag_tensor(idx)) idx <- .ag_data(idx)
  v <- as.vector(idx)
  if (anyNA(v) || any(v != round(v)) || any(v < 0) || any(v >= vocab)) {
    bad <- v[is.na(v) | v != round(v) | v < 0 | v >= vocab][1L]
    .abort(sprintf("layer \"%s\" (embedding): index %s is not a whole number in [0, %d) (indices are 0-based, below vocab_size)",
                   st$label, format(bad), vocab), call = NULL)
  }
  n <- ncol(idx)
  e <- .ag_op("gather", list(w$weight), idx = as.integer(v))
  ag_reshape(e, st$config$dim * nrow(idx), n)
}

# Rows of time step t (1-based) of a [C * L, batch] sequence.
.nn_time_step <- function(x, t, c) .ag_op("slice_rows", list(x), c((t - 1) * c, t * c))

.nn_rows <- function(x, from, to) .ag_op("slice_rows", list(x), c(from, to))

.nn_lstm <- function(x, w, st, act) {
  s <- st$in_shapes[[1L]]
  u <- st$config$units
  rec <- st$config$recurrent_activation
  cell <- st$config$activation
  n <- x$shape[2L]
  h <- NULL
  cs <- NULL
  hs <- vector("list", s[1L])
  for (t in seq_len(s[1L])) {
    z <- .ag_op("linear", list(w$W_gates, .nn_time_step(x, t, s[2L]), w$b_gates), 0)
    if (!is.null(h)) z <- ag_add(z, ag_matmul(w$U_gates, h))
    i <- .nn_activate(.nn_rows(z, 0, u), rec, u, st$label)
    f <- .nn_activate(.nn_rows(z, u, 2 * u), rec, u, st$label)
    g <- .nn_activate(.nn_rows(z, 2 * u, 3 * u), cell, u, st$label)
    o <- .nn_activate(.nn_rows(z, 3 * u, 4 * u), rec, u, st$label)
    cs <- if (is.null(cs)) ag_mul(i, g) else ag_add(ag_mul(f, cs), ag_mul(i, g))
    h <- ag_mul(o, .nn_activate(cs, cell, u, st$label))
    hs[[t]] <- h
  }
  if (isTRUE(st$config$return_sequences)) .ag_op("concat_rows", hs) else h
}

.nn_gru <- function(x, w, st, act) {
  s <- st$in_shapes[[1L]]
  u <- st$config$units
  rec <- st$config$recurrent_activation
  cell <- st$config$activation
  h <- NULL
  hs <- vector("list", s[1L])
  for (t in seq_len(s[1L])) {
    zx <- .ag_op("linear", list(w$W_gates, .nn_time_step(x, t, s[2L]), w$b_gates), 0)
    if (is.null(h)) {
      # h = 0: the recurrent product is just its bias.
      zh <- w$b_recurrent
    } else {
      zh <- .ag_op("linear", list(w$U_gates, h, w$b_recurrent), 0)
    }
    z <- .nn_activate(ag_add(.nn_rows(zx, 0, u), .nn_rows(zh, 0, u)), rec, u, st$label)
    r <- .nn_activate(ag_add(.nn_rows(zx, u, 2 * u), .nn_rows(zh, u, 2 * u)), rec, u, st$label)
    hh <- .nn_activate(ag_add(.nn_rows(zx, 2 * u, 3 * u), ag_mul(r, .nn_rows(zh, 2 * u, 3 * u))),
                       cell, u, st$label)
    # h = z * h_prev + (1 - z) * hh
    h <- if (is.null(h)) ag_sub(hh, ag_mul(z, hh)) else ag_add(hh, ag_mul(z, ag_sub(h, hh)))
    hs[[t]] <- h
  }
  if (isTRUE(st$config$return_sequences)) .ag_op("concat_rows", hs) else h
}

# Concatenation: along the slowest axis (the first listed) it is a join of
# rows; along the channels, a join of the rows of the [C, positions * batch]
# views.
.nn_concatenate <- function(xs, st) {
  s <- st$in_shapes[[1L]]
  nd <- length(s)
  ax <- .nn_concat_axis(st$config$axis, nd, st$label)
  if (ax == 1L) return(.ag_op("concat_rows", Map(.nn_flat, xs, st$in_shapes)))
  if (ax == nd) {
    parts <- Map(function(x, sh) .nn_to_channels(x, sh), xs, st$in_shapes)
    return(.nn_from_channels(.ag_op("concat_rows", parts), st$out_shape))
  }
  .abort(sprintf("layer \"%s\" (concatenate): joining images along the width (axis %d) is not supported; join channels (axis = -1) or rows (axis = 0)",
                 st$label, st$config$axis), call = NULL)
}

# Global pooling of an image [C * W * H, batch]: regrouped to [W * H,
# batch * C] (one column per sample and channel), then the mean of each
# column, or the maximum by pairwise maxima max(a, b) = b + relu(a - b).
.nn_global_pool <- function(x, s, how) {
  n <- prod(x$shape) %/% prod(s)
  p <- s[1L] * s[2L]
  c <- s[3L]
  v <- ag_reshape(ag_transpose(.nn_to_channels(x, s)), p, n * c)
  v <- if (how == "mean") ag_mean(v, dim = 2) else .nn_max_rows(v, p)
  ag_transpose(ag_reshape(v, n, c))
}

# The maximum over the `p` rows of each column of `v` (a [1, ncol] tensor).
.nn_max_rows <- function(v, p) {
  while (p > 1L) {
    half <- p %/% 2L
    a <- .nn_rows(v, 0, half)
    b <- .nn_rows(v, half, 2L * half)
    m <- ag_add(b, ag_relu(ag_sub(a, b)))
    v <- if (p %% 2L == 1L) .ag_op("concat_rows", list(m, .nn_rows(v, 2L * half, p))) else m
    p <- half + p %% 2L
  }
  v
}
