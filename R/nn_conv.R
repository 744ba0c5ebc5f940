# Convolution and max pooling of Keras-style layers. A convolution is the
# engine's own (the autograd op "conv2d": on the CPU backend a direct
# convolution of the channels-first values, elsewhere im2col and one
# product, its input gradient a transposed convolution; see
# src/rust/core/src/autograd/conv_rules.rs),
# on the layers' channels-first layout. Where "same" padding would need more
# zeros after than before (an even kernel), the layers build the patches
# from autograd ops instead:
#
# * A value [C * positions, batch] viewed as [C, positions * batch] has one
#   column per input position and sample (R/nn_build.R).
# * im2col is a gather of those columns (the embedding lookup op): for each
#   output position and sample, the K kernel taps in turn, a padding tap
#   reading an appended zero column. Reshaped to [C * K, outputs * batch],
#   each column is one patch (C fastest, then the tap).
# * A convolution is then the dense op `kernel %*% patches + bias` (with its
#   activation fused), giving [filters, outputs * batch]: the same layout, so
#   layers stack without reordering. The gather's backward rule adds the
#   gradients of overlapping patches back into the input.

# 0-based input positions of every tap of every output position of one
# sample along one axis: a [k, out] matrix, -1 for padding.
.nn_taps <- function(n_in, k, stride, padding) {
  n_out <- if (padding == "same") ceiling(n_in / stride) else (n_in - k) %/% stride + 1L
  pad <- if (padding == "same") max((n_out - 1L) * stride + k - n_in, 0L) %/% 2L else 0L
  pos <- outer(seq_len(k) - 1L, (seq_len(n_out) - 1L) * stride, `+`) - pad
  pos[pos < 0L | pos >= n_in] <- -1L
  pos
}

# Column indices (0-based) of the gather for a batch of `n`: taps fastest,
# then output positions (width fastest), then samples; padding taps read
# column p_in * n (the appended zero column).
.nn_gather_index <- function(in_hw, k_hw, s_hw, padding, n) {
  th <- .nn_taps(in_hw[1L], k_hw[1L], s_hw[1L], padding)
  tw <- .nn_taps(in_hw[2L], k_hw[2L], s_hw[2L], padding)
  kh <- nrow(th); oh <- ncol(th); kw <- nrow(tw); ow <- ncol(tw)
  # [kw, kh, ow, oh] of input positions w + W * h.
  h <- th[rep(seq_len(kh), each = kw), rep(seq_len(oh), each = ow), drop = FALSE]
  w <- tw[rep(seq_len(kw), times = kh), rep(seq_len(ow), times = oh), drop = FALSE]
  pos <- ifelse(h < 0L | w < 0L, -1L, w + in_hw[2L] * h)
  p_in <- prod(in_hw)
  per <- as.vector(pos)
  idx <- rep(per, n) + rep((seq_len(n) - 1L) * p_in, each = length(per))
  idx[rep(per < 0L, n)] <- p_in * n
  list(idx = as.integer(idx), pad = any(per < 0L), k = kh * kw, out = oh * ow)
}

# The gather of a step for a batch of `n` (cached by step and batch size).
.nn_step_gather <- function(rt, st, n) {
  key <- paste0(st$id, "@", n)
  g <- rt$gathers[[key]]
  if (!is.null(g)) return(g)
  s <- st$in_shapes[[1L]]
  cfg <- st$config
  g <- switch(st$type,
    conv_2d = .nn_gather_index(s[1:2], cfg$kernel_size, cfg$strides, cfg$padding, n),
    conv_1d = .nn_gather_index(c(1L, s[1L]), c(1L, cfg$kernel_size), c(1L, cfg$strides), cfg$padding, n))
  if (is.null(rt$gathers)) rt$gathers <- list()
  rt$gathers[[key]] <- g
  g
}

# The patches [C * K, outputs * batch] of input `x` for step `st`.
.nn_patches <- function(rt, st, x) {
  s <- st$in_shapes[[1L]]
  c <- s[length(s)]
  n <- prod(x$shape) %/% prod(s)
  g <- .nn_step_gather(rt, st, n)
  cols <- .nn_to_channels(x, s)
  if (g$pad) {
    # One zero column after the last, for the padding taps.
    cols <- ag_transpose(.ag_op("concat_rows", list(ag_transpose(cols), matrix(0, 1L, c))))
  }
  # k taps stacked per column by the gather itself (no reshape copy).
  .ag_op("gather", list(cols), g$k, idx = g$idx)
}

# The geometry of the engine convolution of step `st`: c(C, W, H, KW, KH,
# strides, paddings, dilations), each width then height, or NULL when "same"
# padding is uneven (more zeros after than before).
.nn_conv_geom <- function(st) {
  s <- st$in_shapes[[1L]]
  cfg <- st$config
  if (st$type == "conv_2d") {
    hw <- s[1:2]; k <- cfg$kernel_size; str <- cfg$strides; ch <- s[3L]
  } else {
    hw <- c(1L, s[1L]); k <- c(1L, cfg$kernel_size); str <- c(1L, cfg$strides); ch <- s[2L]
  }
  pad <- c(0L, 0L)
  if (identical(cfg$padding, "same")) {
    tot <- pmax((ceiling(hw / str) - 1L) * str + k - hw, 0L)
    if (any(tot %% 2L != 0L)) return(NULL)
    pad <- tot %/% 2L
  }
  as.numeric(c(ch, hw[2L], hw[1L], k[2L], k[1L], str[2L], str[1L], pad[2L], pad[1L], 1L, 1L))
}

# Output in the channels view [filters, outputs * batch].
.nn_conv <- function(rt, st, x, w, act) {
  code <- if (!is.null(act) && act %in% names(.nn_act_codes)) .nn_act_codes[[act]] else 0
  geom <- .nn_conv_geom(st)
  out <- if (is.null(geom)) {
    .ag_op("linear", list(w$kernel, .nn_patches(rt, st, x), w$bias), code)
  } else {
    .ag_op("conv2d", list(w$kernel, x, w$bias), c(code, geom))
  }
  if (code == 0) .nn_activate(out, act, st$out_shape, st$label) else out
}

# Max pooling is the engine's own (the autograd op "max_pool2d": one pass
# that keeps the tap of each maximum, its backward a scatter to those taps;
# see src/rust/core/src/autograd/pool_rules.rs), on the channels-first
# layout: c(C, W, H, KW, KH, stride W, stride H).
.nn_max_pool <- function(rt, st, x) {
  s <- st$in_shapes[[1L]]
  cfg <- st$config
  geom <- c(s[3L], s[2L], s[1L], cfg$pool_size[2L], cfg$pool_size[1L], cfg$strides[2L], cfg$strides[1L])
  .ag_op("max_pool2d", list(x), as.numeric(geom))
}
