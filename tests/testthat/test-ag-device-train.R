# Training on device "gpu": optimizers update the resident weights in place,
# the ledger proves weights are not re-uploaded, errors leave things usable,
# and the iris classifier learns.

test_that("optimizers update resident weights in place, matching \"cpu\"", {
  set.seed(71)
  W0 <- matrix(stats::rnorm(6), 2, 3)
  x <- matrix(stats::rnorm(12), 3, 4)
  y <- matrix(stats::rnorm(8), 2, 4)
  for (mk in list(function(p) optimizer_sgd(p, lr = 0.1, momentum = 0.9),
                  function(p) optimizer_adam(p, lr = 0.05))) {
    run <- function(device) on_device(device, {
      w <- ag_param(W0)
      opt <- mk(list(w = w))
      ptrs <- list()
      for (i in 1:5) {
        with_grad_tape(loss <- ag_mse_loss(ag_matmul(w, x), y))
        opt$step(backward(loss))
        ptrs[[i]] <- w$ptr
      }
      list(w = w$data, ptrs = ptrs, w_t = w)
    })
    cpu <- run("cpu")
    gpu <- run("gpu")
    expect_f32_close(gpu$w, cpu$w, tol = 1e-4, what = "weights after 5 steps")
    expect_false(isTRUE(all.equal(gpu$w, W0)))
    # one handle, in the persistent pool, the same memory at every step
    for (p in gpu$ptrs) expect_identical(p, gpu$ptrs[[1]])
    expect_identical(gpu$w_t$ctx_scope, "persistent")
    expect_true(ggmlR:::.ag_ptr_is_live(gpu$w_t))
  }
})

test_that("over 100 steps on \"gpu\" no weight byte is uploaded after step 1", {
  set.seed(72)
  on_device("gpu", {
    model <- ag_sequential(ag_linear(4, 16), ag_batch_norm(16), list(forward = ag_relu),
                           ag_dropout(0.2), ag_linear(16, 3))
    opt <- optimizer_adam(model$parameters(), lr = 0.01)
    x <- matrix(stats::rnorm(4 * 32), 4, 32)
    y <- sample(0:2, 32, replace = TRUE)
    step <- function() {
      with_grad_tape(loss <- ag_softmax_cross_entropy_loss(model$forward(ag_tensor(x)), y))
      opt$step(backward(loss))
      loss$data[1]
    }
    # Models of the tests above are garbage by now: collect them first (their
    # device memory comes back at the next pass reset, inside step 1), so
    # that only this model's bytes are compared.
    gc()
    l1 <- step()
    s1 <- ag_memory_stats()
    for (i in 2:100) l <- step()
    s100 <- ag_memory_stats()
    expect_gt(s1$persistent_upload_bytes, 0)
    expect_identical(s100$persistent_upload_bytes - s1$persistent_upload_bytes, 0)
    expect_identical(s100$persistent_bytes, s1$persistent_bytes)
    # the pass pool did the traffic, and training made progress
    expect_gt(s100$pass_upload_bytes, s1$pass_upload_bytes)
    expect_lt(l, l1)
    for (p in model$parameters()) expect_identical(p$ctx_scope, "persistent")
  })
})

test_that("an error in the middle of a tape on \"gpu\" leaves everything usable", {
  set.seed(73)
  on_device("gpu", {
    w <- ag_param(matrix(stats::rnorm(6), 2, 3))
    opt <- optimizer_sgd(list(w = w), lr = 0.1)
    x <- matrix(stats::rnorm(12), 3, 4)
    with_grad_tape(loss <- ag_sum(ag_matmul(w, x)))
    opt$step(backward(loss))
    before <- w$data
    ptr <- w$ptr
    expect_error(with_grad_tape({
      h <- ag_matmul(w, x)
      ag_add(h, matrix(1, 3, 3))
    }), "do not match")
    expect_identical(w$data, before)
    expect_identical(w$ptr, ptr)
    with_grad_tape(loss <- ag_sum(ag_matmul(w, x)))
    g <- backward(loss)
    expect_equal(g[[as.character(w$id)]], matrix(rowSums(x), 2, 3, byrow = TRUE), tolerance = 1e-6)
    opt$step(g)
    expect_false(identical(w$data, before))
    expect_identical(w$ptr, ptr)
  })
})

test_that("gradients returned by backward() survive the next pass reset", {
  on_device("gpu", {
    w <- ag_param(matrix(1:6 / 6, 2, 3))
    x <- matrix(1:12 / 12, 3, 4)
    with_grad_tape(loss <- ag_sum(ag_matmul(w, x)))
    g <- backward(loss)
    with_grad_tape(loss2 <- ag_sum(ag_matmul(w, x)))  # resets the pass pool
    expect_equal(g[[as.character(w$id)]], matrix(rowSums(x), 2, 3, byrow = TRUE), tolerance = 1e-6)
    expect_equal(w$grad, matrix(rowSums(x), 2, 3, byrow = TRUE), tolerance = 1e-6)
    # an activation of the old pass is gone, with a readable error
    expect_error(loss$data, "freed")
  })
})

test_that("an iris classifier reaches 95% validation accuracy on \"gpu\"", {
  d <- iris_task()
  on_device("gpu", {
    fit <- iris_fit(d)
    model <- fit$model
    h <- fit$history
    m <- h$metrics
    expect_lt(m$loss[30], m$loss[1])
    expect_gte(m$val_accuracy[30], 0.95)
    for (p in model$parameters()) expect_identical(p$ctx_scope, "persistent")
  })
})

test_that("ag_dtype(\"f16\") and (\"bf16\") store parameters in half precision on \"gpu\"", {
  set.seed(74)
  W0 <- matrix(stats::rnorm(6), 2, 3)
  x <- matrix(stats::rnorm(12), 3, 4)
  y <- matrix(stats::rnorm(8), 2, 4)
  run <- function(device, dtype) on_device(device, {
    w <- ag_param(W0, dtype = dtype)
    opt <- optimizer_sgd(list(w = w), lr = 0.1)
    for (i in 1:3) {
      with_grad_tape(loss <- ag_mse_loss(ag_matmul(w, x), y))
      opt$step(backward(loss))
    }
    list(w = w$data, t = w)
  })
  cpu <- run("cpu", "f32")
  # f16 keeps 11 significant bits, bf16 8: tolerances of a few roundings
  for (case in list(list("f16", GGML_TYPE_F16, 5e-3), list("bf16", GGML_TYPE_BF16, 3e-2))) {
    h <- run("gpu", case[[1]])
    expect_identical(ggml_tensor_type(h$t$ptr), case[[2]])
    expect_identical(h$t$ctx_scope, "persistent")
    expect_f32_close(h$w, cpu$w, tol = case[[3]], what = paste(case[[1]], "weights"))
    expect_gt(max(abs(h$w - cpu$w)), 0)
  }
  # bf16 keeps fewer bits than f16, so its weights are further from cpu's
  expect_gt(max(abs(run("gpu", "bf16")$w - cpu$w)), max(abs(run("gpu", "f16")$w - cpu$w)))
})
