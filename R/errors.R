# Errors from the engine arrive as values of class `ggmlR_rust_error`
# (see src/rust/ggmlr/src/guard.rs); .rs() signals them as R conditions of
# class c(<engine class>, "ggmlR_error", "error", "condition"), attributed to
# the user-facing function that called into the engine.
.rs <- function(x, call = sys.call(-1L)) {
  if (inherits(x, "ggmlR_rust_error")) {
    if ("interrupt" %in% x$class) .interrupt()
    if ("ggmlR_abort" %in% x$class) invokeRestart("abort")
    cls <- c(x$class, "ggmlR_error", "error", "condition")
    stop(structure(class = unique(cls), list(message = x$message, call = call)))
  }
  x
}

# Signal a classed R-side argument error.
.abort <- function(message, class = NULL, call = sys.call(-1L)) {
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
