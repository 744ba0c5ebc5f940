# Every op and loss on device "gpu" (graphs on the residency backend, f32)
# against device "cpu" (f64 on the host), forward and gradient; and
# ag_gradcheck on "gpu" with a step and tolerance suited to f32.

set.seed(61)
rm_ <- function(r, c, lo = -1, hi = 1) matrix(stats::runif(r * c, lo, hi), r, c)
oh <- diag(3)[, c(1, 3, 2, 2)]
bn <- function(l) .ag_op("batch_norm", list(l[[1]], l[[2]], l[[3]]), c(1e-5, 1))
cases <- list(
  matmul   = list(function(l) ag_matmul(l[[1]], l[[2]]), list(rm_(3, 4), rm_(4, 2))),
  linear   = list(function(l) .ag_op("linear", list(l[[1]], l[[2]], l[[3]]), 1),
                  list(rm_(3, 4), rm_(4, 5), rm_(3, 1))),
  add      = list(function(l) ag_add(l[[1]], l[[2]]), list(rm_(3, 4), rm_(3, 4))),
  add_col  = list(function(l) ag_add(l[[1]], l[[2]]), list(rm_(3, 4), rm_(3, 1))),
  add_rcy  = list(function(l) ag_add(l[[1]], l[[2]]), list(rm_(1, 4), rm_(3, 4))),
  sub      = list(function(l) ag_sub(l[[1]], l[[2]]), list(rm_(3, 4), rm_(1, 4))),
  mul      = list(function(l) ag_mul(l[[1]], l[[2]]), list(rm_(3, 4), rm_(3, 4))),
  div      = list(function(l) ag_div(l[[1]], l[[2]]), list(rm_(3, 4), rm_(3, 4, 0.5, 2))),
  scale    = list(function(l) ag_scale(l[[1]], -2.5), list(rm_(3, 4))),
  relu     = list(function(l) ag_relu(l[[1]]), list(rm_(3, 4))),
  sigmoid  = list(function(l) ag_sigmoid(l[[1]]), list(rm_(3, 4))),
  tanh     = list(function(l) ag_tanh(l[[1]]), list(rm_(3, 4))),
  log      = list(function(l) ag_log(l[[1]]), list(rm_(3, 4, 0.5, 2))),
  exp      = list(function(l) ag_exp(l[[1]]), list(rm_(3, 4))),
  pow      = list(function(l) ag_pow(l[[1]], 3), list(rm_(3, 4))),
  clamp    = list(function(l) ag_clamp(l[[1]], -0.5, 0.5), list(rm_(3, 4))),
  softmax  = list(function(l) ag_softmax(l[[1]]), list(rm_(3, 4))),
  sum      = list(function(l) ag_sum(l[[1]]), list(rm_(3, 4))),
  sum_rows = list(function(l) ag_sum(l[[1]], dim = 1), list(rm_(3, 4))),
  mean_col = list(function(l) ag_mean(l[[1]], dim = 2), list(rm_(3, 4))),
  mean     = list(function(l) ag_mean(l[[1]]), list(rm_(3, 4))),
  reshape  = list(function(l) ag_reshape(l[[1]], 2, 6), list(rm_(3, 4))),
  transp   = list(function(l) ag_transpose(l[[1]]), list(rm_(3, 4))),
  gather   = list(function(l) .ag_op("gather", list(l[[1]]), idx = c(2L, 0L, 2L)), list(rm_(3, 4))),
  slice    = list(function(l) .ag_op("slice_rows", list(l[[1]]), c(1, 3)), list(rm_(4, 3))),
  concat   = list(function(l) .ag_op("concat_rows", list(l[[1]], l[[2]])), list(rm_(2, 3), rm_(1, 3))),
  batch_norm = list(bn, list(rm_(3, 6), rm_(3, 1, 0.5, 1.5), rm_(3, 1))),
  bn_eval  = list(function(l) .ag_op("batch_norm", l, c(1e-5, 0)),
                  list(rm_(3, 6), rm_(3, 1, 0.5, 1.5), rm_(3, 1), rm_(3, 1), rm_(3, 1, 0.5, 2)),
                  c(TRUE, TRUE, TRUE, FALSE, FALSE)),
  add_both = list(function(l) ag_add(l[[1]], l[[2]]), list(rm_(3, 1), rm_(1, 4))),
  mul_rcy  = list(function(l) ag_mul(l[[1]], l[[2]]), list(rm_(3, 1), rm_(3, 4))),
  div_row  = list(function(l) ag_div(l[[1]], l[[2]]), list(rm_(3, 4), rm_(1, 4, 0.5, 2))),
  pow_neg  = list(function(l) ag_pow(l[[1]], -2), list(rm_(3, 4, 0.5, 2))),
  pow_frac = list(function(l) ag_pow(l[[1]], 1.5), list(rm_(3, 4, 0.5, 2))),
  sum_cols = list(function(l) ag_sum(l[[1]], dim = 2), list(rm_(3, 4))),
  mean_row = list(function(l) ag_mean(l[[1]], dim = 1), list(rm_(3, 4))),
  slice_top = list(function(l) .ag_op("slice_rows", list(l[[1]]), c(0, 2)), list(rm_(4, 3))),
  mse      = list(function(l) ag_mse_loss(l[[1]], l[[2]]), list(rm_(3, 4), rm_(3, 4))),
  ce       = list(function(l) ag_cross_entropy_loss(l[[1]], l[[2]]), list(rm_(3, 4, 0.1, 0.9), oh),
                  c(TRUE, FALSE)),
  softmax_ce = list(function(l) ag_softmax_cross_entropy_loss(l[[1]], l[[2]]), list(rm_(3, 4), oh),
                    c(TRUE, FALSE))
)

test_that("every op and loss on \"gpu\" matches \"cpu\" within f32 tolerance", {
  for (nm in names(cases)) {
    cs <- cases[[nm]]
    grad <- if (length(cs) > 2) cs[[3]] else rep(TRUE, length(cs[[2]]))
    cpu <- run_op("cpu", cs[[1]], cs[[2]], grad)
    gpu <- run_op("gpu", cs[[1]], cs[[2]], grad, W = cpu$W)
    expect_f32_close(gpu$value, cpu$value, what = paste(nm, "forward"))
    for (i in seq_along(cpu$grads)) {
      expect_f32_close(gpu$grads[[i]], cpu$grads[[i]], what = paste(nm, "gradient", i))
    }
    # the gpu run really was on the device: parameters are resident
    p <- gpu$ts[grad][[1]]
    expect_identical(p$ctx_scope, "persistent", info = nm)
  }
})

test_that("ag_gradcheck passes for every op and loss on \"gpu\"", {
  for (nm in names(cases)) {
    cs <- cases[[nm]]
    grad <- if (length(cs) > 2) cs[[3]] else rep(TRUE, length(cs[[2]]))
    ok <- on_device("gpu", {
      ts <- Map(function(m, g) if (g) ag_param(m) else ag_tensor(m), cs[[2]], grad)
      W <- NULL
      with_grad_tape(o <- cs[[1]](ts))
      W <- matrix(seq_along(o$data) %% 3 - 1 + 0.5, nrow(o$data))
      ag_gradcheck(function(l) ag_sum(ag_mul(cs[[1]](l), W)), ts, eps = 1e-2, atol = 2e-2,
                   quiet = TRUE)
    })
    expect_true(ok, label = paste("gradcheck on gpu:", nm))
  }
})

test_that("a wrong gradient fails ag_gradcheck on \"gpu\" (the check can fail)", {
  on_device("gpu", {
    x <- ag_param(rm_(3, 2))
    # sum(x * x) recorded through a constant copy of x: half the true gradient
    f <- function(l) ag_sum(ag_mul(l[[1]], l[[1]]$data))
    expect_false(ag_gradcheck(f, list(x = x), eps = 1e-2, atol = 2e-2, quiet = TRUE))
  })
})
