# The timer shared by the benchmarks in this folder, which source this file
# (run on its own, as `make bench` does, it only defines the function).

# Seconds per call of f(): calls are timed in batches of at least 50 ms (the
# clock has millisecond resolution) until min_time has passed (3 batches at
# least); the fastest batch counts, as the least disturbed by other processes.
time_it <- function(f, min_time) {
  clock <- function() proc.time()[["elapsed"]]
  f()
  k <- 0
  t0 <- clock()
  while (clock() - t0 < 0.05) {
    f()
    k <- k + 1
  }
  best <- Inf
  n <- 0
  t_start <- clock()
  repeat {
    t0 <- clock()
    for (i in seq_len(k)) f()
    t1 <- clock()
    best <- min(best, (t1 - t0) / k)
    n <- n + 1
    if (n >= 3 && t1 - t_start >= min_time) return(best)
  }
}
