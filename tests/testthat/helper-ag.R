# Oracles for the autograd tests: base R forward functions and central finite
# differences computed on them, independent of the engine.

fd_grad <- function(f, m, h = 1e-6) {
  g <- m
  for (k in seq_along(m)) {
    mp <- m; mp[k] <- m[k] + h
    mm <- m; mm[k] <- m[k] - h
    g[k] <- (f(mp) - f(mm)) / (2 * h)
  }
  g
}

max_abs <- function(a, b) max(abs(a - b))

# Checks an op: forward against `r_fn` within `tol`, the gradient of
# sum(op(inputs) * W) against finite differences of the base R function, and
# ag_gradcheck. `ag_fn` takes a list of tensors, `r_fn` a list of matrices.
# `grad` selects the inputs that get a gradient.
check_op <- function(ag_fn, r_fn, inputs, grad = rep(TRUE, length(inputs)),
                     tol = 1e-10, gtol = 1e-6) {
  names(inputs) <- paste0("x", seq_along(inputs))
  ts <- Map(function(m, g) if (g) ag_param(m) else ag_tensor(m), inputs, grad)
  want <- r_fn(inputs)
  with_grad_tape(out <- ag_fn(ts))
  expect_equal(dim(out$data), dim(want))
  expect_lt(max_abs(out$data, want), tol)
  W <- matrix(stats::runif(length(want), -1, 1), nrow(want))
  with_grad_tape(loss <- ag_sum(ag_mul(ag_fn(ts), W)))
  backward(loss)
  for (i in which(grad)) {
    num <- fd_grad(function(m) { ins <- inputs; ins[[i]] <- m; sum(r_fn(ins) * W) }, inputs[[i]])
    expect_lt(max_abs(ts[[i]]$grad, num), gtol)
  }
  expect_true(ag_gradcheck(function(l) ag_sum(ag_mul(ag_fn(l), W)), ts, quiet = TRUE))
  invisible(ts)
}

rmat <- function(r, c, lo = -1, hi = 1) matrix(stats::runif(r * c, lo, hi), r, c)

# The iris task of the acceptance tests: a fixed 120/30 split (40 per class
# for training), features standardised with the training statistics, samples
# as columns; and the 4-64-32-3 classifier with batch norm and dropout,
# trained with Adam at batch 32 for 30 epochs.
iris_task <- function() {
  set.seed(1)
  X <- as.matrix(iris[, 1:4])
  y <- as.integer(iris$Species) - 1L
  tr <- unlist(lapply(split(seq_len(150), iris$Species), function(i) sample(i, 40)))
  va <- setdiff(seq_len(150), tr)
  mu <- colMeans(X[tr, ]); s <- apply(X[tr, ], 2, sd)
  list(x = t(sweep(sweep(X, 2, mu), 2, s, "/")), y = y, tr = tr, va = va)
}

iris_fit <- function(d) {
  model <- ag_sequential(
    ag_linear(4, 64), ag_batch_norm(64), list(forward = ag_relu), ag_dropout(0.3),
    ag_linear(64, 32), ag_batch_norm(32), list(forward = ag_relu), ag_dropout(0.3),
    ag_linear(32, 3))
  h <- ag_fit(model, d$x[, d$tr], d$y[d$tr],
              optimizer = optimizer_adam(model$parameters(), lr = 0.02),
              epochs = 30, batch_size = 32, validation = list(d$x[, d$va], d$y[d$va]),
              verbose = FALSE)
  list(model = model, history = h)
}
