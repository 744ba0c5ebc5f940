# The R methods of ag_tensor (R/ag_tensor_methods.R, R/ag_tensor_s4.R)
# against base R on the same matrices, with gradients against finite
# differences (check_op, helper-ag.R).

set.seed(20)

test_that("`%*%` reaches ag_matmul through R's dispatch in every pairing", {
  a <- rmat(3, 4)
  b <- rmat(4, 2)
  ta <- ag_param(a)
  tb <- ag_tensor(b)
  for (r in list(ta %*% tb, ta %*% b, a %*% tb)) {
    expect_true(is_ag_tensor(r))
    expect_equal(r$data, a %*% b, tolerance = 1e-12)
  }
  expect_identical(r$grad_fn, NULL)            # a %*% tb: no input needs a gradient
  expect_identical((ta %*% b)$grad_fn, "ag_matmul")
  expect_identical(diag(2) %*% diag(2), diag(2)) # base's `%*%` untouched
  expect_identical(environment(`%*%`), NULL)      # the primitive, not a closure
  with_grad_tape(loss <- sum(ta %*% tb))
  backward(loss)
  expect_equal(ta$grad, matrix(1, 3, 2) %*% t(b), tolerance = 1e-12)
})

test_that("length(), dim(), t(), as.array() and as.double() follow the matrix", {
  m <- rmat(3, 5)
  x <- ag_tensor(m)
  expect_identical(length(x), 15L)
  expect_identical(dim(x), c(3L, 5L))
  expect_identical(nrow(x), 3L)
  expect_identical(ncol(x), 5L)
  expect_identical(as.array(x), m)
  expect_identical(as.matrix(x), m)
  expect_identical(as.double(x), as.vector(m))
  expect_identical(t(x)$data, t(m))
  check_op(function(l) t(l[[1]]), function(l) t(l[[1]]), list(rmat(3, 4)))
})

test_that("`[` selects like a matrix and is differentiable", {
  m <- rmat(4, 5)
  x <- ag_tensor(m)
  expect_identical(x[2, ]$data, m[2, , drop = FALSE])
  expect_identical(x[, 3]$data, m[, 3, drop = FALSE])
  expect_identical(x[-1, c(TRUE, FALSE)]$data, m[-1, c(TRUE, FALSE), drop = FALSE])
  expect_identical(x[c(4, 1, 4), c(5, 2)]$data, m[c(4, 1, 4), c(5, 2), drop = FALSE])
  expect_identical(x[2:3, ]$data, m[2:3, , drop = FALSE])
  expect_identical(x[c(1, 20, 7)]$data, matrix(m[c(1, 20, 7)], ncol = 1))
  expect_identical(x[m > 0]$data, matrix(m[m > 0], ncol = 1))
  pos <- cbind(c(1, 4), c(5, 2))
  expect_identical(x[pos]$data, matrix(m[pos], ncol = 1))
  expect_identical(x[], x)
  expect_identical(x[, , drop = TRUE], x)
  check_op(function(l) l[[1]][c(3, 1, 3), -2], function(l) l[[1]][c(3, 1, 3), -2, drop = FALSE],
           list(rmat(4, 3)))
  check_op(function(l) l[[1]][2:3, 2], function(l) l[[1]][2:3, 2, drop = FALSE], list(rmat(4, 3)))
  check_op(function(l) l[[1]][c(12, 1, 5)], function(l) matrix(l[[1]][c(12, 1, 5)], ncol = 1),
           list(rmat(4, 3)))
})

test_that("`[` refuses what it cannot select, with the reason", {
  x <- ag_tensor(matrix(1:6, 2, 3))
  expect_error(x[3, 1], "row index 3 is out of bounds: there are 2 rows", class = "ggmlR_error")
  expect_error(x[7], "element index 7 is out of bounds", class = "ggmlR_error")
  expect_error(x[NA, 1], "must not be NA", class = "ggmlR_error")
  expect_error(x["a", 1], "no names", class = "ggmlR_error")
  expect_error(x[-(1:2), ], "selects nothing", class = "ggmlR_error")
  expect_error(x[c(-1, 2), ], "row indices: .*negative subscripts", class = "ggmlR_error")
  expect_error(x[1, 1, 1], "two dimensions", class = "ggmlR_error")
  expect_error(x[1, 1] <- 0, "cannot be assigned", class = "ggmlR_error")
  expect_identical(x$data, matrix(as.double(1:6), 2, 3))
})

test_that("rbind() and cbind() stack tensors, matrices and vectors", {
  a <- rmat(2, 3)
  b <- rmat(1, 3)
  x <- ag_tensor(a)
  expect_identical(rbind(x, b)$data, rbind(a, b))
  expect_identical(rbind(b, x, 1:3)$data, rbind(b, a, 1:3))
  expect_identical(cbind(x, x)$data, cbind(a, a))
  expect_identical(cbind(c(9, 8), x)$data, cbind(c(9, 8), a))
  expect_error(rbind(x, matrix(0, 1, 4)), "every argument needs 3 columns, but argument 2 has 4",
               class = "ggmlR_error")
  expect_error(cbind(x, "a"), "must be an ag_tensor, a numeric matrix or a vector",
               class = "ggmlR_error")
  check_op(function(l) rbind(l[[1]], l[[2]]), function(l) rbind(l[[1]], l[[2]]),
           list(rmat(2, 3), rmat(1, 3)))
  check_op(function(l) cbind(l[[1]], l[[2]], l[[1]]), function(l) cbind(l[[1]], l[[2]], l[[1]]),
           list(rmat(3, 2), rmat(3, 1)))
})

test_that("the Math group: recorded where there is a rule, constant or refused elsewhere", {
  m <- rmat(3, 4, 0.2, 2)
  x <- ag_tensor(m)
  rules <- list(exp = exp, log = log, log2 = log2, log10 = log10, log1p = log1p,
                expm1 = expm1, sqrt = sqrt, abs = abs, tanh = tanh)
  for (nm in names(rules)) {
    f <- rules[[nm]]
    expect_equal(f(x)$data, f(m), tolerance = 1e-12, info = nm)
    check_op(function(l) f(l[[1]]), function(l) f(l[[1]]), list(rmat(2, 3, 0.2, 2)))
  }
  expect_equal(log(x, base = 3)$data, log(m, base = 3), tolerance = 1e-12)
  check_op(function(l) abs(l[[1]]), function(l) abs(l[[1]]), list(rmat(3, 3, -1, 1)))
  p <- ag_param(m)
  with_grad_tape(r <- round(p, 1))
  expect_identical(r$data, round(m, 1))
  expect_false(r$requires_grad)
  expect_identical(floor(x)$data, floor(m))
  expect_identical(sin(p)$data, sin(m))            # no tape: a constant value
  expect_identical(cumsum(x)$data, matrix(cumsum(m), 3, 4))
  expect_error(with_grad_tape(sin(p)), "sin\\(\\) has no backward rule", class = "ggmlR_error")
  with_grad_tape(loss <- sum(exp(p)))               # the tape is usable after the refusal
  backward(loss)
  expect_equal(p$grad, exp(m), tolerance = 1e-12)
})

test_that("the Summary group and mean()", {
  m <- rmat(3, 4)
  x <- ag_param(m)
  expect_equal(sum(x)$data, matrix(sum(m)), tolerance = 1e-12)
  expect_equal(sum(x, x, 2)$data, matrix(2 * sum(m) + 2), tolerance = 1e-12)
  expect_equal(mean(x)$data, matrix(mean(m)), tolerance = 1e-12)
  expect_identical(max(x), max(m))
  expect_identical(min(x, -5), -5)
  expect_identical(range(x), range(m))
  expect_identical(prod(x), prod(m))
  expect_identical(any(x > 0.5), any(m > 0.5))
  expect_error(mean(x, trim = 0.1), "no further arguments", class = "ggmlR_error")
  with_grad_tape(loss <- sum(x) + mean(x))
  backward(loss)
  expect_equal(x$grad, matrix(1 + 1 / 12, 3, 4), tolerance = 1e-12)
})

test_that("the header names the storage: cpu tensors hold doubles", {
  old <- ag_dtype("f16")
  on.exit(ag_dtype(old))
  x <- ag_tensor(1:3)
  expect_output(print(x), "<ag_tensor 3x1> cpu f64\n")
  expect_identical(.ag_storage_label(ag_tensor(1:3, device = "gpu", dtype = "f32")), "gpu f32")
  expect_identical(.ag_storage_label(ag_param(1:3, device = "gpu", dtype = "bf16")), "gpu bf16")
})

test_that("printing truncates rows and columns and says what it left out", {
  old <- options(width = 60)
  on.exit(options(old))
  m <- matrix(seq_len(3 * 150) / 7, 3, 150)
  out <- capture.output(print(ag_tensor(m)))
  expect_lte(max(nchar(out)), 60)
  expect_length(out, 1 + 4 + 1)                 # header, one block, footer
  shown <- as.integer(sub(".*\\[,([0-9]+)\\]\\s*$", "\\1", out[2]))
  expect_match(out[6], sprintf("with %d more columns", 150 - shown))
  out <- capture.output(print(ag_tensor(matrix(1, 25, 2))))
  expect_match(out[length(out)], "with 15 more rows \\(as.matrix")
  expect_length(capture.output(print(ag_tensor(matrix(1, 25, 2)), max_rows = 30)), 1 + 26)
})

test_that("print, show and str snapshots", {
  x <- ag_param(matrix(c(1.5, -2, 3.25, 4, 0, 6), 2, 3))
  expect_snapshot(x)
  expect_snapshot(print(x))
  with_grad_tape(loss <- sum(x * x))
  backward(loss)
  expect_snapshot(x)
  expect_snapshot(loss)
  expect_snapshot(str(x))
  expect_snapshot(print(ag_tensor(matrix(seq_len(2 * 40) / 4, 2, 40)), max_cols = 4))
  expect_snapshot(print(ag_tensor(matrix(1:60, 20, 3))))
  expect_snapshot(error = TRUE, ag_tensor(matrix(1:6, 2))[3, 1])
  expect_snapshot(error = TRUE, with_grad_tape(cos(x)))
  expect_snapshot(error = TRUE, rbind(x, 1:2))
})

test_that("indexing, binding and the Math group on device \"gpu\" agree with \"cpu\"", {
  set.seed(21)
  m <- matrix(rnorm(12), 3, 4)
  f <- function(x) {
    sum(x[c(3, 1), -2] * 2) + sum(rbind(x, x[1, ])) + sum(cbind(x, t(x[1:3, 1:3]))) +
      mean(exp(x[c(1, 12)])) + sum(abs(t(x)))
  }
  run <- function(device) {
    on_device(device, {
      x <- ag_param(m)
      with_grad_tape(loss <- f(x))
      backward(loss)
      list(loss = loss$data, grad = x$grad, label = .ag_storage_label(x))
    })
  }
  g <- run("gpu")
  h <- run("cpu")
  expect_f32_close(g$loss, h$loss)
  expect_f32_close(g$grad, h$grad)
  expect_identical(h$label, "cpu f64")
  expect_match(g$label, "^gpu f32$")
})
