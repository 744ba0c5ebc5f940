# ggml's optimisation API, part 3: optimizer contexts, evaluation steps,
# epochs and fits. The forward and backward passes and the optimizer updates
# run on the autograd engine (R/opt_graph.R) on the scheduler's first
# backend: device "gpu" for Vulkan, "cpu" otherwise.

#' Default parameters of ggml's optimisation API
#'
#' @param sched A `ggml_backend_sched`.
#' @param loss_type A loss type ([ggml_opt_loss_type_mse()], ...).
#' @return A list: `loss_type`, `build_type`, `opt_period`, `optimizer` and
#'   the AdamW and SGD settings (`adamw`: `alpha`, `beta1`, `beta2`, `eps`,
#'   `wd`; `sgd`: `alpha`, `wd`).
#' @family optimization
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' str(ggml_opt_default_params(ggml_backend_sched_new(list(cpu)), ggml_opt_loss_type_mse()))
ggml_opt_default_params <- function(sched, loss_type) {
  .check_sched(sched)
  list(loss_type = .opt_loss_arg(loss_type), build_type = "opt", opt_period = 1L,
       optimizer = ggml_opt_optimizer_type_adamw(),
       adamw = list(alpha = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0),
       sgd = list(alpha = 0.001, wd = 0))
}

#' Optimizer contexts of ggml's optimisation API
#'
#' `ggml_opt_init()` makes a context that trains the parameters
#' ([ggml_set_param()]) of a graph from `inputs` to `outputs` built with
#' ggml ops in `ctx_compute`: with them it has static graphs; without, give
#' them later with `ggml_opt_prepare_alloc()`. `ggml_opt_alloc()` readies a
#' forward (`backward = FALSE`) or training step, `ggml_opt_eval()` runs it
#' on the current contents of the inputs and labels tensors (adding to
#' `result`), and, in training, applies the optimizer every `opt_period`
#' steps (the mean of their gradients). `ggml_opt_reset()` clears the
#' accumulated gradients and, with `optimizer = TRUE`, the optimizer's
#' moments.
#'
#' @param sched A `ggml_backend_sched`.
#' @param loss_type A loss type.
#' @param optimizer An optimizer type.
#' @param opt_period Steps whose gradients are averaged per update.
#' @param ctx_compute,inputs,outputs The context holding the graph, its input
#'   tensor `[ne_datapoint, batch]` and its output tensor.
#' @param opt_ctx An optimizer context.
#' @param graph A forward graph (from [ggml_build_forward_expand()]).
#' @param backward Ready a training step (`TRUE`) or a forward one.
#' @param result A `ggml_opt_result` (or `NULL`).
#' @param node A parameter tensor.
#' @return `ggml_opt_init()`: a `ggml_opt_context`.
#'   `ggml_opt_static_graphs()`: a logical. `ggml_opt_context_optimizer_type()`:
#'   an optimizer type. `ggml_opt_inputs()`, `ggml_opt_outputs()`,
#'   `ggml_opt_labels()`, `ggml_opt_loss()`, `ggml_opt_pred()`,
#'   `ggml_opt_ncorrect()`: tensors (the labels, the last loss, the last
#'   predictions, the last number correct). `ggml_opt_grad_acc()`: a tensor
#'   with the gradient accumulated for `node`, or `NULL`. The others: `NULL`,
#'   invisibly.
#' @family optimization
#' @export
#' @examples
#' cpu <- ggml_backend_cpu_init()
#' sched <- ggml_backend_sched_new(list(cpu))
#' ctx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
#' x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 4)
#' w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 1)
#' ggml_set_param(w)
#' out <- ggml_mul_mat(ctx, w, x)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_backend_tensor_set_data(w, c(0, 0))
#' opt <- ggml_opt_init(sched, ggml_opt_loss_type_mse(), ctx_compute = ctx,
#'                      inputs = x, outputs = out)
#' ggml_opt_alloc(opt, backward = TRUE)
#' ggml_backend_tensor_set_data(x, c(1, 0, 0, 1, 1, 1, 2, 0))
#' ggml_backend_tensor_set_data(ggml_opt_labels(opt), c(1, 2, 3, 2))
#' r <- ggml_opt_result_init()
#' for (i in 1:200) ggml_opt_eval(opt, r)
#' ggml_backend_tensor_get_data(w)
#' ggml_opt_static_graphs(opt)
#' ggml_opt_optimizer_name(ggml_opt_context_optimizer_type(opt))
#' identical(ggml_opt_inputs(opt), x)
#' identical(ggml_opt_outputs(opt), out)
#' ggml_backend_tensor_get_data(ggml_opt_loss(opt))
#' ggml_backend_tensor_get_data(ggml_opt_pred(opt))
#' ggml_backend_tensor_get_data(ggml_opt_ncorrect(opt))
#' ggml_opt_reset(opt, optimizer = TRUE)
#' ggml_opt_free(opt)
#'
#' # Without a graph at initialisation: give it with ggml_opt_prepare_alloc().
#' # With opt_period = 2, the first step only accumulates the gradient.
#' opt2 <- ggml_opt_init(sched, ggml_opt_loss_type_mse(), opt_period = 2)
#' ggml_opt_static_graphs(opt2)
#' ggml_opt_prepare_alloc(opt2, ctx, ggml_build_forward_expand(ctx, out), x, out)
#' ggml_opt_alloc(opt2, backward = TRUE)
#' ggml_backend_tensor_set_data(ggml_opt_labels(opt2), c(1, 2, 3, 2))
#' ggml_opt_eval(opt2)
#' ggml_backend_tensor_get_data(ggml_opt_grad_acc(opt2, w))
#' ggml_opt_free(opt2)
ggml_opt_init <- function(sched, loss_type, optimizer = ggml_opt_optimizer_type_adamw(), opt_period = 1L,
                          ctx_compute = NULL, inputs = NULL, outputs = NULL) {
  .check_sched(sched)
  env <- new.env(parent = emptyenv())
  env$sched <- sched
  env$loss_type <- .opt_loss_arg(loss_type)
  env$optimizer_type <- .opt_optimizer_arg(optimizer)
  env$opt_period <- .nn_int(opt_period, "opt_period")
  be <- ggml_backend_sched_get_backend(sched, 0L)
  env$device <- if (ggml_vulkan_is_backend(be)) "gpu" else "cpu"
  env$backend <- be
  env$lr <- .nn_lr_new(adamw = 0.001, sgd = 0.001, active = ggml_opt_optimizer_name(optimizer))
  env$static <- FALSE
  env$freed <- FALSE
  env$backward <- FALSE
  env$n_acc <- 0L
  class(env) <- "ggml_opt_context"
  if (!is.null(ctx_compute) || !is.null(inputs) || !is.null(outputs)) {
    if (is.null(ctx_compute) || is.null(inputs) || is.null(outputs)) {
      .abort("give `ctx_compute`, `inputs` and `outputs` together (or none)")
    }
    .opt_prepare(env, ctx_compute, ggml_build_forward_expand(ctx_compute, outputs), inputs, outputs)
    env$static <- TRUE
  }
  env
}

.opt_tensor_id <- function(t) format(.rs(rs_tensor_info(t), call = NULL)$id, scientific = FALSE)

.classed_buffer <- function(b) {
  class(b) <- "ggml_backend_buffer"
  b
}

.opt_check_ctx <- function(opt_ctx, call = sys.call(-1L)) {
  if (!inherits(opt_ctx, "ggml_opt_context")) {
    .abort("`opt_ctx` must be an optimizer context (from ggml_opt_init())", call = call)
  }
  if (isTRUE(opt_ctx$freed)) .abort("this optimizer context was freed (ggml_opt_free())", call = call)
  if (.sched_freed(opt_ctx$sched)) .abort("the scheduler of this optimizer context was freed", call = call)
  opt_ctx
}

.opt_need_graph <- function(oc, call = sys.call(-1L)) {
  if (is.null(oc$nodes)) {
    .abort("the optimizer context has no graph: give ctx_compute, inputs and outputs to ggml_opt_init() or call ggml_opt_prepare_alloc()",
           call = call)
  }
}

# Reads the graph, finds its parameters and makes the tensors the context
# exposes (labels, loss, predictions, number correct) in host memory.
.opt_prepare <- function(oc, ctx_compute, graph, inputs, outputs) {
  nodes <- .rs(rs_graph_nodes(graph))
  ids <- vapply(nodes, function(n) format(n$id, scientific = FALSE), "")
  names(nodes) <- ids
  in_id <- .opt_tensor_id(inputs)
  out_id <- .opt_tensor_id(outputs)
  if (!in_id %in% ids) .abort("`inputs` is not part of the graph that computes `outputs`", call = NULL)
  if (!out_id %in% ids) .abort("`outputs` is not the result of the graph", call = NULL)
  oc$nodes <- nodes
  oc$node_of <- nodes
  oc$graph <- graph
  oc$inputs <- inputs
  oc$outputs <- outputs
  oc$in_id <- in_id
  oc$out_id <- out_id
  oc$params <- Filter(function(n) .opt_flag(n, 4L) && !identical(format(n$id, scientific = FALSE), in_id) &&
                        identical(n$op, "NONE"), nodes)
  ine <- nodes[[in_id]]$ne
  one <- nodes[[out_id]]$ne
  oc$batch <- as.integer(prod(ine[-1L]))
  oc$ne_datapoint <- as.integer(ine[1L])
  oc$ne_out <- as.integer(one[1L])
  ctx <- ggml_init(ggml_tensor_overhead() * 8 + 4 * (prod(one) + 2 * oc$batch + 8), no_alloc = FALSE)
  oc$io_ctx <- ctx
  oc$labels <- ggml_new_tensor(ctx, GGML_TYPE_F32, 4L, one)
  oc$loss_t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1L)
  oc$pred_t <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, oc$batch)
  oc$ncorrect_t <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1L)
  oc$mirror <- NULL
  oc$optimizer <- NULL
  invisible(oc)
}

#' @rdname ggml_opt_init
#' @export
ggml_opt_free <- function(opt_ctx) {
  if (!inherits(opt_ctx, "ggml_opt_context")) .abort("`opt_ctx` must be an optimizer context")
  if (!isTRUE(opt_ctx$freed)) {
    for (b in opt_ctx$buffers) ggml_backend_buffer_free(b)
    for (c in list(opt_ctx$io_ctx, opt_ctx$io_ctx_grad)) if (!is.null(c)) ggml_free(c)
  }
  opt_ctx$freed <- TRUE
  invisible(NULL)
}

#' @rdname ggml_opt_init
#' @export
ggml_opt_reset <- function(opt_ctx, optimizer = FALSE) {
  .opt_check_ctx(opt_ctx)
  for (p in opt_ctx$mirror) p$grad <- NULL
  opt_ctx$n_acc <- 0L
  if (isTRUE(optimizer)) opt_ctx$optimizer <- NULL
  invisible(NULL)
}

#' @rdname ggml_opt_init
#' @export
ggml_opt_static_graphs <- function(opt_ctx) isTRUE(.opt_check_ctx(opt_ctx)$static)

#' @rdname ggml_opt_init
#' @export
ggml_opt_context_optimizer_type <- function(opt_ctx) .opt_check_ctx(opt_ctx)$optimizer_type

#' @rdname ggml_opt_init
#' @export
ggml_opt_inputs <- function(opt_ctx) .opt_check_ctx(opt_ctx)$inputs

#' @rdname ggml_opt_init
#' @export
ggml_opt_outputs <- function(opt_ctx) .opt_check_ctx(opt_ctx)$outputs

#' @rdname ggml_opt_init
#' @export
ggml_opt_labels <- function(opt_ctx) .opt_check_ctx(opt_ctx)$labels

#' @rdname ggml_opt_init
#' @export
ggml_opt_loss <- function(opt_ctx) .opt_check_ctx(opt_ctx)$loss_t

#' @rdname ggml_opt_init
#' @export
ggml_opt_pred <- function(opt_ctx) .opt_check_ctx(opt_ctx)$pred_t

#' @rdname ggml_opt_init
#' @export
ggml_opt_ncorrect <- function(opt_ctx) .opt_check_ctx(opt_ctx)$ncorrect_t

#' @rdname ggml_opt_init
#' @export
ggml_opt_prepare_alloc <- function(opt_ctx, ctx_compute, graph, inputs, outputs) {
  .opt_check_ctx(opt_ctx)
  if (isTRUE(opt_ctx$static)) .abort("this optimizer context has static graphs; it needs no ggml_opt_prepare_alloc()")
  .opt_prepare(opt_ctx, ctx_compute, graph, inputs, outputs)
  invisible(NULL)
}

#' @rdname ggml_opt_init
#' @export
ggml_opt_alloc <- function(opt_ctx, backward = TRUE) {
  .opt_check_ctx(opt_ctx)
  .opt_need_graph(opt_ctx)
  buf <- .rs(rs_graph_alloc(opt_ctx$graph, opt_ctx$backend))
  if (!is.null(buf)) opt_ctx$buffers <- c(opt_ctx$buffers, list(.classed_buffer(buf)))
  opt_ctx$backward <- isTRUE(backward)
  invisible(NULL)
}

#' @rdname ggml_opt_init
#' @export
ggml_opt_grad_acc <- function(opt_ctx, node) {
  .opt_check_ctx(opt_ctx)
  .opt_need_graph(opt_ctx)
  id <- .opt_tensor_id(node)
  p <- opt_ctx$mirror[[id]]
  if (is.null(p) || is.null(p$grad)) return(NULL)
  g <- p$grad
  t <- ggml_new_tensor(opt_ctx$io_ctx_grad %||% .opt_grad_ctx(opt_ctx), GGML_TYPE_F32, 4L, opt_ctx$nodes[[id]]$ne)
  ggml_backend_tensor_set_data(t, as.vector(g))
  t
}

.opt_grad_ctx <- function(oc) {
  n <- sum(vapply(oc$params, function(p) prod(p$ne), numeric(1L)))
  oc$io_ctx_grad <- ggml_init(4 * n * 4 + 64 * ggml_tensor_overhead(), no_alloc = FALSE)
  oc$io_ctx_grad
}

# The parameters' autograd mirrors, refreshed from the engine tensors (the
# user may have written them) and the optimizer over them.
.opt_sync_in <- function(oc) {
  if (is.null(oc$mirror)) {
    oc$mirror <- lapply(oc$params, function(n) ag_param(.opt_tensor_matrix(n), device = oc$device))
  } else {
    for (id in names(oc$params)) {
      v <- .opt_tensor_matrix(oc$params[[id]])
      if (!identical(v, .ag_data(oc$mirror[[id]]))) .ag_data_set(oc$mirror[[id]], v)
    }
  }
  if (is.null(oc$optimizer) && length(oc$mirror)) {
    oc$optimizer <- if (oc$optimizer_type == 0L) {
      optimizer_adamw(oc$mirror, lr = oc$lr$adamw, weight_decay = 0)
    } else {
      optimizer_sgd(oc$mirror, lr = oc$lr$sgd)
    }
  }
  invisible(oc)
}

# Trained values back into the engine's parameter tensors.
.opt_sync_out <- function(oc) {
  for (id in names(oc$params)) {
    ggml_backend_tensor_set_data(oc$params[[id]]$tensor, as.vector(.ag_data(oc$mirror[[id]])))
  }
  invisible(oc)
}

# One step on a batch: `x` [ne_datapoint, batch], `y` labels (or NULL).
# Returns list(loss, pred, ncorrect); trains when `train`.
.opt_step <- function(oc, x, y, train) {
  vals <- new.env(parent = emptyenv())
  vals[[oc$in_id]] <- ag_tensor(x, device = oc$device)
  for (id in names(oc$mirror)) vals[[id]] <- oc$mirror[[id]]
  lab <- if (!is.null(y)) ag_tensor(y, device = oc$device)
  run <- function() {
    .opt_run_nodes(oc, vals)
    out <- vals[[oc$out_id]]
    if (oc$loss_type %in% 2:3 && is.null(lab)) .abort("this loss needs labels", call = NULL)
    list(out = out, loss = .opt_loss(oc$loss_type, out, lab))
  }
  if (train && length(oc$mirror)) {
    with_grad_tape(r <- run())
    backward(r$loss)
    oc$n_acc <- oc$n_acc + 1L
    if (oc$n_acc >= oc$opt_period) {
      oc$optimizer$lr <- oc$lr[[oc$lr$active]]
      grads <- lapply(oc$mirror, function(p) {
        g <- p$grad
        if (is.null(g)) .ag_data(p) * 0 else g / oc$n_acc
      })
      names(grads) <- vapply(oc$mirror, function(p) as.character(p$id), "")
      oc$optimizer$step(grads)
      for (p in oc$mirror) p$grad <- NULL
      oc$n_acc <- 0L
    }
  } else {
    r <- run()
  }
  loss <- sum(.ag_data(r$loss))
  pred <- NULL
  nc <- NA_real_
  if (oc$loss_type == 2L) {
    o <- .ag_data(r$out)
    pred <- max.col(t(o), ties.method = "first") - 1L
    nc <- sum(pred == max.col(t(y), ties.method = "first") - 1L)
  }
  list(loss = loss, pred = pred, ncorrect = nc, out = r$out)
}

.opt_record <- function(result, oc, r, n) {
  if (is.null(result)) return(invisible())
  .opt_check_result(result, call = NULL)
  result$ndata <- result$ndata + n
  result$losses <- c(result$losses, r$loss)
  if (!is.na(r$ncorrect)) {
    result$has_acc <- TRUE
    result$ncorrect <- result$ncorrect + r$ncorrect
    result$pred <- c(result$pred, as.integer(r$pred))
  }
  invisible()
}

#' @rdname ggml_opt_init
#' @export
ggml_opt_eval <- function(opt_ctx, result = NULL) {
  .opt_check_ctx(opt_ctx)
  .opt_need_graph(opt_ctx)
  oc <- opt_ctx
  .opt_sync_in(oc)
  x <- matrix(as.double(ggml_backend_tensor_get_data(oc$inputs)), oc$ne_datapoint)
  y <- if (oc$loss_type %in% 2:3) matrix(ggml_backend_tensor_get_data(oc$labels), oc$ne_out)
  r <- .opt_step(oc, x, y, train = isTRUE(oc$backward))
  if (isTRUE(oc$backward)) .opt_sync_out(oc)
  ggml_backend_tensor_set_data(oc$loss_t, r$loss)
  # The graph's outputs tensor holds the batch's outputs, as after ggml's
  # own compute of the graph.
  ggml_backend_tensor_set_data(oc$outputs, as.vector(.ag_data(r$out)))
  if (!is.null(r$pred)) {
    ggml_backend_tensor_set_data(oc$pred_t, r$pred)
    ggml_backend_tensor_set_data(oc$ncorrect_t, r$ncorrect)
  }
  .opt_record(result, oc, r, ncol(x))
  invisible(NULL)
}

#' Epochs and fits of ggml's optimisation API
#'
#' `ggml_opt_epoch()` trains on the datapoints before `idata_split` and
#' evaluates on the rest, batch by batch in the dataset's (shuffled) order.
#' A callback is `TRUE` (a progress bar), `FALSE` (nothing) or a
#' `function(train, ibatch, ibatch_max, t_start_us, result)` called after
#' each batch. `ggml_fit_opt()` runs epochs with R callbacks between them
#' (see [ggml_fit()]) and returns the history; `ggml_opt_fit()` is the same
#' without callbacks; `ggml_opt_init_for_fit()` gives the context and
#' learning-rate handle they use.
#'
#' @inheritParams ggml_opt_init
#' @param dataset A `ggml_opt_dataset`.
#' @param result_train,result_eval `ggml_opt_result`s (or `NULL`).
#' @param idata_split First datapoint of the evaluation part.
#' @param callback_train,callback_eval Progress callbacks.
#' @param nepoch Epochs.
#' @param nbatch_logical Datapoints per optimizer update (a multiple of the
#'   batch of `inputs`).
#' @param val_split Fraction of the datapoints held out for evaluation.
#' @param callbacks Epoch callbacks (see [ggml_fit()]).
#' @param silent Print nothing.
#' @param shuffle Shuffle the training datapoints every epoch.
#' @return `ggml_fit_opt()`, `ggml_opt_fit()`: a data frame with `epoch`,
#'   `train_loss`, `train_accuracy`, `val_loss`, `val_accuracy` (invisibly for
#'   `ggml_opt_fit()`). `ggml_opt_init_for_fit()`: `list(opt_ctx, lr_ud)`.
#'   `ggml_opt_epoch()`: `NULL`, invisibly.
#' @family optimization
#' @export
#' @examples
#' set.seed(1)
#' cpu <- ggml_backend_cpu_init()
#' sched <- ggml_backend_sched_new(list(cpu))
#' ctx <- ggml_init(16 * 1024 * 1024, no_alloc = TRUE)
#' x <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 10)
#' w <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 1)
#' ggml_set_param(w)
#' out <- ggml_mul_mat(ctx, w, x)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
#' ggml_backend_tensor_set_data(w, c(0, 0, 0))
#' X <- matrix(rnorm(300), 100, 3)
#' ds <- ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 3, 1, 100)
#' ggml_backend_tensor_set_data(ggml_opt_dataset_data(ds), as.vector(t(X)))
#' ggml_backend_tensor_set_data(ggml_opt_dataset_labels(ds), X %*% c(1, 2, 3))
#' h <- ggml_fit_opt(sched, ctx, x, out, ds, nepoch = 20, nbatch_logical = 10,
#'                   silent = TRUE)
#' tail(h, 2)
#' ggml_backend_tensor_get_data(w)
#' ggml_opt_fit(sched, ctx, x, out, ds, nepoch = 2, nbatch_logical = 10,
#'              silent = TRUE)
#'
#' # One epoch at a time: 80 datapoints train, 20 evaluate
#' fit_ctx <- ggml_opt_init_for_fit(sched, ggml_opt_loss_type_mse(),
#'                                  ctx_compute = ctx, inputs = x, outputs = out)
#' train <- ggml_opt_result_init()
#' eval <- ggml_opt_result_init()
#' ggml_opt_epoch(fit_ctx$opt_ctx, ds, train, eval, idata_split = 80,
#'                callback_train = FALSE, callback_eval = FALSE)
#' ggml_opt_result_loss(eval)
#' ggml_opt_free(fit_ctx$opt_ctx)
ggml_opt_epoch <- function(opt_ctx, dataset, result_train = NULL, result_eval = NULL, idata_split,
                           callback_train = TRUE, callback_eval = TRUE) {
  oc <- .opt_check_ctx(opt_ctx)
  .opt_need_graph(oc)
  .opt_check_dataset(dataset)
  if (dataset$ne_datapoint != oc$ne_datapoint) {
    .abort(sprintf("the dataset's datapoints have %d values but the graph's inputs take %d",
                   dataset$ne_datapoint, oc$ne_datapoint))
  }
  needs_labels <- oc$loss_type %in% 2:3
  if (needs_labels && (is.null(dataset$labels) || dataset$ne_label != oc$ne_out)) {
    .abort(sprintf("the loss compares the outputs (%d values per datapoint) with labels, but the dataset's labels have %d",
                   oc$ne_out, dataset$ne_label))
  }
  if (idata_split < 0) idata_split <- dataset$ndata
  idata_split <- .nn_int(idata_split, "idata_split", min = 0L)
  b <- oc$batch
  n_train <- idata_split %/% b
  n_eval <- (dataset$ndata - n_train * b) %/% b
  X <- .opt_columns(dataset$data, dataset$ne_datapoint, seq_len(dataset$ndata) - 1L, cache = NULL)
  Y <- if (needs_labels) .opt_columns(dataset$labels, dataset$ne_label, seq_len(dataset$ndata) - 1L)
  .opt_sync_in(oc)
  t0 <- as.numeric(Sys.time()) * 1e6
  run_part <- function(first, count, train, result, cb) {
    bar <- if (isTRUE(cb) && count > 0L) cli::cli_progress_bar(if (train) "train" else "eval", total = count)
    for (i in seq_len(count)) {
      idx <- .opt_batch_index(dataset, first + i - 1L, b)
      r <- .opt_step(oc, X[, idx + 1L, drop = FALSE], if (needs_labels) Y[, idx + 1L, drop = FALSE], train)
      .opt_record(result, oc, r, b)
      if (is.function(cb)) cb(train, i, count, t0, result)
      if (!is.null(bar)) cli::cli_progress_update(id = bar)
    }
    if (!is.null(bar)) cli::cli_progress_done(id = bar)
  }
  run_part(0L, n_train, TRUE, result_train, callback_train)
  .opt_sync_out(oc)
  run_part(n_train, n_eval, FALSE, result_eval, callback_eval)
  invisible(NULL)
}

#' @rdname ggml_opt_epoch
#' @export
ggml_opt_init_for_fit <- function(sched, loss_type, optimizer = ggml_opt_optimizer_type_adamw(),
                                  opt_period = 1L, ctx_compute, inputs, outputs) {
  oc <- ggml_opt_init(sched, loss_type, optimizer, opt_period, ctx_compute, inputs, outputs)
  list(opt_ctx = oc, lr_ud = oc$lr)
}

#' @rdname ggml_opt_epoch
#' @export
ggml_fit_opt <- function(sched, ctx_compute, inputs, outputs, dataset,
                         loss_type = ggml_opt_loss_type_mse(), optimizer = ggml_opt_optimizer_type_adamw(),
                         nepoch = 1L, nbatch_logical = 32L, val_split = 0, callbacks = list(),
                         silent = FALSE, shuffle = TRUE) {
  .opt_check_dataset(dataset)
  nepoch <- .nn_int(nepoch, "nepoch")
  if (!is.numeric(val_split) || length(val_split) != 1L || is.na(val_split) || val_split < 0 || val_split >= 1) {
    .abort("`val_split` must be a number in [0, 1)")
  }
  b <- as.integer(prod(ggml_tensor_shape(inputs)[-1L]))
  nbatch_logical <- .nn_int(nbatch_logical, "nbatch_logical")
  if (nbatch_logical %% b != 0L) {
    .abort(sprintf("`nbatch_logical` (%d) must be a multiple of the batch of `inputs` (%d)", nbatch_logical, b))
  }
  fit <- ggml_opt_init_for_fit(sched, loss_type, optimizer, nbatch_logical %/% b, ctx_compute, inputs, outputs)
  oc <- fit$opt_ctx
  on.exit(ggml_opt_free(oc), add = TRUE)
  nb_log <- dataset$ndata %/% nbatch_logical
  idata_split <- as.integer(round((1 - val_split) * nb_log)) * nbatch_logical
  state <- new.env(parent = emptyenv())
  state$stop <- FALSE
  state$lr_ud <- fit$lr_ud
  state$nepoch <- nepoch
  hist <- data.frame(epoch = integer(0), train_loss = numeric(0), train_accuracy = numeric(0),
                     val_loss = numeric(0), val_accuracy = numeric(0))
  rt <- ggml_opt_result_init()
  re <- ggml_opt_result_init()
  for (ep in seq_len(nepoch)) {
    for (cb in callbacks) if (is.function(cb$on_epoch_begin)) cb$on_epoch_begin(ep, list(), state)
    if (isTRUE(state$stop)) break
    if (shuffle) ggml_opt_dataset_shuffle(oc, dataset, idata_split)
    ggml_opt_result_reset(rt)
    ggml_opt_result_reset(re)
    ggml_opt_epoch(oc, dataset, rt, re, idata_split, callback_train = !silent, callback_eval = !silent)
    logs <- list(train_loss = ggml_opt_result_loss(rt)[["loss"]],
                 train_accuracy = ggml_opt_result_accuracy(rt)[["accuracy"]],
                 val_loss = if (idata_split < dataset$ndata) ggml_opt_result_loss(re)[["loss"]] else NA_real_,
                 val_accuracy = if (idata_split < dataset$ndata) ggml_opt_result_accuracy(re)[["accuracy"]] else NA_real_)
    hist[nrow(hist) + 1L, ] <- c(list(epoch = ep), logs)
    if (!silent) .nn_epoch_line(ep, nepoch, NA_real_, logs)
    for (cb in callbacks) if (is.function(cb$on_epoch_end)) cb$on_epoch_end(ep, logs, state)
    if (isTRUE(state$stop)) break
  }
  hist$epoch <- as.integer(hist$epoch)
  hist
}

#' @rdname ggml_opt_epoch
#' @export
ggml_opt_fit <- function(sched, ctx_compute, inputs, outputs, dataset,
                         loss_type = ggml_opt_loss_type_mse(), optimizer = ggml_opt_optimizer_type_adamw(),
                         nepoch = 1L, nbatch_logical = 32L, val_split = 0, silent = FALSE) {
  invisible(ggml_fit_opt(sched, ctx_compute, inputs, outputs, dataset, loss_type, optimizer, nepoch,
                         nbatch_logical, val_split, list(), silent))
}

#' @export
print.ggml_opt_context <- function(x, ...) {
  if (isTRUE(x$freed)) {
    cat("<ggml_opt_context> (freed)\n")
  } else {
    cat(sprintf("<ggml_opt_context> %s, loss type %d, opt_period %d, %s graphs, %d parameter tensor%s\n",
                ggml_opt_optimizer_name(x$optimizer_type), x$loss_type, x$opt_period,
                if (x$static) "static" else "no", length(x$params), if (length(x$params) == 1L) "" else "s"))
  }
  invisible(x)
}
