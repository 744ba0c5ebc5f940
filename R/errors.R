# Errors from the engine arrive as values of class `ggmlR_rust_error`
# (see src/rust/ggmlr/src/guard.rs); .rs() signals them as R conditions of
# class c(<engine class>, "ggmlR_error", "error", "condition"), attributed to
# the user-facing function that called into the engine.
.rs <- function(x, call = .user_call()) {
  if (inherits(x, "ggmlR_rust_error")) {
    call <- .public_call(call)
    if ("interrupt" %in% x$class) .interrupt()
    if ("ggmlR_abort" %in% x$class) invokeRestart("abort")
    cls <- c(x$class, "ggmlR_error", "error", "condition")
    stop(structure(class = unique(cls), list(message = x$message, call = call)))
  }
  x
}

# Signal a classed R-side argument error.
.abort <- function(message, class = NULL, call = .user_call()) {
  call <- .public_call(call)
  stop(structure(
    class = c(class, "ggmlR_error", "error", "condition"),
    list(message = message, call = call)
  ))
}

# R's own interrupt, as Ctrl-C raises it: the handlers of class "interrupt"
# run (tryCatch(interrupt =), withCallingHandlers()), and when none leaves,
# evaluation goes back to the top level. The engine stopped the computation
# between steps and cleared R's pending flag (src/rust/ggmlr/src/interrupt.rs).
.interrupt <- function() {
  signalCondition(structure(class = c("interrupt", "condition"), list()))
  invokeRestart("abort")
}

# `call`, unless it calls one of the package's internal helpers (".x()",
# "rs_x()") or a function of base R (`sys.call(-2L)` under tryCatch() is
# doTryCatch()): then the user's call. A helper's default `call = sys.call(-1L)`
# forced inside an argument of another call (`rs_get(t, .offset(t, o))`)
# names that call, not the function the user called.
.public_call <- function(call) {
  f <- if (is.call(call)) call[[1L]]
  if (!is.symbol(f)) return(call)
  nm <- as.character(f)
  base <- nm %in% .plumbing || exists(nm, envir = .BaseNamespaceEnv, inherits = FALSE)
  if (grepl("^(\\.|rs_)", nm) || base) .user_call() else call
}

# Base R's plumbing, some of it local to tryCatch() (doTryCatch()): never the
# user's call.
.plumbing <- c("tryCatch", "tryCatchList", "tryCatchOne", "doTryCatch", "withCallingHandlers",
               "withRestarts", "withOneRestart", "doWithOneRestart", "force", "eval", "evalq",
               "lapply", "vapply", "sapply", "Map", "mapply", "FUN", "do.call", "Recall",
               "stop", "signalCondition", "identity", "invisible", "structure")

# The call of the user's function that is failing: the innermost call on the
# stack that is neither one of the package's internal helpers (names that
# start with ".") nor base R's (tryCatch(), lapply(), inherits(), ...), so that
# an error names ggml_new_tensor(), not .new_tensor() or rs_new_tensor().
.user_call <- function() {
  calls <- sys.calls()
  for (i in rev(seq_along(calls))) {
    f <- calls[[i]][[1L]]
    if (is.symbol(f)) {
      nm <- as.character(f)
      if (startsWith(nm, ".") || startsWith(nm, "rs_") || nm %in% .plumbing) next
      # Base R's functions that force an argument holding the failing call
      # (inherits(x) in .rs(rs_get(.offset(...)))) are not the user's.
      fn <- sys.function(i)
      if (is.primitive(fn) || identical(topenv(environment(fn)), .BaseNamespaceEnv)) next
    } else if (is.function(f)) {
      next
    }
    return(calls[[i]])
  }
  NULL
}
