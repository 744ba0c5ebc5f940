binary_ref <- list(
  add = function(a, b) a + b, sub = function(a, b) a - b,
  mul = function(a, b) a * b, div = function(a, b) a / b
)
binary_fn <- list(add = ggml_add, sub = ggml_sub, mul = ggml_mul, div = ggml_div)

# b repeated to a's shape (ggml's broadcasting).
bcast <- function(b, ne_a) {
  ne_b <- c(ne_of(b), rep(1, 4 - length(ne_of(b))))
  ne4 <- c(ne_a, rep(1, 4 - length(ne_a)))
  idx <- lapply(1:4, function(i) rep_len(seq_len(ne_b[i]), ne4[i]))
  array(array(b, ne_b)[idx[[1]], idx[[2]], idx[[3]], idx[[4]]], ne_a)
}

shape_pairs <- list(
  list(a = 1, b = 1),
  list(a = c(3, 17), b = c(3, 17)),
  list(a = c(1023, 3), b = 1023),
  list(a = c(6, 4, 3, 2), b = c(3, 1, 3)),
  list(a = c(17, 5, 2), b = c(1, 5)),
  list(a = c(4, 6), b = c(2, 3))
)

test_each_backend("add, sub, mul and div broadcast b like ggml", {
  set.seed(1)
  for (op in names(binary_ref)) {
    for (sp in shape_pairs) {
      a <- rarray(sp$a)
      b <- rarray(sp$b)
      if (op == "div") b <- sign(b) * (abs(b) + 0.5)
      got <- run_graph(make_backend, list(a = a, b = b),
        function(ctx, t) binary_fn[[op]](ctx, t$a, t$b))
      expect_close(got, binary_ref[[op]](a, bcast(b, ne_of(a))), 1e-5)
    }
  }
})

test_each_backend("binary ops read non-contiguous views and f16/bf16 inputs", {
  set.seed(2)
  a <- rarray(5, 7)
  b <- rarray(7, 5)
  got <- run_graph(make_backend, list(a = a, b = b),
    function(ctx, t) ggml_mul(ctx, ggml_transpose(ctx, t$b), t$a))
  expect_close(got, t(b) * a)
  for (ty in c(GGML_TYPE_F16, GGML_TYPE_BF16)) {
    got <- run_graph(make_backend, list(a = a, b = a[, 1]),
      function(ctx, t) ggml_add(ctx, t$a, t$b), types = list(a = ty, b = ty))
    ar <- round_to(a, ty)
    expect_close(got, round_to(ar + ar[, 1], ty), tol_of(ty))
  }
})

test_each_backend("binary ops refuse shapes ggml cannot broadcast", {
  expect_error(
    run_graph(make_backend, list(a = rarray(4, 3), b = rarray(3)),
      function(ctx, t) ggml_add(ctx, t$a, t$b)),
    "ggml_add.*tensor 'a' \\(f32 \\[4, 3\\]\\).*tensor 'b' \\(f32 \\[3\\]\\).*cannot be broadcast",
    class = "ggmlR_error")
})

test_each_backend("add1 and scale", {
  set.seed(3)
  a <- rarray(17, 3)
  got <- run_graph(make_backend, list(a = a, b = 2.5),
    function(ctx, t) list(ggml_add1(ctx, t$a, t$b), ggml_scale(ctx, t$a, -0.75)))
  expect_close(got[[1]], a + 2.5)
  expect_close(got[[2]], a * -0.75)
  expect_error(run_graph(make_backend, list(a = a, b = c(1, 2)),
    function(ctx, t) ggml_add1(ctx, t$a, t$b)), "exactly one element", class = "ggmlR_error")
})

gelu_ref <- function(x) 0.5 * x * (1 + tanh(sqrt(2 / pi) * x * (1 + 0.044715 * x^2)))
unary_ref <- list(
  neg = function(x) -x, abs = abs, sqr = function(x) x^2, sqrt = sqrt, exp = exp,
  log = log, sin = sin, cos = cos, relu = function(x) pmax(x, 0), gelu = gelu_ref,
  silu = function(x) x / (1 + exp(-x)), sigmoid = function(x) 1 / (1 + exp(-x)),
  tanh = tanh, elu = function(x) ifelse(x > 0, x, expm1(x)),
  step = function(x) as.numeric(x > 0),
  hardswish = function(x) x * pmin(pmax(x + 3, 0), 6) / 6,
  hardsigmoid = function(x) pmin(pmax((x + 3) / 6, 0), 1)
)

test_each_backend("every unary function matches base R", {
  set.seed(4)
  for (shape in list(1, 3, c(17, 3), c(1023, 2), c(5, 3, 2, 2))) {
    x <- rarray(shape) * 2
    for (f in names(unary_ref)) {
      xin <- if (f %in% c("sqrt", "log")) abs(x) + 0.01 else x
      fn <- get(paste0("ggml_", f), envir = asNamespace("ggmlR"))
      got <- run_graph(make_backend, list(x = xin), function(ctx, t) fn(ctx, t$x))
      expect_close(got, unary_ref[[f]](xin), 1e-5)
    }
  }
})

test_each_backend("unary functions on permuted views and f16 tensors", {
  set.seed(5)
  x <- rarray(3, 4, 5)
  got <- run_graph(make_backend, list(x = x),
    function(ctx, t) ggml_exp(ctx, ggml_permute(ctx, t$x, 2, 0, 1, 3)))
  expect_close(got, exp(aperm(x, perm_of(c(2, 0, 1)))))
  got <- run_graph(make_backend, list(x = x),
    function(ctx, t) ggml_sigmoid(ctx, t$x), types = list(x = GGML_TYPE_F16))
  expect_close(got, round_to(1 / (1 + exp(-round_to(x, 1))), 1), 1e-3)
})

test_each_backend("leaky_relu and clamp", {
  set.seed(6)
  x <- rarray(17, 4)
  got <- run_graph(make_backend, list(x = x), function(ctx, t) list(
    ggml_leaky_relu(ctx, t$x, 0.2), ggml_leaky_relu(ctx, t$x),
    ggml_clamp(ctx, t$x, -0.5, 0.25)))
  expect_close(got[[1]], ifelse(x > 0, x, 0.2 * x))
  expect_close(got[[2]], ifelse(x > 0, x, 0.01 * x))
  expect_close(got[[3]], pmin(pmax(x, -0.5), 0.25))
})

test_each_backend("ops refuse i32 tensors where floats are needed", {
  expect_error(run_graph(make_backend, list(i = 1:3),
    function(ctx, t) ggml_exp(ctx, t$i), types = list(i = GGML_TYPE_I32)),
    "floating-point.*i32 \\[3\\]", class = "ggmlR_error")
})
