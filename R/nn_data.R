# Data in and out of models: `x` (one row per sample, or a list of them for
# several inputs) becomes [features, n] matrices in the layouts of
# R/nn_build.R; `y` becomes a [units, n] target matrix checked against the
# loss; predictions go back as one row per sample.

.nn_input_steps <- function(rt) lapply(rt$plan$inputs, function(id) .nn_step(rt$plan, id))

# One input's data as a [prod(shape), n] matrix (or, for int32 inputs, an
# integer matrix [prod(shape), n]). With `samples` (device "gpu"), a float
# input is instead converted once, in the engine, to f32 columns held there
# (an "nn_samples": the handle and the columns in use), which batches are
# copied from.
.nn_as_input <- function(x, st, what, fn, samples = FALSE) {
  shape <- st$config$shape
  if (is.data.frame(x)) x <- as.matrix(x)
  if (is_ag_tensor(x)) x <- t(.ag_data(x))
  if (!(is.numeric(x) || is.logical(x))) {
    .abort(sprintf("%s(): %s must be a numeric matrix or array, not %s", fn, what,
                   paste(class(x), collapse = "/")), call = NULL)
  }
  d <- dim(x)
  if (is.null(d)) {
    if (prod(shape) != 1L) {
      .abort(sprintf("%s(): %s is a vector, but input \"%s\" takes samples of shape %s: give one row per sample",
                     fn, what, st$label, .nn_shape_str(shape)), call = NULL)
    }
    d <- c(length(x), 1L)
    dim(x) <- d
  }
  n <- d[1L]
  sample <- d[-1L]
  if (length(sample) == 1L && length(shape) > 1L && sample == prod(shape)) {
    # Samples given flattened in R's order for the shape: rebuild the array.
    dim(x) <- c(n, shape)
    sample <- shape
  }
  if (!identical(as.integer(sample), as.integer(shape))) {
    .abort(sprintf("%s(): input \"%s\" takes samples of shape %s, but %s has %s per sample (dim %s)",
                   fn, st$label, .nn_shape_str(shape), what,
                   if (length(sample) == 1L) sprintf("%d feature%s", sample, if (sample == 1L) "" else "s")
                   else .nn_shape_str(sample),
                   .nn_shape_str(d)), call = NULL)
  }
  if (samples && !identical(st$config$dtype, "int32")) {
    if (!is.double(x)) storage.mode(x) <- "double"
    if (length(dim(x)) == 1L) dim(x) <- c(n, 1L)
    h <- tryCatch(.rs(rs_ag_samples(x)), ggmlR_error = function(e) {
      if (anyNA(x)) .abort(sprintf("%s(): %s contains missing values", fn, what), call = NULL)
      stop(e)
    })
    return(structure(list(h = h, rows = as.integer(prod(shape)), cols = seq_len(n)), class = "nn_samples"))
  }
  if (anyNA(x)) .abort(sprintf("%s(): %s contains missing values", fn, what), call = NULL)
  m <- switch(length(shape),
    t(x),
    matrix(aperm(x, c(3L, 2L, 1L)), ncol = n),
    matrix(aperm(x, c(4L, 3L, 2L, 1L)), ncol = n))
  if (identical(st$config$dtype, "int32")) {
    if (any(m != round(m))) {
      .abort(sprintf("%s(): input \"%s\" is int32 (indices), but %s holds non-integer values",
                     fn, st$label, what), call = NULL)
    }
    storage.mode(m) <- "integer"
  } else if (!is.double(m)) {
    storage.mode(m) <- "double"
  }
  m
}

# Every input of the model, as a list named by input id; `n` the samples.
.nn_prepare_x <- function(rt, x, fn, what = "`x`", samples = FALSE) {
  if (!is.null(rt$plan$unfed_msg)) .abort(sprintf("%s(): %s", fn, rt$plan$unfed_msg), call = NULL)
  steps <- .nn_input_steps(rt)
  if (length(steps) == 1L) {
    if (is.list(x) && !is.data.frame(x) && length(x) == 1L) x <- x[[1L]]
    xs <- list(x)
  } else {
    if (!is.list(x) || is.data.frame(x)) {
      .abort(sprintf("%s(): the model has %d inputs, so %s must be a list of %d matrices or arrays (one per input, in the order of ggml_model(inputs = ...))",
                     fn, length(steps), what, length(steps)), call = NULL)
    }
    if (length(x) != length(steps)) {
      .abort(sprintf("%s(): %s has %d element%s but the model has %d inputs", fn, what, length(x),
                     if (length(x) == 1L) "" else "s", length(steps)), call = NULL)
    }
    labels <- vapply(steps, function(s) s$label, character(1L))
    if (!is.null(names(x)) && all(names(x) %in% labels)) x <- x[labels]
    xs <- x
  }
  out <- list()
  for (i in seq_along(steps)) {
    w <- if (length(steps) == 1L) what else sprintf("%s[[%d]]", what, i)
    out[[steps[[i]]$id]] <- .nn_as_input(xs[[i]], steps[[i]], w, fn, samples)
  }
  ns <- vapply(out, .nn_ncol, integer(1L))
  if (length(unique(ns)) != 1L) {
    .abort(sprintf("%s(): the inputs have different numbers of samples (%s)", fn,
                   paste(ns, collapse = ", ")), call = NULL)
  }
  if (ns[[1L]] == 0L) .abort(sprintf("%s(): %s has no samples", fn, what), call = NULL)
  list(x = out, n = ns[[1L]])
}

# Columns `idx` of every input, as engine tensors on the model's device. On
# "gpu" a batch starts a pass: the activations of the previous one (read back
# to R by then) are freed, so that fitting and predicting do not grow the
# pass pool by every batch for the rest of the session.
.nn_batch <- function(rt, X, idx) {
  .ag_pass_reset(rt$device)
  out <- list()
  for (id in names(X)) {
    x <- X[[id]]
    out[[id]] <- if (inherits(x, "nn_samples")) {
      r <- .rs(rs_ag_samples_batch(x$h, x$cols[idx]))
      .ag_make(r[[1L]], as.integer(r[[2L]]), FALSE, x$rows, length(idx), rt$device, rt$dtype)
    } else if (is.integer(x)) {
      x[, idx, drop = FALSE]
    } else {
      # The batch's columns go from R's memory into the tensor in one pass.
      r <- .rs(rs_ag_batch(x, as.integer(idx), rt$device))
      .ag_make(r[[1L]], as.integer(r[[2L]]), FALSE, nrow(x), length(idx), rt$device, rt$dtype)
    }
  }
  out
}

# Samples of one input (a matrix [features, n] or an nn_samples).
.nn_ncol <- function(x) if (inherits(x, "nn_samples")) length(x$cols) else ncol(x)

# Columns `idx` of one input.
.nn_columns <- function(x, idx) {
  if (!inherits(x, "nn_samples")) return(x[, idx, drop = FALSE])
  x$cols <- x$cols[idx]
  x
}

# Losses: name -> kind.
.nn_losses <- c(categorical_crossentropy = "ce", crossentropy = "ce", cross_entropy = "ce",
                sparse_categorical_crossentropy = "sparse_ce",
                binary_crossentropy = "bce",
                mse = "mse", mean_squared_error = "mse")

.nn_loss_kind <- function(loss, call = sys.call(-1L)) {
  if (!is.character(loss) || length(loss) != 1L || !loss %in% names(.nn_losses)) {
    .abort(sprintf("`loss` must be one of %s, not %s",
                   paste0("\"", names(.nn_losses), "\"", collapse = ", "),
                   paste(format(loss), collapse = " ")), call = call)
  }
  .nn_losses[[loss]]
}

# The target matrix [k, n] for `y`, and the class of each sample (0-based,
# for class weights; NULL for regression).
.nn_prepare_y <- function(y, loss, k, n, out_label, fn, what = "`y`") {
  kind <- .nn_loss_kind(loss, call = NULL)
  is_cls <- kind %in% c("ce", "sparse_ce")
  if (is.data.frame(y)) y <- if (ncol(y) == 1L) y[[1L]] else as.matrix(y)
  if (is_ag_tensor(y)) y <- t(.ag_data(y))
  if (is.factor(y)) {
    if (!is_cls && kind != "bce") {
      .abort(sprintf("%s(): %s is a factor (class labels) but the loss is \"%s\", a regression loss; use loss = \"categorical_crossentropy\" (or \"sparse_categorical_crossentropy\")",
                     fn, what, loss), call = NULL)
    }
    if (kind == "bce" && nlevels(y) != 2L) {
      .abort(sprintf("%s(): binary_crossentropy needs two classes but %s has %d levels; use loss = \"categorical_crossentropy\"",
                     fn, what, nlevels(y)), call = NULL)
    }
    cls <- as.integer(y) - 1L
    if (anyNA(cls)) .abort(sprintf("%s(): %s contains missing labels", fn, what), call = NULL)
    if (kind == "bce") {
      y <- as.double(cls)
    } else {
      if (nlevels(y) > k) {
        .abort(sprintf("%s(): %s has %d classes but the output \"%s\" has %d units", fn, what,
                       nlevels(y), out_label, k), call = NULL)
      }
      kind <- "sparse_ce"
      y <- cls
    }
  }
  if (!(is.numeric(y) || is.logical(y))) {
    .abort(sprintf("%s(): %s must be numeric (a matrix, or a vector of labels), not %s", fn, what,
                   paste(class(y), collapse = "/")), call = NULL)
  }
  if (anyNA(y)) .abort(sprintf("%s(): %s contains missing values", fn, what), call = NULL)
  d <- dim(y)
  is_vec <- is.null(d) || (length(d) == 2L && d[2L] == 1L && k > 1L)
  if (kind == "sparse_ce" || (kind == "ce" && is_vec)) {
    v <- as.vector(y)
    if (kind == "ce") {
      if (any(v != round(v))) {
        .abort(sprintf("%s(): %s holds non-integer values, but \"%s\" is a classification loss that needs one-hot rows or class labels; for a numeric target use loss = \"mse\"",
                       fn, what, loss), call = NULL)
      }
      .abort(sprintf("%s(): \"%s\" needs one-hot labels (a matrix with %d columns, one per output of \"%s\"); for integer class labels use loss = \"sparse_categorical_crossentropy\" (0-based) or pass a factor",
                     fn, loss, k, out_label), call = NULL)
    }
    if (any(v != round(v)) || any(v < 0) || any(v >= k)) {
      bad <- v[v != round(v) | v < 0 | v >= k][1L]
      .abort(sprintf("%s(): class label %s does not fit \"%s\": labels must be 0-based whole numbers below %d, the outputs of \"%s\" (for a numeric target use loss = \"mse\")",
                     fn, format(bad), loss, k, out_label), call = NULL)
    }
    if (length(v) != n) .abort(sprintf("%s(): `x` has %d samples but %s has %d labels", fn, n, what, length(v)), call = NULL)
    m <- matrix(0, k, n)
    m[cbind(as.integer(v) + 1L, seq_len(n))] <- 1
    return(list(y = m, cls = as.integer(v), kind = "ce"))
  }
  if (is.null(d)) y <- matrix(y, ncol = 1L)
  if (length(dim(y)) > 2L) y <- matrix(y, nrow = dim(y)[1L])
  if (nrow(y) != n) {
    .abort(sprintf("%s(): `x` has %d samples but %s has %d rows", fn, n, what, nrow(y)), call = NULL)
  }
  if (ncol(y) != k) {
    .abort(sprintf("%s(): %s has %d column%s but the output \"%s\" has %d unit%s", fn, what, ncol(y),
                   if (ncol(y) == 1L) "" else "s", out_label, k, if (k == 1L) "" else "s"), call = NULL)
  }
  m <- t(y)
  storage.mode(m) <- "double"
  cls <- NULL
  if (kind == "ce") {
    if (any(m < 0) || any(abs(colSums(m) - 1) > 1e-6)) {
      .abort(sprintf("%s(): each row of %s must be a one-hot vector (or probabilities summing to 1) for \"%s\"; for a numeric target use loss = \"mse\"",
                     fn, what, loss), call = NULL)
    }
    cls <- max.col(t(m), ties.method = "first") - 1L
  } else if (kind == "bce") {
    if (any(m < 0 | m > 1)) {
      .abort(sprintf("%s(): binary_crossentropy needs targets in [0, 1], but %s has values outside it; for a numeric target use loss = \"mse\"",
                     fn, what), call = NULL)
    }
    if (k == 1L) cls <- as.integer(m[1L, ] > 0.5)
  }
  list(y = m, cls = cls, kind = kind)
}

# Per-sample weights from `sample_weight` or `class_weight` (or NULL).
.nn_sample_weights <- function(sample_weight, class_weight, cls, n, fn) {
  if (!is.null(sample_weight) && !is.null(class_weight)) {
    .abort(sprintf("%s(): give `sample_weight` or `class_weight`, not both", fn), call = NULL)
  }
  if (!is.null(sample_weight)) {
    if (!is.numeric(sample_weight) || anyNA(sample_weight) || any(sample_weight < 0)) {
      .abort(sprintf("%s(): `sample_weight` must be non-negative numbers", fn), call = NULL)
    }
    if (length(sample_weight) != n) {
      .abort(sprintf("%s(): `sample_weight` has length %d but there are %d samples", fn,
                     length(sample_weight), n), call = NULL)
    }
    return(as.double(sample_weight))
  }
  if (!is.null(class_weight)) {
    if (is.null(cls)) {
      .abort(sprintf("%s(): `class_weight` needs class labels (a classification loss)", fn), call = NULL)
    }
    cw <- unlist(class_weight)
    if (!is.numeric(cw) || anyNA(cw) || any(cw < 0) || is.null(names(cw))) {
      .abort(sprintf("%s(): `class_weight` must be non-negative numbers named by 0-based class (e.g. c(\"0\" = 1, \"1\" = 2))", fn),
             call = NULL)
    }
    w <- rep(1, n)
    hit <- match(as.character(cls), names(cw))
    w[!is.na(hit)] <- cw[hit[!is.na(hit)]]
    return(as.double(w))
  }
  NULL
}

# The loss of predictions `out` against targets `yb` ([k, b]) with weights
# `wb` (or NULL), as a [1, 1] tensor; `fused`: `out` holds the logits of a
# softmax (or sigmoid) that the loss applies.
.nn_loss_value <- function(kind, out, yb, wb, fused) {
  if (!is.null(wb)) wrow <- matrix(wb, 1L, length(wb))
  switch(kind,
    ce = {
      t <- if (is.null(wb)) yb else yb * rep(wb, each = nrow(yb))
      if (fused) ag_softmax_cross_entropy_loss(out, t) else ag_cross_entropy_loss(out, t)
    },
    bce = {
      l <- if (fused) {
        # relu(z) - y z + log(1 + exp(-|z|)), stable for any z.
        absz <- ag_add(ag_relu(out), ag_relu(ag_scale(out, -1)))
        ag_add(ag_sub(ag_relu(out), ag_mul(out, yb)), ag_log(ag_add(ag_exp(ag_scale(absz, -1)), 1)))
      } else {
        p <- ag_clamp(out, 1e-7, 1 - 1e-7)
        ag_scale(ag_add(ag_mul(ag_log(p), yb), ag_mul(ag_log(ag_sub(1, p)), 1 - yb)), -1)
      }
      if (!is.null(wb)) l <- ag_mul(l, wrow)
      ag_mean(l)
    },
    mse = {
      if (is.null(wb)) ag_mse_loss(out, yb) else {
        s <- sqrt(wrow)
        ag_mse_loss(ag_mul(out, s), yb * rep(sqrt(wb), each = nrow(yb)))
      }
    }
  )
}

# Correct predictions in a batch (NA when the loss has no accuracy).
.nn_correct <- function(kind, pred, yb, fused) {
  k <- nrow(pred)
  if (kind == "bce" && k == 1L) {
    cut <- if (fused) 0 else 0.5
    return(sum((pred[1L, ] > cut) == (yb[1L, ] > 0.5)))
  }
  if (k < 2L) return(NA_real_)
  sum(max.col(t(pred), ties.method = "first") == max.col(t(yb), ties.method = "first"))
}

# Predictions [k, n] back to one row per sample.
.nn_rows_out <- function(m) t(m)
