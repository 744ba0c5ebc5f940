# Data-parallel training: small problems, models with fixed initial weights,
# and an oracle written as a plain training loop over the public autograd API.

dp_problem <- function(n = 24L, d_in = 3L, d_out = 2L, seed = 11L) {
  set.seed(seed)
  x <- matrix(stats::rnorm(d_in * n), d_in, n)
  y <- rbind(x[1L, ] - x[2L, ], 0.5 * x[3L, ] + 0.2)[seq_len(d_out), , drop = FALSE]
  lapply(seq_len(n), function(i) list(x = x[, i, drop = FALSE], y = y[, i, drop = FALSE], i = i))
}

# An MLP whose initial weights depend on nothing random.
dp_fixed_mlp <- function(d_in = 3L, hidden = 8L, d_out = 2L) {
  m <- ag_sequential(ag_linear(d_in, hidden, "relu"), ag_linear(hidden, d_out))
  for (p in m$parameters()) {
    p$data <- matrix(sin(seq_len(prod(p$shape)) * 0.7 + p$shape[1L]), p$shape[1L], p$shape[2L])
  }
  m
}

dp_mse <- function(out, y) ag_mse_loss(out, y)
dp_fwd <- function(model, s) model$forward(ag_tensor(s$x))
dp_tgt <- function(s) s$y

dp_weights <- function(res) unlist(lapply(res$params, function(p) p$data))

# R replicas as one loop: at step t, replica r takes sample
# ((t - 1) * R + r - 1) %% n + 1; the gradients of the R samples are
# averaged, clipped to max_norm and given to Adam.
dp_oracle <- function(make_model, data, R, n_iter, lr, max_norm = Inf) {
  m <- make_model()
  params <- m$parameters()
  opt <- optimizer_adam(params, lr = lr)
  keys <- vapply(params, function(p) as.character(p$id), "")
  losses <- numeric(n_iter)
  for (t in seq_len(n_iter)) {
    sum_g <- lapply(params, function(p) matrix(0, p$shape[1L], p$shape[2L]))
    l <- 0
    for (r in seq_len(R)) {
      s <- data[[((t - 1L) * R + r - 1L) %% length(data) + 1L]]
      with_grad_tape(loss <- dp_mse(dp_fwd(m, s), dp_tgt(s)))
      g <- backward(loss)
      for (k in seq_along(keys)) sum_g[[k]] <- sum_g[[k]] + g[[keys[k]]]
      l <- l + sum(loss$data)
      opt$zero_grad()
    }
    avg <- lapply(sum_g, function(g) g / R)
    norm <- sqrt(sum(vapply(avg, function(g) sum(g^2), 0)))
    if (norm > max_norm) avg <- lapply(avg, function(g) g * max_norm / (norm + 1e-6))
    names(avg) <- keys
    opt$step(avg)
    opt$zero_grad()
    losses[t] <- l / R
  }
  list(weights = unlist(lapply(params, function(p) p$data)), loss = losses)
}
