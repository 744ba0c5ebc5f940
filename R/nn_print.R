# Printing models and training histories.

# The plan of a model for display, or NULL when its shapes cannot be known yet.
.nn_display_plan <- function(model) {
  if (!is.null(model$compilation$runtime)) return(model$compilation$runtime$plan)
  tryCatch({
    if (inherits(model, "ggml_sequential_model")) .nn_plan_seq(nn_infer_shapes(model)) else .nn_plan_fn(model)
  }, error = function(e) NULL)
}

.nn_layer_rows <- function(model) {
  plan <- .nn_display_plan(model)
  if (inherits(model, "ggml_sequential_model")) {
    rows <- lapply(seq_along(model$layers), function(i) {
      l <- model$layers[[i]]
      st <- if (!is.null(plan)) plan$steps[[i + 1L]]
      list(name = l$name, type = l$type, shape = if (!is.null(st)) st$out_shape,
           params = if (!is.null(st)) .nn_count_params(st) else NA_real_, trainable = isTRUE(l$trainable),
           key = if (!is.null(st)) st$key)
    })
    return(rows)
  }
  if (is.null(plan)) {
    nodes <- nn_topo_sort(model$outputs)
    return(lapply(nodes, function(n) list(name = n$config$name %||% n$id, type = n$node_type, shape = NULL,
                                          params = NA_real_, trainable = !isFALSE(n$trainable), key = NULL)))
  }
  seen <- character(0)
  lapply(plan$steps, function(st) {
    shared <- !is.null(st$key) && st$key %in% seen
    if (!is.null(st$key)) seen <<- c(seen, st$key)
    list(name = st$label, type = if (shared) paste0(st$type, " (shared)") else st$type,
         shape = st$out_shape, params = if (shared) 0 else .nn_count_params(st),
         trainable = isTRUE(st$trainable), key = st$key,
         parents = vapply(st$parents, function(p) .nn_step(plan, p)$label, ""))
  })
}

.nn_shape_txt <- function(s) if (is.null(s)) "?" else paste0("(", paste(s, collapse = ", "), ")")

.nn_fmt_int <- function(n) if (is.na(n)) "?" else format(n, big.mark = ",", scientific = FALSE)

#' @export
print.ggml_sequential_model <- function(x, ...) {
  cat("ggmlR Sequential Model\n")
  if (length(x$layers) == 0L) {
    cat("  (no layers)\n")
    return(invisible(x))
  }
  rows <- .nn_layer_rows(x)
  cat(sprintf("  %-22s %-22s %-18s %s\n", "Layer (type)", "Output Shape", "Params", ""))
  for (r in rows) {
    cat(sprintf("  %-22s %-22s %-18s%s\n", sprintf("%s (%s)", r$name, r$type), .nn_shape_txt(r$shape),
                .nn_fmt_int(r$params), if (r$trainable) "" else " frozen"))
  }
  total <- sum(vapply(rows, function(r) r$params, numeric(1L)))
  cat(sprintf("Total parameters: %s\n", .nn_fmt_int(total)))
  .nn_print_compiled(x)
  invisible(x)
}

#' @export
print.ggml_functional_model <- function(x, ...) {
  cat(sprintf("ggmlR Functional Model: %d input%s, %d output%s\n", length(x$inputs),
              if (length(x$inputs) == 1L) "" else "s", length(x$outputs),
              if (length(x$outputs) == 1L) "" else "s"))
  rows <- .nn_layer_rows(x)
  cat(sprintf("  %-26s %-18s %-12s %s\n", "Layer (type)", "Output Shape", "Params", "Inputs"))
  for (r in rows) {
    cat(sprintf("  %-26s %-18s %-12s %s%s\n", sprintf("%s (%s)", r$name, r$type), .nn_shape_txt(r$shape),
                .nn_fmt_int(r$params), paste(r$parents %||% character(0), collapse = ", "),
                if (r$trainable || is.null(r$key)) "" else " [frozen]"))
  }
  total <- sum(vapply(rows, function(r) r$params, numeric(1L)))
  cat(sprintf("Total parameters: %s\n", .nn_fmt_int(total)))
  .nn_print_compiled(x)
  invisible(x)
}

.nn_print_compiled <- function(x) {
  if (!isTRUE(x$compiled)) {
    cat("Compiled: no\n")
    return(invisible())
  }
  c <- x$compilation
  cat(sprintf("Compiled: optimizer %s, loss %s, on %s\n", c$optimizer, c$loss,
              c$device_description %||% c$backend_used))
}

#' Summary of a model
#'
#' Prints the input shape, every layer with its output shape and number of
#' parameters, the trainable and frozen totals and the memory the weights
#' take (f32).
#'
#' @param object A `ggml_sequential_model` or `ggml_functional_model`.
#' @param ... Unused.
#' @return `object`, invisibly.
#' @family models
#' @export
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(16, activation = "relu", input_shape = 4) |>
#'   ggml_layer_dense(3, activation = "softmax")
#' summary(model)
summary.ggml_sequential_model <- function(object, ...) {
  cat(sprintf("ggmlR %s Model Summary\n",
              if (inherits(object, "ggml_sequential_model")) "Sequential" else "Functional"))
  shapes <- if (inherits(object, "ggml_sequential_model")) list(object$input_shape) else
    lapply(object$inputs, function(n) n$config$shape)
  cat(sprintf("Input shape: %s\n", paste(vapply(shapes, .nn_shape_txt, ""), collapse = ", ")))
  rows <- .nn_layer_rows(object)
  if (length(rows) == 0L) {
    cat("  (no layers)\n")
    return(invisible(object))
  }
  cat(sprintf("  %-4s %-26s %-18s %-12s %-12s\n", "#", "Layer (type)", "Output Shape", "Trainable", "Frozen"))
  tr <- 0
  fr <- 0
  for (i in seq_along(rows)) {
    r <- rows[[i]]
    p <- r$params
    if (r$trainable) tr <- tr + p else fr <- fr + p
    cat(sprintf("  %-4d %-26s %-18s %-12s %-12s\n", i, sprintf("%s (%s)", r$name, r$type),
                .nn_shape_txt(r$shape), .nn_fmt_int(if (r$trainable) p else 0),
                .nn_fmt_int(if (r$trainable) 0 else p)))
  }
  cat(sprintf("Total parameters: %s\n  Trainable: %s\n  Non-trainable: %s\n",
              .nn_fmt_int(tr + fr), .nn_fmt_int(tr), .nn_fmt_int(fr)))
  cat(sprintf("Weight memory (f32): %s\n", if (is.na(tr + fr)) "?" else .fmt_bytes(4 * (tr + fr))))
  .nn_print_compiled(object)
  invisible(object)
}

#' @rdname summary.ggml_sequential_model
#' @export
summary.ggml_functional_model <- summary.ggml_sequential_model

#' Training history
#'
#' `model$history` after [ggml_fit()]: per-epoch `train_loss`,
#' `train_accuracy`, `val_loss`, `val_accuracy` (`NA` where there is none)
#' and `epochs`. `plot()` draws the loss and accuracy curves;
#' `as.data.frame()` gives one row per epoch.
#'
#' @param x A `ggml_history`.
#' @param ... Passed to [graphics::plot()] (`plot`), unused otherwise.
#' @return `print()` and `plot()`: `x`, invisibly. `as.data.frame()`: a data
#'   frame.
#' @name ggml_history
#' @family training
#' @examples
#' h <- structure(list(epochs = 1:3, train_loss = c(1, 0.6, 0.4),
#'                     train_accuracy = c(0.5, 0.7, 0.8), val_loss = c(1.1, 0.7, 0.5),
#'                     val_accuracy = c(0.5, 0.6, 0.75)), class = "ggml_history")
#' h
#' plot(h)
#' as.data.frame(h)
NULL

#' @rdname ggml_history
#' @export
print.ggml_history <- function(x, ...) {
  df <- as.data.frame.ggml_history(x)
  cat(sprintf("ggmlR Training History: %d epoch%s\n", nrow(df), if (nrow(df) == 1L) "" else "s"))
  keep <- vapply(df, function(col) !all(is.na(col)), logical(1L))
  if (nrow(df)) print(format(df[, keep, drop = FALSE], digits = 4), row.names = FALSE)
  invisible(x)
}

#' @rdname ggml_history
#' @param row.names,optional Unused.
#' @export
as.data.frame.ggml_history <- function(x, row.names = NULL, optional = FALSE, ...) {
  n <- length(x$train_loss)
  col <- function(v) if (length(v) == n) as.double(v) else rep(NA_real_, n)
  data.frame(epoch = x$epochs %||% seq_len(n), train_loss = col(x$train_loss),
             train_accuracy = col(x$train_accuracy), val_loss = col(x$val_loss),
             val_accuracy = col(x$val_accuracy))
}

#' @rdname ggml_history
#' @export
plot.ggml_history <- function(x, ...) {
  df <- as.data.frame.ggml_history(x)
  if (nrow(df) == 0L) .abort("the history is empty: nothing to plot")
  has_acc <- any(!is.na(df$train_accuracy)) || any(!is.na(df$val_accuracy))
  op <- graphics::par(mfrow = c(1L, if (has_acc) 2L else 1L))
  on.exit(graphics::par(op))
  panel <- function(tr, va, ylab) {
    rng <- range(c(tr, va), na.rm = TRUE)
    graphics::plot(df$epoch, tr, type = "o", pch = 16, lwd = 2, col = "steelblue", ylim = rng,
                   xlab = "epoch", ylab = ylab, ...)
    if (any(!is.na(va))) {
      graphics::lines(df$epoch, va, type = "o", pch = 16, lwd = 2, col = "darkorange")
      graphics::legend("topright", c("training", "validation"), col = c("steelblue", "darkorange"),
                       lwd = 2, bty = "n")
    }
  }
  panel(df$train_loss, df$val_loss, "loss")
  if (has_acc) panel(df$train_accuracy, df$val_accuracy, "accuracy")
  invisible(x)
}
