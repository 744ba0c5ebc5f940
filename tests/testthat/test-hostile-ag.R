# Hostile arguments to the ag_* API: products and layers larger than the
# machine's memory, optimizer settings that turn weights into NaN, parameters
# listed twice, a failed backward(), and argument checks that used to leak
# base R's messages. Cases that could crash run in a child process.

test_that("products and layers larger than memory are errors, not aborts", {
  expect_hostile_errors(list(
    matmul_outer = hcase(ag_matmul(ag_tensor(matrix(1, 1e5, 1)), ag_tensor(matrix(1, 1, 1e5))), "cannot allocate .*GiB.*machine's memory"),
    matmul_param = hcase(ag_matmul(ag_param(matrix(1, 2e5, 1)), ag_tensor(matrix(1, 1, 2e5))), "cannot allocate"),
    add_broadcast = hcase(ag_add(ag_tensor(matrix(1, 2e5, 1)), ag_tensor(matrix(1, 1, 2e5))), "cannot allocate"),
    linear_huge = hcase(ag_linear(1e10, 1e10), "`in_features` is 1e\\+10, more than the largest size"),
    linear_big = hcase(ag_linear(1e5, 1e5), "the weight matrix would take .*GiB, more than this machine's memory"),
    embedding_big = hcase(ag_embedding(1e9, 1e3), "embedding table would take"),
    attention_big = hcase(ag_multihead_attention(2e5, 2), "projection matrix"),
    tensor_huge_gpu = hcase({ ag_device("gpu"); ag_matmul(ag_tensor(matrix(1, 1e5, 1)), ag_tensor(matrix(1, 1, 1e5))) }, "cannot allocate|budget|memory")
  ), timeout = 180)
})

test_that("argument checks name the function and the argument, with class ggmlR_error", {
  expect_hostile_errors(list(
    linear_act_vec = hcase(ag_linear(4, 3, activation = c("relu", "tanh")), "`activation` must be NULL or .*not a character vector of length 2"),
    linear_act_bad = hcase(ag_linear(4, 3, activation = "swish"), "`activation` must be"),
    linear_na = hcase(ag_linear(NA, 3), "`in_features` must be a positive whole number"),
    linear_frac = hcase(ag_linear(2.5, 3), "positive whole number, not 2.5"),
    linear_neg = hcase(ag_linear(4, -1), "`out_features`"),
    embedding_2_31 = hcase(ag_embedding(5, 3)$forward(2^31), "embedding index 2147483648 .* out of range 0..4"),
    embedding_neg = hcase(ag_embedding(5, 3)$forward(-1), "out of range"),
    embedding_na = hcase(ag_embedding(5, 3)$forward(NA), "whole numbers"),
    dropout_one = hcase(ag_dropout(1), "`rate`"),
    dropout_na = hcase(ag_dropout(NA), "`rate`"),
    batch_norm_momentum = hcase(ag_batch_norm(3, momentum = 2), "`momentum` must be a single finite number in \\[0, 1\\]"),
    batch_norm_eps = hcase(ag_batch_norm(3, eps = -1), "`eps`"),
    attention_heads = hcase(ag_multihead_attention(6, 4), "multiple"),
    attention_dropout = hcase(ag_multihead_attention(8, 2, dropout = 3), "`dropout`"),
    attention_bias = hcase(ag_multihead_attention(8, 2, bias = NA), "`bias`"),
    tensor_chr = hcase(ag_tensor(matrix("a", 2, 2)), NULL),
    tensor_list = hcase(ag_tensor(list(1, 2)), NULL),
    sequential_junk = hcase(ag_sequential(ag_linear(2, 2), 42), "not a layer"),
    mse_shape = hcase(ag_mse_loss(ag_tensor(matrix(1, 2, 2)), matrix(1, 3, 3)), NULL),
    backward_not_tensor = hcase(backward(42), "`loss` must be an ag_tensor"),
    device_bad = hcase(ag_device("tpu"), NULL),
    memory_limit_neg = hcase(ag_memory_limit(-5), "positive"),
    memory_limit_na = hcase(ag_memory_limit(NA), NULL)
  ))
})

test_that("the calls in argument errors are the user's, not internal helpers", {
  e <- tryCatch(ggml_new_tensor(ggml_init(1024), GGML_TYPE_F32, n_dims = NA, ne = 1), error = identity)
  expect_s3_class(e, "ggmlR_error")
  expect_identical(deparse(conditionCall(e)[[1]]), "ggml_new_tensor")
  expect_match(conditionMessage(e), "`n_dims` must be 1, 2, 3, 4 or 5, not NA")
  e <- tryCatch(ggml_new_tensor_1d(ggml_init(1024), GGML_TYPE_F32, -3), error = identity)
  expect_identical(deparse(conditionCall(e)[[1]]), "ggml_new_tensor_1d")
  e <- tryCatch(ag_linear(4, 3, activation = c("relu", "tanh")), error = identity)
  expect_identical(deparse(conditionCall(e)[[1]]), "ag_linear")
  e <- tryCatch(ag_save_model(ag_linear(2, 2), NA), error = identity)
  expect_identical(deparse(conditionCall(e)[[1]]), "ag_save_model")
  expect_match(conditionMessage(e), "`path` must be the path of a file .*not NA")
})

test_that("optimizer settings that would give NaN weights are refused", {
  w <- ag_param(matrix(1, 2, 2))
  ps <- list(w = w)
  for (bad in list(1, 1.5, -0.1, NA, NaN, Inf, "0.9", c(0.9, 0.9))) {
    expect_error(optimizer_adam(ps, beta1 = bad), "`beta1`", class = "ggmlR_error")
    expect_error(optimizer_adamw(ps, beta2 = bad), "`beta2`", class = "ggmlR_error")
  }
  expect_error(optimizer_adam(ps, eps = 0), "`eps` must be a single finite number in \\(0, Inf\\]", class = "ggmlR_error")
  expect_error(optimizer_adam(ps, lr = NA), "`lr`", class = "ggmlR_error")
  expect_error(optimizer_sgd(ps, lr = -1), "`lr`", class = "ggmlR_error")
  expect_error(optimizer_sgd(ps, momentum = 1), "`momentum`", class = "ggmlR_error")
  expect_error(optimizer_adamw(ps, weight_decay = -1), "`weight_decay`", class = "ggmlR_error")
  # a learning rate set to NA after creation is refused at the step, and the
  # weights are untouched
  opt <- optimizer_sgd(ps, lr = 0.1)
  with_grad_tape(loss <- ag_sum(ag_mul(w, w)))
  g <- backward(loss)
  opt$lr <- NA
  expect_error(opt$step(g), "`lr`", class = "ggmlR_error")
  expect_identical(w$data, matrix(1, 2, 2))
  opt$lr <- 0.1
  opt$step(g)
  expect_equal(w$data, matrix(1 - 0.1 * 2, 2, 2))   # w - lr * 2w
})

test_that("a parameter listed twice is refused; state() of a missing one is an error", {
  w <- ag_param(matrix(1, 2, 1))
  v <- ag_param(matrix(2, 2, 1))
  expect_error(optimizer_sgd(list(a = w, b = v, c = w)), "same tensor twice \\('a' and 'c'\\)", class = "ggmlR_error")
  expect_error(optimizer_adam(list(w, w)), "twice", class = "ggmlR_error")
  opt <- optimizer_adam(list(a = w, b = v))
  expect_error(opt$state(99), "has 2 parameters", class = "ggmlR_error")
  expect_error(opt$state(0), "has 2 parameters", class = "ggmlR_error")
  expect_error(opt$state("zz"), "no parameter called 'zz'.*'a', 'b'", class = "ggmlR_error")
  expect_error(opt$state(NA), "name or a 1-based index", class = "ggmlR_error")
  expect_no_error(opt$state("b"))
})

test_that("a failed backward() keeps the tape for the right loss", {
  w <- ag_param(matrix(c(1, 2), 2, 1))
  with_grad_tape({
    h <- ag_mul(w, w)
    loss <- ag_sum(h)
  })
  stray <- ag_tensor(matrix(1, 1, 1))
  expect_error(backward(stray), "not recorded on the tape.*the tape is kept", class = "ggmlR_error")
  g <- backward(loss)
  expect_equal(g[[as.character(w$id)]], 2 * matrix(c(1, 2), 2, 1))   # d sum(w^2) / dw = 2w
})

test_that("a tape of 100000 ops and a computed graph of 100000 nodes drop without overflowing the stack", {
  res <- hostile_run(list(
    tape = quote({
      w <- ag_param(matrix(2, 1, 1))
      with_grad_tape({
        h <- w
        for (i in 1:100000) h <- ag_scale(h, 1)
        loss <- ag_sum(h)
      })
      g <- backward(loss)
      d <- g[[as.character(w$id)]][1]
      rm(h, loss, g)
      invisible(gc())
      # the session goes on: a new tape records and differentiates
      with_grad_tape(l2 <- ag_sum(ag_mul(w, w)))
      c(d, backward(l2)[[as.character(w$id)]][1])
    }),
    graph = quote({
      ctx <- ggml_init(100010 * ggml_tensor_overhead() + 2^24)
      x <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
      ggml_set_f32(x, 1)
      y <- x
      for (i in 1:100000) y <- ggml_neg(ctx, y)
      g <- ggml_build_forward_expand(ctx, y)
      ggml_graph_compute(ctx, g)
      v <- ggml_get_f32(y)
      rm(g, y)
      invisible(gc())
      ggml_free(ctx)
      invisible(gc())
      v
    })
  ), timeout = 600)
  expect_identical(res$outcome, c("value", "value"), info = paste(res$name, res$outcome, res$message, collapse = "; "))
  expect_identical(res$message[1], "1 4")     # d h / d w = 1; d w^2 / d w = 2w = 4
  expect_identical(res$message[2], "1 1")     # an even number of negations
})
