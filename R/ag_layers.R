# Layers: environments with $forward() and $parameters() (and $training for
# the layers that behave differently in training and evaluation).

.ag_layer <- function(cls, name) {
  env <- new.env(parent = emptyenv())
  env$training <- TRUE
  env$name <- name
  class(env) <- c(cls, "ag_layer")
  env
}

.ag_glorot <- function(fan_in, fan_out) {
  lim <- sqrt(6 / (fan_in + fan_out))
  matrix(stats::runif(fan_out * fan_in, -lim, lim), fan_out, fan_in)
}

.ag_count <- function(x, what, call = sys.call(-1L)) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 1 || x != round(x)) {
    .abort(sprintf("`%s` must be a positive whole number, not %s", what,
                   if (is.numeric(x) && length(x) == 1L) format(x) else .describe_value(x)), call = call)
  }
  if (x > .Machine$integer.max) {
    .abort(sprintf("`%s` is %s, more than the largest size (%d)", what, format(x), .Machine$integer.max),
           call = call)
  }
  as.integer(x)
}

# Refuse a table of `n` doubles larger than this machine's memory before R
# tries to make it; `what` names it.
.ag_check_size <- function(n, what, call = sys.call(-1L)) {
  bytes <- as.double(n) * 8
  limit <- .rs(rs_alloc_limit(), call = call)
  if (bytes > limit) {
    .abort(sprintf("%s would take %s, more than this machine's memory (%s); use smaller sizes",
                   what, .fmt_bytes(bytes), .fmt_bytes(limit)), call = call)
  }
  invisible(n)
}

# One of `choices` (NULL allowed when `null_ok`), or an error naming `what`.
.ag_choice <- function(x, what, choices, null_ok = TRUE, call = sys.call(-1L)) {
  if (is.null(x) && null_ok) return(NULL)
  if (!is.character(x) || length(x) != 1L || is.na(x) || !x %in% choices) {
    .abort(sprintf("`%s` must be %s%s, not %s", what, if (null_ok) "NULL or " else "",
                   paste(sprintf("\"%s\"", choices), collapse = ", "),
                   if (is.character(x) && length(x) == 1L) sprintf("\"%s\"", x) else .describe_value(x)),
           call = call)
  }
  x
}

#' Dense layer
#'
#' `W %*% x + b` with `W` `[out_features, in_features]` (Glorot-uniform
#' initialisation) and `b` `[out_features, 1]` (zeros), then the activation.
#'
#' @param in_features,out_features Input and output sizes.
#' @param activation `NULL`, `"relu"`, `"sigmoid"`, `"tanh"` or `"softmax"`.
#' @return A layer with fields `W`, `b`, `forward(x)`, `parameters()` (and
#'   its alias `params()`).
#' @export
#' @examples
#' layer <- ag_linear(4, 8, activation = "relu")
#' dim(layer$forward(ag_tensor(matrix(runif(4 * 16), 4, 16))))
ag_linear <- function(in_features, out_features, activation = NULL) {
  in_features <- .ag_count(in_features, "in_features")
  out_features <- .ag_count(out_features, "out_features")
  activation <- .ag_choice(activation, "activation", c("relu", "sigmoid", "tanh", "softmax"))
  .ag_check_size(as.double(in_features) * out_features, "the weight matrix")
  act <- if (is.null(activation)) "none" else activation
  env <- .ag_layer("ag_linear", sprintf("linear(%d, %d%s)", in_features, out_features,
                                        if (act == "none") "" else paste0(", ", act)))
  env$W <- ag_param(.ag_glorot(in_features, out_features))
  env$b <- ag_param(matrix(0, out_features, 1L))
  env$activation <- activation
  # One engine op computes act(W %*% x + b) (softmax runs after it).
  code <- c(none = 0, relu = 1, sigmoid = 2, tanh = 3, softmax = 0)[[act]]
  env$forward <- function(x) {
    out <- .ag_op("linear", list(env$W, x, env$b), code)
    if (act == "softmax") ag_softmax(out) else out
  }
  env$parameters <- function() list(W = env$W, b = env$b)
  env$params <- env$parameters
  env
}

.ag_layer_params <- function(lyr) {
  if (is.function(lyr$parameters)) return(lyr$parameters())
  if (is.function(lyr$params)) return(lyr$params())
  list()
}

#' Chain layers
#'
#' @param ... Layers (or one list of layers), applied in order.
#' @return An `ag_sequential` layer: `forward(x)`, `parameters()` (named
#'   `layer<i>_<name>`), `layers`, `training`.
#' @export
#' @examples
#' model <- ag_sequential(ag_linear(4, 16, "relu"), ag_dropout(0.2), ag_linear(16, 3))
#' model
#' names(model$parameters())
ag_sequential <- function(...) {
  layers <- list(...)
  if (length(layers) == 1L && is.list(layers[[1L]]) && !is.environment(layers[[1L]]) &&
      is.null(layers[[1L]]$forward)) {
    layers <- layers[[1L]]
  }
  ok <- vapply(layers, function(l) (is.list(l) || is.environment(l)) && is.function(l$forward), logical(1L))
  if (!all(ok)) .abort(sprintf("argument %d is not a layer (it has no $forward)", which(!ok)[1L]))
  env <- .ag_layer("ag_sequential", "sequential")
  env$layers <- layers
  env$forward <- function(x) {
    for (lyr in env$layers) x <- lyr$forward(x)
    x
  }
  env$parameters <- function() {
    out <- list()
    for (i in seq_along(env$layers)) {
      lp <- .ag_layer_params(env$layers[[i]])
      for (nm in names(lp)) out[[paste0("layer", i, "_", nm)]] <- lp[[nm]]
    }
    out
  }
  env
}

#' @export
print.ag_layer <- function(x, ...) {
  n <- sum(vapply(.ag_layer_params(x), function(p) prod(p$shape), numeric(1L)))
  if (inherits(x, "ag_sequential")) {
    cat(sprintf("<ag_sequential> %s, %s, %s mode\n", .ag_count_words(length(x$layers), "layer"),
                .ag_count_words(n, "parameter"), if (isTRUE(x$training)) "training" else "eval"))
    for (i in seq_along(x$layers)) {
      l <- x$layers[[i]]
      cat(sprintf("  [%d] %s\n", i, if (!is.null(l$name)) l$name else class(l)[1L]))
    }
  } else {
    cat(sprintf("<%s> %s, %s\n", class(x)[1L], x$name, .ag_count_words(n, "parameter")))
  }
  invisible(x)
}

#' Training and evaluation mode
#'
#' Dropout is active and batch norm uses batch statistics in training mode;
#' in evaluation mode dropout is the identity and batch norm uses its running
#' statistics. Containers pass the mode on to their layers.
#'
#' @param model A layer or an `ag_sequential`.
#' @return `model`, invisibly.
#' @name ag_mode
#' @examples
#' model <- ag_sequential(ag_linear(2, 2), ag_dropout(0.5))
#' ag_eval(model)
#' model$layers[[2]]$training
#' ag_train(model)
#' model$layers[[2]]$training
NULL

#' @rdname ag_mode
#' @export
ag_train <- function(model) .ag_set_mode(model, TRUE)

#' @rdname ag_mode
#' @export
ag_eval <- function(model) .ag_set_mode(model, FALSE)

.ag_set_mode <- function(model, training) {
  if (is.environment(model)) {
    model$training <- training
    if (is.list(model$layers)) for (l in model$layers) .ag_set_mode(l, training)
  }
  invisible(model)
}

#' Dropout
#'
#' In training mode, zeroes each element with probability `rate` and scales
#' the others by `1 / (1 - rate)`; in evaluation mode, the identity.
#' @param rate Drop probability in `[0, 1)`.
#' @return A layer.
#' @export
#' @examples
#' drop <- ag_dropout(0.5)
#' drop$forward(ag_tensor(matrix(1, 2, 4)))$data
ag_dropout <- function(rate) {
  if (!is.numeric(rate) || length(rate) != 1L || is.na(rate) || rate < 0 || rate >= 1) {
    .abort("`rate` must be a number in [0, 1)")
  }
  env <- .ag_layer("ag_dropout", sprintf("dropout(%g)", rate))
  env$rate <- as.double(rate)
  env$forward <- function(x) {
    if (!isTRUE(env$training) || env$rate == 0) return(x)
    d <- if (is_ag_tensor(x)) x$shape else dim(.ag_num(x, "x"))
    keep <- stats::runif(d[1L] * d[2L]) >= env$rate
    ag_mul(x, matrix(keep / (1 - env$rate), d[1L], d[2L]))
  }
  env$parameters <- function() list()
  env
}

#' Batch normalisation
#'
#' Normalises each feature (row) over the batch, then scales by `gamma` and
#' shifts by `beta` (both `[num_features, 1]`, learnt). In training mode it
#' uses the batch's mean and (biased) variance, differentiated exactly, and
#' updates `running_mean` and `running_var` with `momentum`; in evaluation
#' mode it uses those running statistics.
#' @param num_features Number of rows of the input.
#' @param eps Added to the variance.
#' @param momentum Weight of the batch in the running statistics.
#' @return A layer with `gamma`, `beta`, `running_mean`, `running_var`.
#' @export
#' @examples
#' bn <- ag_batch_norm(3)
#' y <- bn$forward(ag_tensor(matrix(rnorm(12), 3, 4)))
#' round(rowMeans(y$data), 10)
ag_batch_norm <- function(num_features, eps = 1e-05, momentum = 0.1) {
  num_features <- .ag_count(num_features, "num_features")
  env <- .ag_layer("ag_batch_norm", sprintf("batch_norm(%d)", num_features))
  env$num_features <- num_features
  env$eps <- .ag_hyper(eps, "eps", 0)
  env$momentum <- .ag_hyper(momentum, "momentum", 0, 1)
  env$gamma <- ag_param(matrix(1, num_features, 1L))
  env$beta <- ag_param(matrix(0, num_features, 1L))
  env$running_mean <- matrix(0, num_features, 1L)
  env$running_var <- matrix(1, num_features, 1L)
  env$forward <- function(x) {
    f <- env$num_features
    if (isTRUE(env$training)) {
      r <- .ag_op("batch_norm", list(x, env$gamma, env$beta), c(env$eps, 1), aux = TRUE)
      m <- env$momentum
      env$running_mean <- (1 - m) * env$running_mean + m * matrix(r[[2L]][seq_len(f)], f, 1L)
      env$running_var <- (1 - m) * env$running_var + m * matrix(r[[2L]][f + seq_len(f)], f, 1L)
      r[[1L]]
    } else {
      .ag_op("batch_norm", list(x, env$gamma, env$beta, env$running_mean, env$running_var),
             c(env$eps, 0))
    }
  }
  env$parameters <- function() list(gamma = env$gamma, beta = env$beta)
  env
}

#' Embedding lookup
#'
#' Maps 0-based indices to columns of a learnt table `weight`
#' `[dim, vocab_size]`; the gradient flows only into the looked-up columns.
#' @param vocab_size Number of distinct indices.
#' @param dim Size of each embedding.
#' @return A layer whose `forward(idx)` returns a `[dim, length(idx)]` tensor.
#' @export
#' @examples
#' emb <- ag_embedding(10, 4)
#' dim(emb$forward(c(0L, 3L, 9L)))
ag_embedding <- function(vocab_size, dim) {
  vocab_size <- .ag_count(vocab_size, "vocab_size")
  dim <- .ag_count(dim, "dim")
  .ag_check_size(as.double(vocab_size) * dim, "the embedding table")
  env <- .ag_layer("ag_embedding", sprintf("embedding(%d, %d)", vocab_size, dim))
  env$vocab_size <- vocab_size
  env$dim <- dim
  lim <- sqrt(1 / vocab_size)
  env$weight <- ag_param(matrix(stats::runif(vocab_size * dim, -lim, lim), dim, vocab_size))
  env$forward <- function(idx) {
    i <- if (is_ag_tensor(idx)) .ag_data(idx) else idx
    if (!is.numeric(i) || anyNA(i) || any(i != round(i))) {
      .abort("embedding indices must be whole numbers (0-based)")
    }
    bad <- which(i < 0 | i >= env$vocab_size)
    if (length(bad)) {
      .abort(sprintf("embedding index %s (position %d) is out of range 0..%d (0-based, vocab_size = %d)",
                     format(i[bad[1L]], scientific = FALSE), bad[1L], env$vocab_size - 1L, env$vocab_size))
    }
    .ag_op("gather", list(env$weight), idx = as.integer(i))
  }
  env$parameters <- function() list(weight = env$weight)
  env
}

#' Multi-head attention
#'
#' Scaled dot-product attention over `n_heads` heads, on `[d_model, seq]`
#' tensors (columns are tokens). `forward(q, k = q, v = k, causal_mask =
#' FALSE)`: projections `W_q`, `W_k`, `W_v` (`[d_model, d_model]`), per head
#' `softmax(t(k_h) %*% q_h / sqrt(d_k))` over the keys, the weighted values,
#' heads stacked by rows, then `W_o` and the bias `b_o`. With `causal_mask`,
#' query `i` attends only to keys `j <= i`.
#' @param d_model Model dimension (a multiple of `n_heads`).
#' @param n_heads Number of heads.
#' @param dropout Dropout rate on the attention weights (training mode).
#' @param bias Learn the output bias `b_o`.
#' @return A layer.
#' @export
#' @examples
#' mha <- ag_multihead_attention(8, 2)
#' x <- ag_tensor(matrix(rnorm(8 * 5), 8, 5))
#' dim(mha$forward(x, causal_mask = TRUE))
ag_multihead_attention <- function(d_model, n_heads, dropout = 0, bias = TRUE) {
  d_model <- .ag_count(d_model, "d_model")
  n_heads <- .ag_count(n_heads, "n_heads")
  .ag_check_size(as.double(d_model) * d_model, "each projection matrix")
  if (!is.numeric(dropout) || length(dropout) != 1L || is.na(dropout) || dropout < 0 || dropout >= 1) {
    .abort("`dropout` must be a number in [0, 1)")
  }
  if (!is.logical(bias) || length(bias) != 1L || is.na(bias)) .abort("`bias` must be TRUE or FALSE")
  if (d_model %% n_heads != 0L) .abort("`d_model` must be a multiple of `n_heads`")
  env <- .ag_layer("ag_multihead_attention", sprintf("multihead_attention(%d, %d heads)", d_model, n_heads))
  env$d_model <- d_model
  env$n_heads <- n_heads
  env$d_k <- d_model %/% n_heads
  env$dropout <- as.double(dropout)
  for (w in c("W_q", "W_k", "W_v", "W_o")) env[[w]] <- ag_param(.ag_glorot(d_model, d_model))
  env$b_o <- if (isTRUE(bias)) ag_param(matrix(0, d_model, 1L)) else NULL
  env$forward <- function(q, k = q, v = k, causal_mask = FALSE) {
    Q <- ag_matmul(env$W_q, q)
    K <- ag_matmul(env$W_k, k)
    V <- ag_matmul(env$W_v, v)
    n_q <- Q$shape[2L]
    n_k <- K$shape[2L]
    mask <- NULL
    if (isTRUE(causal_mask)) {
      mask <- matrix(0, n_k, n_q)
      mask[row(mask) > col(mask)] <- -Inf
    }
    dk <- env$d_k
    heads <- vector("list", env$n_heads)
    for (h in seq_len(env$n_heads)) {
      rows <- c((h - 1L) * dk, h * dk)
      qh <- .ag_op("slice_rows", list(Q), rows)
      kh <- .ag_op("slice_rows", list(K), rows)
      vh <- .ag_op("slice_rows", list(V), rows)
      s <- ag_scale(ag_matmul(ag_transpose(kh), qh), 1 / sqrt(dk))  # [n_k, n_q]
      if (!is.null(mask)) s <- ag_add(s, mask)
      a <- ag_softmax(s)                                            # over keys
      if (isTRUE(env$training) && env$dropout > 0) {
        keep <- stats::runif(n_k * n_q) >= env$dropout
        a <- ag_mul(a, matrix(keep / (1 - env$dropout), n_k, n_q))
      }
      heads[[h]] <- ag_matmul(vh, a)                                # [dk, n_q]
    }
    out <- ag_matmul(env$W_o, .ag_op("concat_rows", heads))
    if (!is.null(env$b_o)) out <- ag_add(out, env$b_o)
    out
  }
  env$parameters <- function() {
    p <- list(W_q = env$W_q, W_k = env$W_k, W_v = env$W_v, W_o = env$W_o)
    if (!is.null(env$b_o)) p$b_o <- env$b_o
    p
  }
  env
}
