# Device residency: the "pass" and "persistent" pools of the engine
# (src/rust/core/src/residency.rs), seen from R.
#
# `.ag_device_state` is an environment whose residency fields are active
# bindings onto the engine: reading `contexts`, `ctx_gen`, `p_buffers`, ...
# always reflects the pools as they are, and assigning `backend` installs the
# backend that pool buffers are allocated on. The ledger's budget is
# `mem_limit`.

.ag_scopes <- c("pass", "persistent")

# R objects that the engine state refers to (the backend object as given).
.ag_res_private <- new.env(parent = emptyenv())

.ag_scope_arg <- function(scope, call = sys.call(-1L)) {
  if (!is.character(scope) || length(scope) != 1L || !scope %in% .ag_scopes) {
    .abort(sprintf("`scope` must be \"pass\" or \"persistent\", not %s.",
                   paste(format(scope), collapse = " ")), call = call)
  }
  scope
}

.ag_classed <- function(x, cls) {
  if (!is.null(x)) class(x) <- cls
  x
}

.ag_pool_field <- function(scope, field) {
  p <- .rs(rs_res_pool(scope))
  switch(field,
    contexts = lapply(p$contexts, .ag_classed, "ggml_context"),
    buffers  = lapply(p$buffers, .ag_classed, "ggml_backend_buffer"),
    ctx      = .ag_classed(p$current, "ggml_context")
  )
}

.ag_read_only <- function(name) {
  force(name)
  function(v) {
    .abort(sprintf(
      ".ag_device_state$%s reflects the engine's pools and cannot be assigned; use .ag_residency_reset(), .ag_ctx_ensure() or .ag_ctx_flush().",
      name
    ))
  }
}

# Installs the active bindings (called from .onLoad).
.ag_residency_on_load <- function(env = .ag_device_state) {
  active <- function(name, fun) {
    if (exists(name, envir = env, inherits = FALSE)) rm(list = name, envir = env)
    makeActiveBinding(name, fun, env)
  }
  bind <- function(name, getter) {
    setter <- .ag_read_only(name)
    active(name, function(v) if (missing(v)) getter() else setter(v))
  }
  for (scope in .ag_scopes) {
    local({
      s <- scope
      pre <- if (s == "pass") "" else "p_"
      bind(paste0(pre, "contexts"), function() .ag_pool_field(s, "contexts"))
      bind(paste0(pre, "buffers"), function() .ag_pool_field(s, "buffers"))
      bind(paste0(pre, "ctx"), function() .ag_pool_field(s, "ctx"))
      bind(paste0(pre, "ctx_gen"), function() .rs(rs_res_gen(s)))
    })
  }
  active("backend", function(v) {
    if (missing(v)) return(.ag_res_private$backend)
    if (!is.null(v)) .check_backend(v)
    .rs(rs_res_set_backend(v))
    .ag_res_private$backend <- v
    invisible(v)
  })
  active("mem_limit", function(v) {
    if (missing(v)) .rs(rs_ledger_limit(NULL)) else .ag_tape_mem_limit(v)
  })
  invisible(env)
}

.ag_scope_gen <- function(scope) .rs(rs_res_gen(scope))

# Values that must outlive a reset of their pool (parameters made resident
# through a handle) are registered with the engine's rescue registry (see
# .ag_data_set_handle()), which copies them to the host before the pool is
# freed.

#' Residency internals
#'
#' Free the pools, make sure a pool has a current context with room, and
#' back a context's tensors with one buffer. Internal: used by the autograd
#' engine and reached through `asNamespace("ggmlR")`.
#'
#' @param size_mb Size of new pool contexts in megabytes (`NULL`: unchanged).
#' @param scope `"all"`, `"pass"` or `"persistent"`.
#' @return `.ag_residency_reset()`: the pass generation, invisibly.
#' @keywords internal
#' @noRd
.ag_residency_reset <- function(size_mb = NULL, scope = c("all", "pass", "persistent")) {
  scope <- match.arg(scope)
  scopes <- if (scope == "all") .ag_scopes else scope
  invisible(.rs(rs_res_reset(scopes, size_mb)))
}

.ag_ctx_ensure <- function(n = 1L, scope = "pass") {
  scope <- .ag_scope_arg(scope)
  .ag_classed(.rs(rs_res_ctx_ensure(n, scope)), "ggml_context")
}

.ag_ctx_flush <- function(ctx = .ag_device_state$ctx, scope = "pass") {
  scope <- .ag_scope_arg(scope)
  if (is.null(ctx)) return(invisible(NULL))
  invisible(.ag_classed(.rs(rs_res_ctx_flush(ctx, scope)), "ggml_backend_buffer"))
}

.ag_tape_mem <- function() .rs(rs_res_mem())

.ag_tape_mem_limit <- function(bytes = NULL) {
  if (is.null(bytes)) return(.rs(rs_ledger_limit(NULL)))
  if (!is.numeric(bytes) || length(bytes) != 1L || is.na(bytes) || bytes <= 0) {
    .abort("`bytes` must be a single positive number of bytes, or Inf for no limit.")
  }
  invisible(.rs(rs_ledger_limit(as.double(bytes))))
}

.ag_check_mem_budget <- function(extra_bytes) {
  invisible(.rs(rs_ledger_check(as.double(extra_bytes))))
}

.ag_dtype_code <- function(dtype) {
  switch(dtype %||% "f32",
    f32 = GGML_TYPE_F32, f16 = GGML_TYPE_F16, bf16 = GGML_TYPE_BF16,
    .abort(sprintf("unknown dtype \"%s\": use \"f32\", \"f16\" or \"bf16\".", dtype))
  )
}

.ag_r_to_gpu <- function(data, dtype = .ag_device_state$dtype, scope = "pass") {
  scope <- .ag_scope_arg(scope)
  if (!is.numeric(data) && !is.logical(data)) {
    .abort(sprintf("`data` must be a numeric matrix or vector, not %s.", class(data)[1L]))
  }
  if (is.null(dim(data))) data <- matrix(as.double(data), ncol = 1L)
  if (length(dim(data)) != 2L) .abort("`data` must be a matrix or a vector.")
  .new_tensor(.rs(rs_res_upload(as.double(data), nrow(data), ncol(data),
                                .ag_dtype_code(dtype), scope)))
}

.ag_handle <- function(ptr, shape, scope = "pass") {
  scope <- .ag_scope_arg(scope)
  if (!is.null(ptr) && !inherits(ptr, "ggml_tensor")) {
    .abort("`ptr` must be a ggml_tensor or NULL.")
  }
  .ag_new_handle(ptr, shape, scope, .ag_scope_gen(scope))
}

.ag_new_handle <- function(ptr, shape, scope, gen) {
  structure(list(ptr = ptr, shape = as.integer(shape), scope = scope, gen = gen),
            class = "ag_handle")
}

.ag_handle_scope <- function(h) h$scope %||% "pass"

.ag_handle_live <- function(h) {
  inherits(h, "ag_handle") &&
    identical(h$gen, .ag_scope_gen(.ag_handle_scope(h))) &&
    (is.null(h$ptr) || isTRUE(.rs(rs_tensor_is_live(h$ptr))))
}

#' @export
print.ag_handle <- function(x, ...) {
  shape <- paste(x$shape, collapse = "x")
  cat(sprintf("<ag_handle %s, %s pool, generation %d%s>\n", shape,
              .ag_handle_scope(x), x$gen, if (.ag_handle_live(x)) "" else ", STALE"))
  invisible(x)
}

.ag_tensor_scope <- function(t) t$ctx_scope %||% "pass"

# (Checked per parameter per op on "gpu": fields read without `$`'s method
# lookup; a scope the engine does not know is not live.)
.ag_ptr_is_live <- function(t) {
  p <- .subset2(t, "ptr")
  !is.null(p) &&
    identical(.subset2(t, "ctx_gen"), rs_res_gen(.subset2(t, "ctx_scope") %||% "pass")) &&
    isTRUE(rs_tensor_is_live(p))
}

# The value of a resident tensor, downloaded; an error naming the reset when
# its pool was freed since it became resident.
.ag_resident_value <- function(t) {
  scope <- .ag_tensor_scope(t)
  if (!.ag_ptr_is_live(t)) {
    .abort(sprintf(paste0(
      "ggmlR: this tensor's device memory was freed by a reset of the %s pool ",
      "(it was made resident in generation %s; the pool is now at generation %d). ",
      "Compute it again inside with_grad_tape(), or keep it in the persistent pool."),
      scope, format(t$ctx_gen %||% NA), .ag_scope_gen(scope)), class = "ggmlR_stale_error")
  }
  matrix(ggml_backend_tensor_get_data(t$ptr), nrow = t$shape[1L], ncol = t$shape[2L])
}

.ag_data_set_handle <- function(t, h) {
  if (!inherits(h, "ag_handle")) .abort("`h` must be an ag_handle (see .ag_handle()).")
  if (!.ag_handle_live(h)) {
    .abort(sprintf(paste0(
      "ggmlR: cannot make a tensor resident through a stale handle (%s pool, ",
      "generation %d; the pool is now at generation %d)."),
      .ag_handle_scope(h), h$gen, .ag_scope_gen(.ag_handle_scope(h))),
      class = "ggmlR_stale_error")
  }
  t$ptr <- h$ptr
  t$shape <- h$shape
  t$ctx_gen <- h$gen
  t$ctx_scope <- .ag_handle_scope(h)
  .rs(rs_ag_res_register(t, t$.h, t$ptr, as.integer(t$shape), t$ctx_scope))
  invisible(t)
}

.ag_handle_of <- function(t) {
  if (is.null(t$ptr)) return(NULL)
  .ag_new_handle(t$ptr, t$shape, .ag_tensor_scope(t), t$ctx_gen)
}
