# Meta devices: several devices seen as one, tensors mirrored or split over
# them by an R function.

.meta_policies <- new.env(parent = emptyenv())

#' Meta devices
#'
#' A meta device combines several devices (the same device may appear more
#' than once). When a context's tensors are allocated on a meta backend
#' ([ggml_backend_dev_init()] of the meta device, then
#' [ggml_backend_alloc_ctx_tensors()]), `split_fn(tensor_info, n_devs)` is
#' called for every tensor with a list of its `name`, `type`, `ne` (sizes,
#' numeric), `op` and `flags`, and returns `list(axis, ne, n_segments)`:
#' `axis = 10` mirrors the tensor (a full copy on every device), `axis` 0 to
#' 3 splits it along that dimension, device `j` holding `ne[j]` consecutive
#' indices (`ne` adds up to the dimension's size). Reading and writing a
#' tensor gathers and scatters accordingly. When `split_fn` fails or answers
#' something invalid, that tensor and every later one are mirrored, and a
#' warning in the engine's log (on R's message stream, see
#' [ggml_log_set_r()]) says so once; the function is not called again.
#'
#' A graph computed on a meta backend runs on its first device with the full
#' tensors; every result is then distributed to all devices as its split
#' says.
#'
#' @param devs A non-empty list of `ggml_backend_device`s.
#' @param split_fn A function `function(tensor_info, n_devs)`, see above.
#' @param env The environment `split_fn` is called in.
#' @return A `ggml_backend_device`.
#' @export
#' @examples
#' cpu <- ggml_backend_dev_by_type(ggml_backend_device_type_cpu())
#' split_rows <- function(info, n) {
#'   if (info$name == "w") list(axis = 1L, ne = c(1, info$ne[2] - 1), n_segments = 1L)
#'   else list(axis = 10L, ne = rep(0L, n), n_segments = 1L)
#' }
#' meta <- ggml_backend_dev_init(ggml_backend_meta_device(list(cpu, cpu), split_rows))
#' ctx <- ggml_init(8 * ggml_tensor_overhead(), no_alloc = TRUE)
#' w <- ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4), "w")
#' x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#' y <- ggml_mul_mat(ctx, w, x)
#' buf <- ggml_backend_alloc_ctx_tensors(ctx, meta)
#' ggml_backend_tensor_set_data(w, 1:12)
#' ggml_backend_tensor_set_data(x, c(1, 0, 0))
#' ggml_backend_graph_compute(meta, ggml_build_forward_expand(ctx, y))
#' ggml_backend_tensor_get_data(y)
#' ggml_backend_buffer_free(buf)
#' ggml_free(ctx)
#' ggml_backend_free(meta)
ggml_backend_meta_device <- function(devs, split_fn, env = parent.frame()) {
  if (!is.list(devs) || inherits(devs, "ggml_backend_device")) {
    .abort(sprintf("`devs` must be a list of ggml_backend_device objects, not %s.", .describe_value(devs)))
  }
  if (length(devs) == 0L) .abort("`devs` must hold at least one device.")
  for (i in seq_along(devs)) .check_device(devs[[i]], sprintf("devs[[%d]]", i))
  if (!is.function(split_fn)) {
    .abort(sprintf("`split_fn` must be a function(tensor_info, n_devs), not %s.", .describe_value(split_fn)))
  }
  if (!is.environment(env)) .abort("`env` must be an environment.")
  id <- length(ls(.meta_policies, all.names = TRUE)) + 1L
  assign(as.character(id), list(fn = split_fn, env = env), envir = .meta_policies)
  .new_device(.rs(rs_meta_device(devs, id)))
}

# Called by the engine for every tensor allocated on a meta backend: the
# answer of the policy under `id`, or why there is none. Never an R error.
.meta_split <- function(id, info, n_devs) {
  p <- get0(as.character(id), envir = .meta_policies, inherits = FALSE)
  if (is.null(p)) return(list(FALSE, "the split function is gone"))
  res <- tryCatch(eval(as.call(list(p$fn, info, n_devs)), p$env),
                  error = function(e) structure(conditionMessage(e), class = "meta_failure"),
                  interrupt = function(e) structure("interrupted", class = "meta_failure"))
  if (inherits(res, "meta_failure")) return(list(FALSE, sprintf("split_fn failed: %s", unclass(res))))
  if (!is.list(res) || is.null(res$axis) || length(res$axis) != 1L || !is.numeric(res$axis) || is.na(res$axis)) {
    return(list(FALSE, "split_fn must return list(axis = <0 to 3 or 10>, ne = <sizes per device>)"))
  }
  ne <- if (is.null(res$ne)) numeric(0) else res$ne
  if (!is.numeric(ne) || anyNA(ne)) return(list(FALSE, "split_fn returned `ne` that is not numbers"))
  list(TRUE, as.numeric(res$axis), as.numeric(ne))
}
