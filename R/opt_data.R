# ggml's optimisation API, part 1: constants, datasets and results.

#' Loss and optimizer types of ggml's optimisation API
#'
#' Integer constants as ggml numbers them: losses mean (0), sum (1),
#' cross entropy (2) and mean squared error (3); optimizers AdamW (0) and
#' SGD (1). `ggml_opt_optimizer_name()` names an optimizer type.
#'
#' @param optimizer_type An optimizer type.
#' @return An integer (`ggml_opt_optimizer_name()`: a string).
#' @family optimization
#' @export
#' @examples
#' ggml_opt_loss_type_mean()
#' ggml_opt_loss_type_sum()
#' ggml_opt_loss_type_cross_entropy()
#' ggml_opt_loss_type_mse()
#' ggml_opt_optimizer_name(ggml_opt_optimizer_type_adamw())
#' ggml_opt_optimizer_name(ggml_opt_optimizer_type_sgd())
ggml_opt_loss_type_mean <- function() 0L

#' @rdname ggml_opt_loss_type_mean
#' @export
ggml_opt_loss_type_sum <- function() 1L

#' @rdname ggml_opt_loss_type_mean
#' @export
ggml_opt_loss_type_cross_entropy <- function() 2L

#' @rdname ggml_opt_loss_type_mean
#' @export
ggml_opt_loss_type_mse <- function() 3L

#' @rdname ggml_opt_loss_type_mean
#' @export
ggml_opt_optimizer_type_adamw <- function() 0L

#' @rdname ggml_opt_loss_type_mean
#' @export
ggml_opt_optimizer_type_sgd <- function() 1L

#' @rdname ggml_opt_loss_type_mean
#' @export
ggml_opt_optimizer_name <- function(optimizer_type) {
  .opt_optimizer_arg(optimizer_type)
  c("adamw", "sgd")[optimizer_type + 1L]
}

.opt_loss_arg <- function(loss_type, call = sys.call(-1L)) {
  if (!is.numeric(loss_type) || length(loss_type) != 1L || !loss_type %in% 0:3) {
    .abort("`loss_type` must be a ggml_opt_loss_type_*() constant (0 to 3)", call = call)
  }
  as.integer(loss_type)
}

.opt_optimizer_arg <- function(optimizer, call = sys.call(-1L)) {
  if (!is.numeric(optimizer) || length(optimizer) != 1L || !optimizer %in% 0:1) {
    .abort("`optimizer` must be ggml_opt_optimizer_type_adamw() or ggml_opt_optimizer_type_sgd()", call = call)
  }
  as.integer(optimizer)
}

#' Datasets for ggml's optimisation API
#'
#' A dataset holds `ndata` datapoints of `ne_datapoint` values (a tensor
#' `[ne_datapoint, ndata]`) and their labels (`[ne_label, ndata]`; none when
#' `ne_label` is 0), in host memory. Fill them with
#' [ggml_backend_tensor_set_data()] on `ggml_opt_dataset_data()` and
#' `ggml_opt_dataset_labels()`. `ggml_opt_dataset_shuffle()` shuffles the
#' order in which the first `idata` datapoints (all with `-1`) are visited;
#' `ggml_opt_dataset_get_batch()` copies batch `ibatch` (0-based, of the size
#' of `data_batch`'s last dimension) in that order into `data_batch` and
#' `labels_batch`.
#'
#' @param type_data,type_label Tensor types (`GGML_TYPE_F32`, or
#'   `GGML_TYPE_I32` for indices).
#' @param ne_datapoint,ne_label Values per datapoint and per label.
#' @param ndata Number of datapoints.
#' @param ndata_shard Datapoints shuffled together as one block.
#' @param dataset A `ggml_opt_dataset`.
#' @param opt_ctx An optimizer context (its random state is R's).
#' @param idata Datapoints to shuffle (`-1`: all).
#' @param data_batch,labels_batch Tensors with memory to copy a batch into.
#' @param ibatch 0-based batch index.
#' @return `ggml_opt_dataset_init()`: a `ggml_opt_dataset`.
#'   `ggml_opt_dataset_data()`, `ggml_opt_dataset_labels()`: tensors (labels
#'   `NULL` when there are none). `ggml_opt_dataset_ndata()`: a number. The
#'   others: `NULL`, invisibly.
#' @family optimization
#' @export
#' @examples
#' ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, ne_datapoint = 3,
#'                             ne_label = 1, ndata = 4)
#' ggml_backend_tensor_set_data(ggml_opt_dataset_data(ds), 1:12)
#' ggml_backend_tensor_set_data(ggml_opt_dataset_labels(ds), c(10, 20, 30, 40))
#' ggml_opt_dataset_ndata(ds)
#' # batches of two datapoints
#' cpu <- ggml_backend_cpu_init()
#' ctx <- ggml_init(4 * ggml_tensor_overhead(), no_alloc = TRUE)
#' xb <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' yb <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 2)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_opt_dataset_get_batch(ds, xb, yb, ibatch = 1)
#' ggml_backend_tensor_get_data(xb)
#' ggml_backend_tensor_get_data(yb)
#' set.seed(1)
#' ggml_opt_dataset_shuffle(NULL, ds)
#' ggml_opt_dataset_get_batch(ds, xb, yb, ibatch = 0)
#' ggml_backend_tensor_get_data(yb)
#' ggml_backend_buffer_free(buf)
#' ggml_free(ctx)
#' ggml_backend_free(cpu)
#' ggml_opt_dataset_free(ds)
ggml_opt_dataset_init <- function(type_data, type_label, ne_datapoint, ne_label, ndata,
                                  ndata_shard = 1) {
  ne_datapoint <- .nn_int(ne_datapoint, "ne_datapoint")
  ne_label <- .nn_int(ne_label, "ne_label", min = 0L)
  ndata <- .nn_int(ndata, "ndata")
  ndata_shard <- .nn_int(ndata_shard, "ndata_shard")
  if (ndata %% ndata_shard != 0L) .abort("`ndata` must be a multiple of `ndata_shard`")
  bytes <- 4 * (ne_datapoint + ne_label) * ndata + 4 * ggml_tensor_overhead() + 1024
  ctx <- ggml_init(bytes, no_alloc = FALSE)
  env <- new.env(parent = emptyenv())
  env$ctx <- ctx
  env$data <- ggml_new_tensor_2d(ctx, type_data, ne_datapoint, ndata)
  env$labels <- if (ne_label > 0L) ggml_new_tensor_2d(ctx, type_label, ne_label, ndata)
  env$ne_datapoint <- ne_datapoint
  env$ne_label <- ne_label
  env$ndata <- ndata
  env$shard <- ndata_shard
  env$perm <- seq_len(ndata %/% ndata_shard) - 1L
  env$freed <- FALSE
  class(env) <- "ggml_opt_dataset"
  env
}

.opt_check_dataset <- function(dataset, call = sys.call(-1L)) {
  if (!inherits(dataset, "ggml_opt_dataset")) {
    .abort("`dataset` must be a ggml_opt_dataset (from ggml_opt_dataset_init())", call = call)
  }
  if (isTRUE(dataset$freed)) .abort("this dataset was freed (ggml_opt_dataset_free())", call = call)
  dataset
}

#' @rdname ggml_opt_dataset_init
#' @export
ggml_opt_dataset_free <- function(dataset) {
  if (!inherits(dataset, "ggml_opt_dataset")) .abort("`dataset` must be a ggml_opt_dataset")
  if (!isTRUE(dataset$freed)) ggml_free(dataset$ctx)
  dataset$freed <- TRUE
  invisible(NULL)
}

#' @rdname ggml_opt_dataset_init
#' @export
ggml_opt_dataset_ndata <- function(dataset) .opt_check_dataset(dataset)$ndata

#' @rdname ggml_opt_dataset_init
#' @export
ggml_opt_dataset_data <- function(dataset) .opt_check_dataset(dataset)$data

#' @rdname ggml_opt_dataset_init
#' @export
ggml_opt_dataset_labels <- function(dataset) .opt_check_dataset(dataset)$labels

#' @rdname ggml_opt_dataset_init
#' @export
ggml_opt_dataset_shuffle <- function(opt_ctx, dataset, idata = -1) {
  .opt_check_dataset(dataset)
  if (!is.null(opt_ctx)) .opt_check_ctx(opt_ctx)
  n <- length(dataset$perm)
  k <- if (is.numeric(idata) && length(idata) == 1L && !is.na(idata) && idata < 0) n else {
    idata <- .nn_int(idata, "idata", min = 0L)
    if (idata > dataset$ndata) .abort(sprintf("`idata` (%d) is above the number of datapoints (%d)", idata, dataset$ndata))
    idata %/% dataset$shard
  }
  if (k > 1L) dataset$perm[seq_len(k)] <- dataset$perm[sample.int(k)]
  invisible(NULL)
}

# 0-based datapoint indices of batch `ibatch` of `size` in shuffled order.
.opt_batch_index <- function(dataset, ibatch, size) {
  first <- ibatch * size
  if (first + size > dataset$ndata) {
    .abort(sprintf("batch %d of %d datapoints runs past the dataset's %d datapoints", ibatch, size, dataset$ndata),
           call = NULL)
  }
  pos <- first + seq_len(size) - 1L
  dataset$perm[pos %/% dataset$shard + 1L] * dataset$shard + pos %% dataset$shard
}

# Columns `idx` (0-based) of a [ne, ndata] dataset tensor, as a matrix.
.opt_columns <- function(t, ne, idx, cache = NULL) {
  if (!is.null(cache)) return(cache[, idx + 1L, drop = FALSE])
  ndata <- ggml_nelements(t) / ne
  if (length(idx) * 8 >= ndata) {
    # Most of the dataset: one read.
    return(matrix(as.double(ggml_backend_tensor_get_data(t)), ne)[, idx + 1L, drop = FALSE])
  }
  m <- matrix(0, ne, length(idx))
  size <- ggml_type_size(ggml_tensor_type(t))
  for (j in seq_along(idx)) {
    m[, j] <- ggml_backend_tensor_get_data(t, offset = idx[j] * ne * size, n_elements = ne)
  }
  m
}

#' @rdname ggml_opt_dataset_init
#' @export
ggml_opt_dataset_get_batch <- function(dataset, data_batch, labels_batch = NULL, ibatch) {
  .opt_check_dataset(dataset)
  sh <- ggml_tensor_shape(data_batch)
  if (prod(sh) %% dataset$ne_datapoint != 0) {
    .abort(sprintf("`data_batch` (%s) must hold whole datapoints of %d values",
                   paste(sh, collapse = " x "), dataset$ne_datapoint))
  }
  size <- prod(sh) / dataset$ne_datapoint
  ibatch <- .nn_int(ibatch, "ibatch", min = 0L)
  idx <- .opt_batch_index(dataset, ibatch, size)
  ggml_backend_tensor_set_data(data_batch, .opt_columns(dataset$data, dataset$ne_datapoint, idx))
  if (!is.null(labels_batch)) {
    if (is.null(dataset$labels)) .abort("the dataset has no labels (ne_label = 0)")
    ggml_backend_tensor_set_data(labels_batch, .opt_columns(dataset$labels, dataset$ne_label, idx))
  }
  invisible(NULL)
}

#' @export
print.ggml_opt_dataset <- function(x, ...) {
  if (isTRUE(x$freed)) cat("<ggml_opt_dataset> (freed)\n") else
    cat(sprintf("<ggml_opt_dataset> %d datapoints of %d values, labels of %d\n", x$ndata, x$ne_datapoint,
                x$ne_label))
  invisible(x)
}

#' Results of ggml's optimisation API
#'
#' A result accumulates the losses, correct predictions and predictions of
#' the batches evaluated by [ggml_opt_epoch()] or [ggml_opt_eval()].
#'
#' @param result A `ggml_opt_result`.
#' @return `ggml_opt_result_init()`: a `ggml_opt_result`.
#'   `ggml_opt_result_ndata()`: datapoints seen. `ggml_opt_result_loss()`:
#'   `c(loss = , uncertainty = )` (the mean batch loss and its standard
#'   error). `ggml_opt_result_accuracy()`: `c(accuracy = , uncertainty = )`.
#'   `ggml_opt_result_pred()`: the predicted classes (0-based integers). The
#'   others: `NULL`, invisibly.
#' @family optimization
#' @export
#' @examples
#' # a two-class linear model, evaluated once on four datapoints
#' cpu <- ggml_backend_cpu_init()
#' sched <- ggml_backend_sched_new(list(cpu))
#' ctx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
#' x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 4)
#' w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)
#' ggml_set_param(w)
#' out <- ggml_mul_mat(ctx, w, x)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_backend_tensor_set_data(w, c(1, 0, 0, 1))
#' opt <- ggml_opt_init(sched, ggml_opt_loss_type_cross_entropy(),
#'                      ctx_compute = ctx, inputs = x, outputs = out)
#' ggml_opt_alloc(opt, backward = FALSE)
#' ggml_backend_tensor_set_data(x, c(2, 0, 0, 2, 1, 3, 3, 1))
#' ggml_backend_tensor_set_data(ggml_opt_labels(opt), c(1, 0, 0, 1, 1, 0, 1, 0))
#' r <- ggml_opt_result_init()
#' ggml_opt_eval(opt, r)
#' ggml_opt_result_ndata(r)
#' ggml_opt_result_loss(r)
#' ggml_opt_result_accuracy(r)
#' ggml_opt_result_pred(r)
#' ggml_opt_result_reset(r)
#' ggml_opt_result_ndata(r)
#' ggml_opt_result_free(r)
#' ggml_opt_free(opt)
ggml_opt_result_init <- function() {
  env <- new.env(parent = emptyenv())
  class(env) <- "ggml_opt_result"
  .opt_result_clear(env)
}

.opt_result_clear <- function(r) {
  r$ndata <- 0
  r$losses <- numeric(0)
  r$ncorrect <- 0
  r$has_acc <- FALSE
  r$pred <- integer(0)
  r$freed <- FALSE
  invisible(r)
}

.opt_check_result <- function(result, call = sys.call(-1L)) {
  if (!inherits(result, "ggml_opt_result")) {
    .abort("`result` must be a ggml_opt_result (from ggml_opt_result_init())", call = call)
  }
  if (isTRUE(result$freed)) .abort("this result was freed (ggml_opt_result_free())", call = call)
  result
}

#' @rdname ggml_opt_result_init
#' @export
ggml_opt_result_free <- function(result) {
  if (!inherits(result, "ggml_opt_result")) .abort("`result` must be a ggml_opt_result")
  result$freed <- TRUE
  invisible(NULL)
}

#' @rdname ggml_opt_result_init
#' @export
ggml_opt_result_reset <- function(result) {
  .opt_check_result(result)
  .opt_result_clear(result)
  invisible(NULL)
}

#' @rdname ggml_opt_result_init
#' @export
ggml_opt_result_ndata <- function(result) .opt_check_result(result)$ndata

#' @rdname ggml_opt_result_init
#' @export
ggml_opt_result_loss <- function(result) {
  l <- .opt_check_result(result)$losses
  n <- length(l)
  c(loss = if (n) mean(l) else NA_real_, uncertainty = if (n > 1L) stats::sd(l) / sqrt(n) else NA_real_)
}

#' @rdname ggml_opt_result_init
#' @export
ggml_opt_result_accuracy <- function(result) {
  r <- .opt_check_result(result)
  if (!r$has_acc || r$ndata == 0) return(c(accuracy = NA_real_, uncertainty = NA_real_))
  a <- r$ncorrect / r$ndata
  c(accuracy = a, uncertainty = if (r$ndata > 1) sqrt(a * (1 - a) / (r$ndata - 1)) else NA_real_)
}

#' @rdname ggml_opt_result_init
#' @export
ggml_opt_result_pred <- function(result) .opt_check_result(result)$pred

#' @export
print.ggml_opt_result <- function(x, ...) {
  l <- ggml_opt_result_loss(x)
  a <- ggml_opt_result_accuracy(x)
  cat(sprintf("<ggml_opt_result> %d datapoints, loss %s, accuracy %s\n", as.integer(x$ndata),
              format(l[["loss"]], digits = 4), format(a[["accuracy"]], digits = 4)))
  invisible(x)
}
