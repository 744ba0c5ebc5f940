# The data of ag_fit() and predict(): the layout of the features (samples as
# columns or as rows) and the targets as the loss needs them, with errors
# that say what was wrong and what to pass instead.

.ag_classification_losses <- c("ag_softmax_cross_entropy_loss", "ag_cross_entropy_loss")

# The name of a loss function: the package's own by identity, else the
# expression the caller wrote when it is a name, else "a custom loss".
.ag_loss_name <- function(loss, expr) {
  own <- list(ag_softmax_cross_entropy_loss = ag_softmax_cross_entropy_loss,
              ag_cross_entropy_loss = ag_cross_entropy_loss, ag_mse_loss = ag_mse_loss)
  for (nm in names(own)) if (identical(loss, own[[nm]])) return(nm)
  if (is.name(expr)) as.character(expr) else "a custom loss"
}

.ag_loss_kind <- function(loss_name) {
  if (loss_name %in% .ag_classification_losses) "classification"
  else if (identical(loss_name, "ag_mse_loss")) "regression"
  else "custom"
}

# Features the model's first layer takes (NULL when it cannot be told);
# NA for a layer that keeps the shape (dropout), to look further.
.ag_model_inputs <- function(m) {
  if (inherits(m, "ag_sequential")) {
    for (l in m$layers) {
      r <- .ag_model_inputs(l)
      if (!identical(r, NA)) return(r)
    }
    return(NULL)
  }
  if (inherits(m, "ag_linear")) return(m$W$shape[2L])
  if (inherits(m, "ag_batch_norm")) return(m$num_features)
  if (inherits(m, "ag_multihead_attention")) return(m$d_model)
  if (inherits(m, "ag_dropout")) return(NA)
  NULL
}

# Outputs of the model: the rows of its last parameter (the bias or the
# last weight).
.ag_model_outputs <- function(m) {
  p <- .ag_layer_params(m)
  if (!length(p)) return(NULL)
  p[[length(p)]]$shape[1L]
}

# Samples in `y`, when its form tells (NULL for a matrix, which may come
# either way).
.ag_target_count <- function(y) {
  if (is.data.frame(y)) return(nrow(y))
  if (is_ag_tensor(y) || !is.null(dim(y))) return(NULL)
  length(y)
}

# Features as a double matrix [features, samples] and the layout taken.
.ag_features <- function(x, layout, p_in, n_y, xname, default = "columns", call = sys.call(-1L)) {
  if (is_ag_tensor(x)) x <- .ag_data(x)
  if (is.data.frame(x)) {
    if (identical(layout, "columns")) {
      .abort(sprintf("`%s` is a data frame, whose rows are samples: use layout = \"auto\" or \"rows\"", xname),
             call = call)
    }
    bad <- names(x)[!vapply(x, function(col) is.numeric(col) || is.logical(col), logical(1L))]
    if (length(bad)) {
      .abort(sprintf(paste0("`%s` has columns that are not numbers (%s): drop them, or encode them ",
                            "as numbers (e.g. with model.matrix())"), xname, paste(bad, collapse = ", ")),
             call = call)
    }
    m <- t(data.matrix(x))
    dimnames(m) <- NULL
    storage.mode(m) <- "double"
    return(.ag_checked_features(m, "rows", "a data frame", p_in, xname, call))
  }
  if (!(is.numeric(x) || is.logical(x)) || is.object(x) && !is.matrix(x)) {
    .abort(sprintf("`%s` must be a numeric matrix, a data frame or an ag_tensor, not %s", xname,
                   paste(class(x), collapse = "/")), call = call)
  }
  if (is.null(dim(x))) {
    if (!is.null(p_in) && !is.na(p_in) && p_in > 1L && length(x) == p_in) {
      return(.ag_checked_features(matrix(as.double(x), ncol = 1L), "columns", "a vector: one sample",
                                  p_in, xname, call))
    }
    m <- matrix(as.double(x), nrow = 1L)
    return(.ag_checked_features(m, "rows", "a vector: one feature per sample", p_in, xname, call))
  }
  if (length(dim(x)) != 2L) .abort(sprintf("`%s` must be a matrix, not an array with %d dimensions", xname, length(dim(x))), call = call)
  m <- x
  dimnames(m) <- NULL
  storage.mode(m) <- "double"
  if (layout == "columns") return(.ag_checked_features(m, "columns", "as given", p_in, xname, call))
  if (layout == "rows") return(.ag_checked_features(t(m), "rows", "as given", p_in, xname, call))
  fits_cols <- (is.null(p_in) || nrow(m) == p_in) && (is.null(n_y) || ncol(m) == n_y)
  fits_rows <- (is.null(p_in) || ncol(m) == p_in) && (is.null(n_y) || nrow(m) == n_y)
  known <- c(if (!is.null(p_in)) sprintf("the model takes %d features", p_in),
             if (!is.null(n_y)) sprintf("`y` has %d samples", n_y))
  why <- if (length(known)) paste(known, collapse = " and ") else "the package's convention"
  if (is.null(p_in) && is.null(n_y)) {
    if (default == "rows") return(.ag_checked_features(t(m), "rows", "as in training", p_in, xname, call))
    return(.ag_checked_features(m, "columns", why, p_in, xname, call))
  }
  if (fits_cols) return(.ag_checked_features(m, "columns", why, p_in, xname, call))
  if (fits_rows) return(.ag_checked_features(t(m), "rows", why, p_in, xname, call))
  .abort(sprintf(paste0("`%s` is a %d x %d matrix, which fits neither layout: %s. Give it as ",
                        "[features, samples] or with one sample per row"),
                 xname, nrow(m), ncol(m), why), call = call)
}

.ag_checked_features <- function(m, layout, why, p_in, xname, call) {
  if (!is.null(p_in) && !is.na(p_in) && nrow(m) != p_in) {
    .abort(sprintf("`%s` has %d features per sample (%s) but the model's first layer takes %d",
                   xname, nrow(m), .ag_layout_words(layout), p_in), call = call)
  }
  if (anyNA(m)) {
    bad <- sum(colSums(is.na(m)) > 0)
    .abort(sprintf("`%s` has missing values (NA) in %d sample%s: remove or impute them", xname, bad,
                   if (bad == 1L) "" else "s"), call = call)
  }
  list(x = m, layout = layout, why = why)
}

# Targets as a double matrix [outputs, samples]; `classes` says whether they
# are classes (one-hot), `levels` their names.
.ag_targets <- function(y, n, layout, kind, k, loss_name, levels, yname, call = sys.call(-1L)) {
  if (is_ag_tensor(y)) y <- .ag_data(y)
  if (is.data.frame(y)) {
    if (ncol(y) == 1L) {
      y <- y[[1L]]
    } else {
      bad <- names(y)[!vapply(y, is.numeric, logical(1L))]
      if (length(bad)) .abort(sprintf("`%s` has columns that are not numbers (%s)", yname, paste(bad, collapse = ", ")), call = call)
      y <- t(data.matrix(y))
      dimnames(y) <- NULL
    }
  }
  if (is.character(y)) y <- factor(y, levels = levels %||% sort(unique(y)))
  if (is.logical(y) && is.null(dim(y))) y <- factor(y, levels = c(FALSE, TRUE))
  if (is.factor(y)) {
    if (kind == "regression") {
      .abort(sprintf(paste0("`%s` is a factor (classes) but `loss` is ag_mse_loss, a regression loss: ",
                            "use loss = ag_softmax_cross_entropy_loss for classes"), yname), call = call)
    }
    if (!is.null(levels)) y <- factor(as.character(y), levels = levels)
    .ag_target_len(y, n, yname, call)
    if (anyNA(y)) .abort(sprintf("`%s` has missing or unknown classes (NA): every sample needs one of %s", yname, paste(levels(y), collapse = ", ")), call = call)
    if (nlevels(y) > k) {
      .abort(sprintf("`%s` has %d classes (%s) but the model has %d output%s: give its last layer one output per class",
                     yname, nlevels(y), paste(levels(y), collapse = ", "), k, if (k == 1L) "" else "s"), call = call)
    }
    return(list(y = .ag_onehot(as.integer(y) - 1L, matrix(0, k, 1L), call = call), classes = TRUE,
                levels = levels(y)))
  }
  if (!is.numeric(y)) .abort(sprintf("`%s` must be numbers, a factor or a matrix, not %s", yname, class(y)[1L]), call = call)
  if (anyNA(y)) .abort(sprintf("`%s` has missing values (NA): remove those samples", yname), call = call)
  if (is.null(dim(y))) {
    .ag_target_len(y, n, yname, call)
    whole <- all(y == round(y))
    if (kind == "classification" || kind == "custom" && whole && k > 1L) {
      return(list(y = .ag_labels(y, k, loss_name, yname, call), classes = TRUE, levels = levels))
    }
    if (k != 1L) {
      .abort(sprintf("`%s` has one number per sample but the model has %d outputs: give a matrix with %d rows (or columns, with samples as rows)",
                     yname, k, k), call = call)
    }
    return(list(y = matrix(as.double(y), nrow = 1L), classes = FALSE, levels = NULL))
  }
  m <- y
  storage.mode(m) <- "double"
  if (nrow(m) == n && ncol(m) != n) m <- t(m)
  else if (ncol(m) == n && nrow(m) == n && layout == "rows") m <- t(m)
  if (ncol(m) != n) {
    .abort(sprintf("`x` has %d samples but `%s` (a %d x %d matrix) has neither %d rows nor %d columns",
                   n, yname, nrow(y), ncol(y), n, n), call = call)
  }
  if (kind == "classification") {
    if (nrow(m) == 1L && k > 1L) return(list(y = .ag_labels(m[1L, ], k, loss_name, yname, call), classes = TRUE, levels = levels))
    if (nrow(m) != k) {
      .abort(sprintf("`%s` has %d values per sample but the model has %d outputs", yname, nrow(m), k), call = call)
    }
    if (any(m < 0 | m > 1) || any(abs(colSums(m) - 1) > 1e-6)) {
      .abort(sprintf(paste0("`%s` is a numeric matrix whose columns are not class probabilities (one-hot), ",
                            "but `loss` is %s, a classification loss: for numeric targets use loss = ag_mse_loss"),
                     yname, loss_name), call = call)
    }
    return(list(y = m, classes = TRUE, levels = levels))
  }
  if (nrow(m) != k) {
    .abort(sprintf("`%s` has %d values per sample but the model has %d outputs", yname, nrow(m), k), call = call)
  }
  list(y = m, classes = FALSE, levels = NULL)
}

.ag_target_len <- function(y, n, yname, call) {
  if (length(y) != n) {
    .abort(sprintf("`x` has %d samples but `%s` has %d values", n, yname, length(y)), call = call)
  }
}

# Whole-number class labels 0..k-1 as a one-hot matrix [k, n].
.ag_labels <- function(y, k, loss_name, yname, call) {
  frac <- which(y != round(y))
  if (length(frac)) {
    .abort(sprintf(paste0("`%s` holds numbers that are not whole (e.g. %s), but `loss` is %s, a ",
                          "classification loss, which takes class labels 0..%d or a factor: for a numeric ",
                          "target use loss = ag_mse_loss"),
                   yname, format(y[frac[1L]]), loss_name, max(k - 1L, 1L)), call = call)
  }
  if (k == 1L) {
    .abort(sprintf(paste0("the model has 1 output, and %s over one class is always 0: for a numeric ",
                          "target use loss = ag_mse_loss; for classes give the last layer one output per class"),
                   loss_name), call = call)
  }
  if (any(y < 0 | y >= k)) {
    hint <- if (min(y) >= 1 && max(y) == k) " (they look 1-based: subtract 1, or pass a factor)" else ""
    .abort(sprintf("class labels in `%s` must be whole numbers in 0..%d, one per output of the model, not %s..%s%s",
                   yname, k - 1L, format(min(y)), format(max(y)), hint), call = call)
  }
  .ag_onehot(as.integer(y), matrix(0, k, 1L), call = call)
}

# Features and targets of one data set for ag_fit().
.ag_fit_data <- function(model, x, y, loss, loss_name, layout, levels = NULL, what = "training",
                         call = sys.call(-1L)) {
  xname <- if (what == "validation") "validation[[1]]" else "x"
  yname <- if (what == "validation") "validation[[2]]" else "y"
  k <- .ag_model_outputs(model)
  f <- .ag_features(x, layout, .ag_model_inputs(model), .ag_target_count(y), xname, call = call)
  t <- .ag_targets(y, ncol(f$x), f$layout, .ag_loss_kind(loss_name), k, loss_name, levels, yname, call = call)
  list(x = f$x, y = t$y, classes = t$classes, levels = t$levels, layout = f$layout, why = f$why)
}

.ag_say_layout <- function(d) {
  message(sprintf("ag_fit: %d samples of %d features, %s (%s)", ncol(d$x), nrow(d$x),
                  .ag_layout_words(d$layout), d$why))
}
