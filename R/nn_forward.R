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

# Softmax over the last axis of each sample.
.nn_softmax <- function(x, shape, label) {
  if (length(shape) == 1L) return(ag_softmax(x))
  if (length(shape) == 2L) {
    n <- x$shape[2L]
    c <- shape[2L]
    return(ag_reshape(ag_softmax(ag_reshape(x, c, shape[1L] * n)), prod(shape), n))
  }
  .abort(sprintf("layer \"%s\": softmax over an image output is not supported; flatten first", label),
         call = NULL)
}

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
  vals
}

.nn_step_forward <- function(rt, st, xs, training, no_act) {
  cfg <- st$config
  w <- if (!is.null(st$key)) rt$weights[[st$key]]
  x <- xs[[1L]]
  act <- if (no_act) NULL else cfg$activation
  switch(st$type,
    dense = {
      code <- if (!is.null(act) && act %in% names(.nn_act_codes)) .nn_act_codes[[act]] else 0
      out <- .ag_op("linear", list(w$weight, x, w$bias), code)
      if (code == 0) .nn_activate(out, act, st$out_shape, st$label) else out
    },
    flatten = x,
    dropout = .nn_dropout(x, cfg$rate, training),
    batch_norm = .nn_batch_norm(rt, st, x, w, training),
    embedding = .nn_embedding(x, w, st),
    lstm = .nn_lstm(x, w, st, act),
    gru = .nn_gru(x, w, st, act),
    add = Reduce(ag_add, xs),
    concatenate = .nn_concatenate(xs, st),
    global_average_pooling_2d = .nn_global_pool(x, st$in_shapes[[1L]], "mean"),
    global_max_pooling_2d = .nn_global_pool(x, st$in_shapes[[1L]], "max"),
    conv_2d = , conv_1d = {
      out <- .nn_conv(x, w, st)
      .nn_activate(out, act, st$out_shape, st$label)
    },
    max_pooling_2d = .nn_max_pool(x, st),
    .abort(sprintf("layer \"%s\": unknown layer type \"%s\"", st$label, st$type), call = NULL)
  )
}

.nn_dropout <- function(x, rate, training) {
  if (!training || rate == 0) return(x)
  d <- x$shape
  keep <- stats::runif(d[1L] * d[2L]) >= rate
  ag_mul(x, matrix(keep / (1 - rate), d[1L], d[2L]))
}

# Batch norm per channel: features of a vector; channels of a sequence
# (rows of the [C, L * batch] view); channels of an image (the slowest
# axis: regrouped so that each row holds one channel).
.nn_batch_norm <- function(rt, st, x, w, training) {
  s <- st$in_shapes[[1L]]
  n <- x$shape[2L]
  c <- .nn_channels(s)
  p <- prod(s) / c
  to_rows <- switch(length(s),
    function(v) v,
    function(v) ag_reshape(v, c, p * n),
    function(v) ag_reshape(ag_transpose(ag_reshape(v, p, c * n)), c, n * p))
  from_rows <- switch(length(s),
    function(v) v,
    function(v) ag_reshape(v, c * p, n),
    function(v) ag_reshape(ag_transpose(ag_reshape(v, c * n, p)), p * c, n))
  xr <- to_rows(x)
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
  from_rows(out)
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

# Concatenation: along the slowest axis of the layout it is a join of rows;
# along the channels of a sequence, a join per time step.
.nn_concatenate <- function(xs, st) {
  s <- st$in_shapes[[1L]]
  ax <- .nn_concat_axis(st$config$axis, length(s), st$label)
  slowest <- c(1L, 1L, 3L)[length(s)]
  if (ax == slowest) return(.ag_op("concat_rows", xs))
  if (length(s) == 2L && ax == 2L) {
    pieces <- list()
    for (t in seq_len(s[1L])) {
      for (i in seq_along(xs)) {
        ci <- st$in_shapes[[i]][2L]
        pieces[[length(pieces) + 1L]] <- .nn_time_step(xs[[i]], t, ci)
      }
    }
    return(.ag_op("concat_rows", pieces))
  }
  .abort(sprintf("layer \"%s\" (concatenate): joining images along axis %d is not supported; join channels (axis = -1)",
                 st$label, st$config$axis), call = NULL)
}

# Global pooling of an image [W * H * C, batch]: regrouped to
# [W * H, C * batch] (one column per channel and sample), then the mean of
# each column, or the maximum by pairwise maxima max(a, b) = b + relu(a - b).
.nn_global_pool <- function(x, s, how) {
  n <- x$shape[2L]
  p <- s[1L] * s[2L]
  v <- ag_reshape(x, p, s[3L] * n)
  if (how == "mean") return(ag_reshape(ag_mean(v, dim = 2), s[3L], n))
  while (p > 1L) {
    half <- p %/% 2L
    a <- .nn_rows(v, 0, half)
    b <- .nn_rows(v, half, 2L * half)
    m <- ag_add(b, ag_relu(ag_sub(a, b)))
    v <- if (p %% 2L == 1L) .ag_op("concat_rows", list(m, .nn_rows(v, 2L * half, p))) else m
    p <- half + p %% 2L
  }
  ag_reshape(v, s[3L], n)
}
