# Finite differences of an op, for checking backward ops: the op `build`
# (as run_graph takes it) is computed in f64 on the CPU, and
# sum_j dy_j d out_j / d inputs[[wrt]]_i is estimated by central differences.
# `types` gives the types of inputs that are not f64 (i32 indices).
fd_vjp <- function(inputs, wrt, build, dy, types = list(), h = 1e-6) {
  all_types <- setNames(rep(list(28L), length(inputs)), names(inputs))
  all_types[names(types)] <- types
  f <- function(v) {
    inp <- inputs
    inp[[wrt]][] <- v
    as.vector(run_graph(function() ggml_backend_cpu_init(), inp, build, types = all_types))
  }
  x <- as.vector(inputs[[wrt]])
  vapply(seq_along(x), function(i) {
    xp <- x
    xm <- x
    xp[i] <- xp[i] + h
    xm[i] <- xm[i] - h
    sum((f(xp) - f(xm)) / (2 * h) * as.vector(dy))
  }, numeric(1))
}
