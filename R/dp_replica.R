# One replica of a data-parallel run: the model that the user's make_model()
# builds, its shard of the data, its optimizer, its device and its random
# stream. The same functions serve the replicas that dp_train() keeps in the
# caller's process and the one each cluster worker keeps.

# Replicas of the runs in progress in this process, by "<run>:<rank>".
.dp_replicas <- new.env(parent = emptyenv())

.dp_state_format <- "ggmlR dp_train state"

# The host's devices that replicas are placed on, in turn: "vulkan<k>" for
# each Vulkan device that is a GPU (not a CPU driver such as lavapipe), else
# "cpu" (the host, device "cpu"). options(ggmlR.dp_devices = ) overrides.
.dp_devices <- function() {
  opt <- getOption("ggmlR.dp_devices")
  if (!is.null(opt)) return(.dp_check_devices(opt))
  devs <- tryCatch(ggml_vulkan_list_devices(), error = function(e) NULL)
  if (is.null(devs) || !nrow(devs)) return("cpu")
  gpus <- devs$index[tolower(devs$type) != "cpu"]
  if (!length(gpus)) "cpu" else paste0("vulkan", gpus)
}

.dp_check_devices <- function(x, call = .user_call()) {
  ok <- is.character(x) && length(x) >= 1L && !anyNA(x) && all(grepl("^(cpu|vulkan[0-9]+)$", x))
  if (!ok) {
    .abort(paste("option ggmlR.dp_devices must be a character vector of \"cpu\" and",
                 "\"vulkan<k>\" (a Vulkan device index), such as c(\"vulkan0\", \"vulkan1\")"),
           class = "ggmlR_dp_error", call = call)
  }
  x
}

# The device of replica `local_rank` on this host: list(name, device,
# backend), from `devices` (as .dp_devices() gives them, or "current").
# A Vulkan device that cannot be opened here (a forked child of a process
# that used Vulkan) gives way to the host.
.dp_place <- function(devices, local_rank) {
  name <- devices[(local_rank - 1L) %% length(devices) + 1L]
  # one replica in the caller's process: the caller's own device and backend
  if (name == "current") return(list(name = .ag_device_state$device, device = .ag_device_state$device))
  if (name == "cpu") return(list(name = "cpu", device = "cpu", backend = NULL))
  k <- as.integer(sub("^vulkan", "", name))
  be <- .dp_replicas[[paste0(".backend_", name)]]
  if (is.null(be) || isTRUE(tryCatch(.rs(rs_backend_is_freed(be)), error = function(e) TRUE))) {
    be <- tryCatch(ggml_vulkan_init(k), ggmlR_error = function(e) e)
    if (inherits(be, "error")) {
      return(list(name = "cpu", device = "cpu", backend = NULL,
                  note = sprintf("%s is not usable here (%s)", name, conditionMessage(be))))
    }
    .dp_replicas[[paste0(".backend_", name)]] <- be
  }
  list(name = name, device = "gpu", backend = be)
}

# The random state of `seed`, made with this process's generator kinds,
# leaving the global random state as it was.
.dp_seed_state <- function(seed) {
  old <- .dp_get_seed()
  on.exit(.dp_put_seed(old))
  set.seed(seed)
  .dp_get_seed()
}

.dp_get_seed <- function() get0(".Random.seed", envir = globalenv(), inherits = FALSE)

.dp_put_seed <- function(s) {
  if (is.null(s)) {
    if (exists(".Random.seed", envir = globalenv(), inherits = FALSE)) {
      rm(".Random.seed", envir = globalenv())
    }
  } else {
    assign(".Random.seed", s, envir = globalenv())
  }
}

# Work in the replica's setting: its device (and backend), its random stream.
# Returns what .dp_leave() puts back.
.dp_enter <- function(rep) {
  old <- list(device = .ag_device_state$device, backend = .ag_device_state$backend,
              seed = .dp_get_seed())
  if (!is.null(rep$place$backend)) .ag_device_state$backend <- rep$place$backend
  .ag_device_state$device <- rep$place$device
  .dp_put_seed(rep$seed)
  old
}

.dp_leave <- function(rep, old) {
  rep$seed <- .dp_get_seed()
  .dp_put_seed(old$seed)
  .ag_device_state$device <- old$device
  if (!identical(.ag_device_state$backend, old$backend)) .ag_device_state$backend <- old$backend
  invisible(NULL)
}

# The parameters of a model as a named list of ag_tensors.
.dp_params_of <- function(model) {
  if (!(is.list(model) || is.environment(model)) || !is.function(model$forward) &&
      !is.function(model$parameters)) {
    stop("make_model() must return a model with $forward() and $parameters() (such as ag_sequential())",
         call. = FALSE)
  }
  p <- .ag_layer_params(model)
  if (!is.list(p) || !length(p) || !all(vapply(p, is_ag_tensor, logical(1L)))) {
    stop("the model's $parameters() must return a non-empty list of ag_param tensors", call. = FALSE)
  }
  if (is.null(names(p))) names(p) <- paste0("param", seq_along(p))
  p
}

# Builds replica `rank` from the run's description `spec` (see .dp_spec())
# and its shard of the data, on the device for its place among the replicas
# of this host (`local_rank`).
.dp_replica_new <- function(spec, rank, local_rank, shard) {
  rep <- new.env(parent = emptyenv())
  rep$rank <- rank
  rep$place <- .dp_place(spec$devices %||% .dp_devices(), local_rank)
  rep$seed <- if (rank == 1L) spec$build_seed else spec$seeds[[rank]]
  fns <- lapply(spec$fns, .dp_unpack_fn)
  rep$forward_fn <- fns$forward_fn
  rep$loss_fn <- fns$loss_fn
  rep$target_fn <- fns$target_fn
  rep$shard <- shard
  rep$lr <- spec$lr
  old <- .dp_enter(rep)
  rep$model <- tryCatch(fns$make_model(), finally = .dp_leave(rep, old))
  rep$params <- .dp_params_of(rep$model)
  # replica 1 builds with the caller's random state, then trains with its stream
  if (rank == 1L) rep$seed <- spec$seeds[[1L]]
  rep$keys <- vapply(rep$params, function(p) as.character(p$id), character(1L))
  rep$shapes <- lapply(rep$params, function(p) as.integer(p$shape))
  rep$sizes <- vapply(rep$shapes, prod, numeric(1L))
  rep
}

# What the driver needs to know of a replica.
.dp_replica_info <- function(rep) {
  list(rank = rep$rank, host = Sys.info()[["nodename"]], pid = Sys.getpid(),
       device = rep$place$name, note = rep$place$note,
       names = names(rep$params), shapes = unname(rep$shapes))
}

# The weights and running statistics as the bytes of the package's data
# container (data only, with a checksum).
.dp_replica_get_state <- function(rep) {
  .data_file_bytes(list(
    format = .dp_state_format,
    parameters = lapply(rep$params, function(p) .ag_plain_matrix(.ag_data(p))),
    buffers = .ag_buffers(rep$model)
  ))
}

.dp_replica_set_state <- function(rep, bytes) {
  .dp_install_state(rep$model, rep$params, bytes)
  invisible(TRUE)
}

# Installs the state `bytes` in `model` (whose parameters are `params`).
.dp_install_state <- function(model, params, bytes) {
  st <- .read_data_bytes(bytes, "the weights of replica 1", "dp_train")
  if (!is.list(st) || !identical(st$format, .dp_state_format)) stop("not the state of a replica")
  for (nm in names(params)) {
    v <- st$parameters[[nm]]
    if (!is.double(v) || !identical(as.integer(dim(v)), as.integer(params[[nm]]$shape))) {
      stop(sprintf("parameter '%s' does not match replica 1's", nm), call. = FALSE)
    }
    .ag_data_set(params[[nm]], v)
  }
  .ag_set_buffers(model, st$buffers)
  invisible(model)
}

# Optimizers start from the same (empty) state everywhere, after the
# weights were made equal.
.dp_replica_start <- function(rep) {
  old <- .dp_enter(rep)
  on.exit(.dp_leave(rep, old))
  rep$opt <- optimizer_adam(rep$params, lr = rep$lr)
  invisible(TRUE)
}

.dp_as_ag <- function(x) if (is_ag_tensor(x)) x else ag_tensor(x)

# Applies the averaged update `avg` (when not NULL), then, for step `t`
# (when not NULL), computes the loss and the gradients of this replica's
# sample: list(loss, grad = all gradients as one vector, has = which
# parameters have one).
.dp_replica_step <- function(rep, t, avg) {
  old <- .dp_enter(rep)
  on.exit(.dp_leave(rep, old))
  if (!is.null(avg)) .dp_replica_apply(rep, avg)
  if (is.null(t)) return(NULL)
  s <- rep$shard[[(t - 1L) %% length(rep$shard) + 1L]]
  fwd <- rep$forward_fn
  lossf <- rep$loss_fn
  tgtf <- rep$target_fn
  model <- rep$model
  with_grad_tape({
    out <- if (is.null(fwd)) model$forward(.dp_as_ag(s)) else fwd(model, s)
    loss <- if (is.null(lossf)) out else lossf(out, if (is.null(tgtf)) s else tgtf(s))
  })
  if (!is_ag_tensor(loss)) {
    stop(sprintf("the loss must be an ag_tensor (from loss_fn, or forward_fn without loss_fn), not %s",
                 .describe_value(loss)), call. = FALSE)
  }
  grads <- backward(loss)
  flat <- .dp_flatten(rep, grads)
  c(list(loss = sum(.ag_data(loss))), flat)
}

# All gradients of the replica's parameters, in order, as one vector
# (zeros for a parameter without one); the gradients are dropped from
# `grads` once read.
.dp_flatten <- function(rep, grads) {
  grad <- numeric(sum(rep$sizes))
  has <- logical(length(rep$keys))
  off <- 0
  for (i in seq_along(rep$keys)) {
    n <- rep$sizes[[i]]
    g <- get0(rep$keys[[i]], envir = grads, inherits = FALSE)
    if (!is.null(g)) {
      grad[off + seq_len(n)] <- g
      has[i] <- TRUE
      assign(rep$keys[[i]], NULL, envir = grads)
    }
    off <- off + n
  }
  list(grad = grad, has = has)
}

.dp_replica_apply <- function(rep, avg) {
  gl <- list()
  off <- 0
  for (i in seq_along(rep$keys)) {
    n <- rep$sizes[[i]]
    if (avg$has[[i]]) {
      gl[[rep$keys[[i]]]] <- matrix(avg$grad[off + seq_len(n)], rep$shapes[[i]][1L], rep$shapes[[i]][2L])
    }
    off <- off + n
  }
  rep$opt$step(gl)
  rep$opt$zero_grad()
  invisible(NULL)
}

# The model of replica 1 returned to the caller: its values on the host, so
# that it works with whatever backend the caller installs next.
.dp_replica_detach <- function(rep) {
  for (p in rep$params) .ag_data_set(p, .ag_data(p))
  rep$model
}
