# Data-parallel training with dp_train(): steps per second of two MLPs with
# 1 and 2 replicas in this process and with 1 and 2 workers of a local PSOCK
# cluster, the bytes this process exchanges with the workers per step
# (measured: the serialised messages, both ways), and from those bytes an
# estimate of the all-reduce cost over a network of N hosts at a stated
# bandwidth, for the exchange dp_train() uses (every worker to and from the
# caller) and for a ring or tree all-reduce between workers.
#
# Each timed figure is the median of 3 runs; the machine's load average is
# printed beside them (on a busy machine, run it twice). Usage:
#   Rscript inst/bench/dp.R
suppressPackageStartupMessages(library(ggmlR))

load_avg <- function() {
  if (file.exists("/proc/loadavg")) strsplit(readLines("/proc/loadavg"), " ")[[1L]][1L] else NA_character_
}

sizes <- list(
  list(name = "MLP 8-32-4", d_in = 8L, d_h = 32L, d_out = 4L, n_iter = 60L),
  list(name = "MLP 256-512-256-10", d_in = 256L, d_h = 512L, d_out = 10L, n_iter = 20L)
)

make_problem <- function(s) {
  set.seed(1)
  x <- matrix(rnorm(s$d_in * 64L), s$d_in, 64L)
  lapply(seq_len(64L), function(i) list(x = x[, i, drop = FALSE], y = sample.int(s$d_out, 1L) - 1L))
}

maker <- function(s) {
  if (s$d_in > 100L) {
    function() ag_sequential(ag_linear(256L, 512L, "relu"), ag_linear(512L, 256L, "relu"), ag_linear(256L, 10L))
  } else {
    function() ag_sequential(ag_linear(8L, 32L, "relu"), ag_linear(32L, 4L))
  }
}

# One configuration: steps per second (median of 3 runs) and bytes per step.
run <- function(s, data, n, cluster = NULL) {
  make_model <- maker(s)
  one <- function() {
    set.seed(2)
    r <- dp_train(make_model, data,
                  loss_fn = function(out, y) ag_softmax_cross_entropy_loss(out, y),
                  forward_fn = function(model, smp) model$forward(ag_tensor(smp$x)),
                  target_fn = function(smp) smp$y,
                  n_gpu = n, n_iter = s$n_iter, lr = 1e-3, verbose = FALSE, cluster = cluster)
    attr(r, "dp")
  }
  one() # warm-up: workers load the package, the first graphs are built
  runs <- lapply(1:3, function(i) one())
  secs <- median(vapply(runs, `[[`, numeric(1L), "seconds"))
  list(steps_per_s = s$n_iter / secs, bytes = runs[[1L]]$bytes_per_step)
}

cat(sprintf("dp_train() on %s, %d cores; load average at start %s\n",
            Sys.info()[["nodename"]], parallel::detectCores(), load_avg()))
cl <- parallel::makePSOCKcluster(2L)
invisible(parallel::clusterEvalQ(cl, suppressPackageStartupMessages(library(ggmlR))))

measured <- list()
for (s in sizes) {
  data <- make_problem(s)
  n_params <- sum(vapply(maker(s)()$parameters(), function(p) prod(p$shape), numeric(1L)))
  cat(sprintf("\n== %s (%d parameters, %s of f64 gradients), %d steps per run\n",
              s$name, n_params, format(structure(8 * n_params, class = "object_size"), units = "auto"),
              s$n_iter))
  cat(sprintf("%-28s %10s %12s %14s %8s\n", "", "steps/s", "samples/s", "bytes/step", "load"))
  rows <- list(
    list(label = "1 replica, this process", n = 1L, cluster = NULL),
    list(label = "2 replicas, this process", n = 2L, cluster = NULL),
    list(label = "1 PSOCK worker", n = 1L, cluster = cl),
    list(label = "2 PSOCK workers", n = 2L, cluster = cl)
  )
  for (row in rows) {
    m <- run(s, data, row$n, row$cluster)
    cat(sprintf("%-28s %10.1f %12.1f %14s %8s\n", row$label, m$steps_per_s, m$steps_per_s * row$n,
                if (is.null(row$cluster)) "-" else format(round(m$bytes), big.mark = ","), load_avg()))
    if (!is.null(row$cluster)) measured[[sprintf("%s/%d", s$name, row$n)]] <- list(n_params = n_params, bytes = m$bytes, n = row$n)
  }
}

# The network estimate. dp_train() sends every worker the averaged gradient
# and receives its gradient: per step the caller's link carries N times the
# bytes of one worker, B(1) = measured bytes per step with one worker (half
# each way, on a full-duplex link), so t_star(N) = N * B(1) / 2 / bandwidth
# (plus one round trip), linear in N.
# A ring all-reduce between workers (reduce-scatter then all-gather over
# worker-to-worker sockets) moves 2 (N - 1) / N * G bytes in and out of each
# host, G = the gradient's bytes: t_ring(N) = 2 (N - 1) / N * G / bandwidth
# + 2 (N - 1) latencies, almost flat in N; a binary tree (reduce to a root,
# then broadcast) moves 2 log2(N) * G: t_tree = 2 ceiling(log2 N) * G /
# bandwidth + 2 ceiling(log2 N) latencies, fewer latencies for small G.
cat("\n== estimated all-reduce time per step over a network (ms), latency 0.1 ms a hop\n")
cat("   star: every worker to and from the caller (dp_train() now), from the measured bytes per step with 1 worker\n")
cat("   (full-duplex links: the bytes each way count)\n")
cat("   ring / tree: between workers, f64 gradients (G = 8 bytes a parameter); halve for f32\n")
lat <- 1e-4
for (s in sizes) {
  b1 <- measured[[sprintf("%s/1", s$name)]]
  G <- 8 * b1$n_params
  for (gbit in c(1, 10)) {
    bw <- gbit * 1e9 / 8
    cat(sprintf("%-22s %3g Gbit/s:", s$name, gbit))
    for (N in c(2L, 8L, 16L, 64L)) {
      star <- N * b1$bytes / 2 / bw + 2 * lat
      ring <- 2 * (N - 1) / N * G / bw + 2 * (N - 1) * lat
      tree <- 2 * ceiling(log2(N)) * (G / bw + lat)
      cat(sprintf("  N=%-2d star %7.2f ring %6.2f tree %6.2f", N, star * 1e3, ring * 1e3, tree * 1e3))
    }
    cat("\n")
  }
}
b2 <- measured[[sprintf("%s/2", sizes[[2L]]$name)]]
b1 <- measured[[sprintf("%s/1", sizes[[2L]]$name)]]
cat(sprintf("\nbytes per step: 2 workers / 1 worker = %.2f (the caller's traffic grows linearly with workers);",
            b2$bytes / b1$bytes),
    sprintf("bytes per parameter per worker per step: %.1f\n", b1$bytes / b1$n_params))
parallel::stopCluster(cl)
cat(sprintf("load average at end %s\n", load_avg()))
