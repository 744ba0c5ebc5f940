# Building a model: its plan and its weights, as autograd parameters on the
# model's device (on "gpu" they become resident in the persistent pool the
# first time a step reads them, and the optimizer updates them there).
#
# Layouts: autograd values are [features, batch] matrices, one column per
# sample. A sample with several axes is stored channels first in memory
# (Keras' channels-last order, read fastest-first):
#   vector   c(F)        F values
#   sequence c(L, C)     C fastest, then L: time step t is rows t*C + 1:C
#   image    c(H, W, C)  C fastest, then W, then H
# so a value reshaped to [C, positions * batch] has one column per position
# and sample: batch norm, channel softmax and concatenation work on that
# view, and convolutions gather its columns (R/nn_conv.R).
# Weights:
#   dense       weight [units, fan_in], bias [units, 1]
#   conv_2d     kernel [filters, C * KW * KH] (C fastest), bias [filters, 1]
#   conv_1d     kernel [filters, C * K], bias [filters, 1]
#   batch_norm  gamma, beta [C, 1] (C: features or channels); running stats
#   embedding   weight [dim, vocab_size]
#   lstm        W_gates [4u, F], U_gates [4u, u], b_gates [4u, 1] (i, f, g, o)
#   gru         W_gates [3u, F], U_gates [3u, u], b_gates, b_recurrent [3u, 1] (z, r, h)

.nn_uniform <- function(rows, cols, limit) {
  matrix(stats::runif(rows * cols, -limit, limit), rows, cols)
}

.nn_glorot <- function(rows, cols) .nn_uniform(rows, cols, sqrt(6 / (rows + cols)))

# An orthogonal [rows, cols] matrix (rows >= cols uses Q of a QR).
.nn_orthogonal <- function(rows, cols) {
  a <- matrix(stats::rnorm(max(rows, cols) * min(rows, cols)), max(rows, cols), min(rows, cols))
  q <- qr.Q(qr(a))
  if (rows >= cols) q[seq_len(rows), seq_len(cols), drop = FALSE] else t(q)[seq_len(rows), seq_len(cols), drop = FALSE]
}

# Channels of a per-sample shape (what batch norm normalises per).
.nn_channels <- function(s) s[length(s)]

# Initial weights (R matrices) of one step.
.nn_init_weights <- function(step) {
  cfg <- step$config
  s <- step$in_shapes[[1L]]
  switch(step$type,
    dense = list(weight = .nn_glorot(cfg$units, prod(s)), bias = matrix(0, cfg$units, 1L)),
    conv_2d = {
      k <- prod(cfg$kernel_size) * s[3]
      list(kernel = .nn_uniform(cfg$filters, k, sqrt(6 / k)), bias = matrix(0, cfg$filters, 1L))
    },
    conv_1d = {
      k <- cfg$kernel_size * s[2]
      list(kernel = .nn_uniform(cfg$filters, k, sqrt(6 / k)), bias = matrix(0, cfg$filters, 1L))
    },
    batch_norm = {
      c <- .nn_channels(s)
      list(gamma = matrix(1, c, 1L), beta = matrix(0, c, 1L))
    },
    embedding = list(weight = .nn_uniform(cfg$dim, cfg$vocab_size, 0.05)),
    lstm = {
      u <- cfg$units
      b <- matrix(0, 4L * u, 1L)
      b[u + seq_len(u)] <- 1
      list(W_gates = .nn_glorot(4L * u, s[2]),
           U_gates = do.call(rbind, lapply(1:4, function(i) .nn_orthogonal(u, u))), b_gates = b)
    },
    gru = {
      u <- cfg$units
      list(W_gates = .nn_glorot(3L * u, s[2]),
           U_gates = do.call(rbind, lapply(1:3, function(i) .nn_orthogonal(u, u))),
           b_gates = matrix(0, 3L * u, 1L), b_recurrent = matrix(0, 3L * u, 1L))
    },
    list()
  )
}

# The runtime of a compiled model: an environment (shared by every copy of
# the model object) with the plan, the weights by key, batch-norm running
# statistics by key, and the device.
.nn_runtime <- function(model, device, dtype = "f32", init = NULL) {
  plan <- .nn_plan(model)
  if (length(plan$unfed)) {
    # Reported when data is fed (a model may be compiled to inspect it).
    plan$unfed_msg <- sprintf(
      "the outputs depend on input%s %s that %s not among the model's inputs; pass them in ggml_model(inputs = ...)",
      if (length(plan$unfed) > 1L) "s" else "",
      paste0("\"", vapply(plan$unfed, function(id) .nn_step(plan, id)$label, ""), "\"", collapse = ", "),
      if (length(plan$unfed) > 1L) "are" else "is")
  }
  rt <- new.env(parent = emptyenv())
  rt$plan <- plan
  rt$device <- device
  rt$dtype <- dtype
  rt$weights <- list()
  rt$bn <- new.env(parent = emptyenv())
  for (st in plan$steps) {
    if (is.null(st$key) || !is.null(rt$weights[[st$key]])) next
    w <- init[[st$key]] %||% .nn_init_weights(st)
    rt$weights[[st$key]] <- lapply(w, ag_param, device = device, dtype = dtype)
    if (st$type == "batch_norm") {
      c <- .nn_channels(st$in_shapes[[1L]])
      rt$bn[[st$key]] <- list(mean = matrix(0, c, 1L), var = matrix(1, c, 1L))
    }
  }
  if (identical(device, "gpu")) .nn_make_resident(rt)
  rt
}

# On "gpu", every weight (frozen ones too) goes to the persistent pool now.
.nn_make_resident <- function(rt) {
  .ag_device_ready()
  for (w in rt$weights) for (p in w) if (!.ag_ptr_is_live(p)) .ag_make_resident(p)
  invisible(rt)
}

.nn_step <- function(plan, id) {
  for (s in plan$steps) if (identical(s$id, id)) return(s)
  NULL
}

# The trainable parameters of a runtime, named "<key>/<weight>".
.nn_trainable_params <- function(rt) {
  out <- list()
  done <- character(0)
  for (st in rt$plan$steps) {
    k <- st$key
    if (is.null(k) || k %in% done) next
    done <- c(done, k)
    if (!isTRUE(st$trainable)) next
    w <- rt$weights[[k]]
    for (nm in names(w)) out[[paste0(k, "/", nm)]] <- w[[nm]]
  }
  out
}

# The model's weights as plain matrices, by key (for saving).
.nn_weight_values <- function(rt) {
  lapply(rt$weights, function(w) lapply(w, function(p) .ag_data(p)))
}

.nn_count_params <- function(step) {
  if (is.null(step$key)) return(0)
  sum(vapply(.nn_init_shapes(step), prod, numeric(1L)))
}

# Weight shapes of a step, without creating them.
.nn_init_shapes <- function(step) {
  cfg <- step$config
  s <- step$in_shapes[[1L]]
  switch(step$type,
    dense = list(c(cfg$units, prod(s)), c(cfg$units, 1)),
    conv_2d = list(c(cfg$filters, prod(cfg$kernel_size) * s[3]), c(cfg$filters, 1)),
    conv_1d = list(c(cfg$filters, cfg$kernel_size * s[2]), c(cfg$filters, 1)),
    batch_norm = list(c(.nn_channels(s), 1), c(.nn_channels(s), 1)),
    embedding = list(c(cfg$dim, cfg$vocab_size)),
    lstm = list(c(4 * cfg$units, s[2]), c(4 * cfg$units, cfg$units), c(4 * cfg$units, 1)),
    gru = list(c(3 * cfg$units, s[2]), c(3 * cfg$units, cfg$units), c(3 * cfg$units, 1),
               c(3 * cfg$units, 1)),
    list())
}
