# What dp_train() sends to cluster workers: the user's functions and the
# shards of the data. Values that live only in this R process (ag_tensors,
# ggml objects, external pointers, connections) cannot travel; they are found
# before any worker is contacted and named, with what to change.

# Environments serialised by reference (by name), whose contents never travel.
.dp_special_env <- function(e) {
  identical(e, globalenv()) || identical(e, baseenv()) || identical(e, emptyenv()) ||
    isNamespace(e) || startsWith(attr(e, "name") %||% "", "package:")
}

# The first value inside `x` that cannot travel to another R process, as
# list(path, what), or NULL. `path` is how the user names `x`; `seen` holds
# the environments already walked.
.dp_unportable <- function(x, path, seen) {
  if (is.null(x) || is.atomic(x) && is.null(attributes(x))) return(NULL)
  found <- function(what) list(path = path, what = what)
  if (is_ag_tensor(x)) return(found("an ag_tensor"))
  if (inherits(x, "connection")) return(found("a connection"))
  if (typeof(x) %in% c("externalptr", "weakref")) return(found("an external pointer"))
  if (any(startsWith(class(x), "ggml_")) || inherits(x, "ncnn_net")) {
    return(found(sprintf("a %s object", class(x)[1L])))
  }
  if (is.environment(x)) {
    if (.dp_special_env(x)) return(NULL)
    key <- format(x)
    if (!is.null(seen[[key]])) return(NULL)
    seen[[key]] <- TRUE
    for (nm in ls(x, all.names = TRUE, sorted = TRUE)) {
      if (bindingIsActive(nm, x)) next
      why <- .dp_unportable(get(nm, envir = x, inherits = FALSE), sprintf("%s$%s", path, nm), seen)
      if (!is.null(why)) return(why)
    }
    return(NULL)
  }
  if (is.function(x)) {
    for (g in .dp_fn_globals(x)) {
      why <- .dp_unportable(g$value, g$name, seen)
      if (!is.null(why)) return(why)
    }
    return(NULL)
  }
  if (is.list(x) || is.pairlist(x)) {
    nms <- names(x)
    for (i in seq_along(x)) {
      nm <- if (is.null(nms)) "" else nms[i]
      sub <- if (!is.na(nm) && nzchar(nm) && make.names(nm) == nm) {
        sprintf("%s$%s", path, nm)
      } else {
        sprintf("%s[[%d]]", path, i)
      }
      why <- .dp_unportable(x[[i]], sub, seen)
      if (!is.null(why)) return(why)
    }
  }
  for (a in setdiff(names(attributes(x)), c("names", "dim", "dimnames", "class", "row.names", "levels"))) {
    why <- .dp_unportable(attr(x, a, exact = TRUE), sprintf("attr(%s, \"%s\")", path, a), seen)
    if (!is.null(why)) return(why)
  }
  NULL
}

# The variables a function uses (its free variables) that live in its
# enclosing environments or in the global environment, not in base R or a
# package: list(name, value, global) for each, `global` telling those found
# in the global environment. These travel with the function.
.dp_fn_globals <- function(f) {
  if (is.primitive(f) || !requireNamespace("codetools", quietly = TRUE)) return(list())
  start <- environment(f)
  if (.dp_special_env(start) && !identical(start, globalenv())) return(list())
  out <- list()
  for (nm in codetools::findGlobals(f, merge = TRUE)) {
    e <- start
    repeat {
      if (.dp_special_env(e) && !identical(e, globalenv())) break
      if (exists(nm, envir = e, inherits = FALSE)) {
        if (!bindingIsActive(nm, e)) {
          out[[length(out) + 1L]] <- list(name = nm, value = get(nm, envir = e, inherits = FALSE),
                                          global = identical(e, globalenv()))
        }
        break
      }
      if (identical(e, globalenv())) break
      e <- parent.env(e)
    }
  }
  out
}

# Refuse, before any worker is contacted, a function or data that cannot
# travel; `what` names the argument.
.dp_check_portable <- function(x, what, call) {
  why <- .dp_unportable(x, what, new.env(parent = emptyenv()))
  if (is.null(why)) return(invisible(x))
  fix <- switch(why$what,
    "an ag_tensor" = "an ag_tensor lives in this R process only",
    "a connection" = "a connection cannot be used from another R process",
    "an external pointer" = "an external pointer refers to memory of this R process",
    "it refers to memory of this R process")
  todo <- if (is.function(x)) {
    sprintf("create such values inside `%s` so that each worker makes its own", what)
  } else if (identical(why$what, "an ag_tensor")) {
    "give plain matrices (the tensor's `$data`) instead"
  } else {
    "give plain R values (numbers, matrices, lists) instead"
  }
  where <- if (is.function(x)) sprintf("it uses `%s`, which", why$path) else why$path
  .abort(sprintf("cannot send `%s` to the cluster's workers: %s is %s (%s); %s.",
                 what, where, why$what, fix, todo),
         class = "ggmlR_dp_error", call = call)
}

# A function made at the top level finds the caller's global variables,
# which a worker does not have: those it uses travel with it, and on the
# worker it runs in an environment that holds them (under the worker's
# global environment). Functions among them travel the same way.
.dp_pack_fn <- function(f) {
  if (!is.function(f) || !identical(environment(f), globalenv())) return(list(fn = f, globals = list()))
  globals <- list()
  todo <- list(f)
  while (length(todo)) {
    g <- todo[[1L]]
    todo <- todo[-1L]
    for (v in .dp_fn_globals(g)) {
      if (!v$global || !is.null(globals[[v$name]])) next
      globals[[v$name]] <- v$value
      if (is.function(v$value) && identical(environment(v$value), globalenv())) {
        todo[[length(todo) + 1L]] <- v$value
      }
    }
  }
  list(fn = f, globals = globals)
}

.dp_unpack_fn <- function(p) {
  f <- p$fn
  if (!length(p$globals) || !is.function(f)) return(f)
  e <- new.env(parent = globalenv())
  for (nm in names(p$globals)) {
    v <- p$globals[[nm]]
    if (is.function(v) && identical(environment(v), globalenv())) environment(v) <- e
    assign(nm, v, envir = e)
  }
  environment(f) <- e
  f
}
