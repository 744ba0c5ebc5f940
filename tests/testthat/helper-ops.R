# The op suite runs on every backend listed here (name = constructor).
# Vulkan joins wherever a device exists; with GGMLR_REQUIRE_VULKAN set, its
# absence fails the suite (see helper-vulkan.R) instead of shrinking it.
op_backends <- function() {
  backends <- list(cpu = function() ggml_backend_cpu_init())
  if (ggml_vulkan_available()) {
    backends$vulkan <- function() ggml_vulkan_init(0L)
  } else if (nzchar(Sys.getenv("GGMLR_REQUIRE_VULKAN"))) {
    backends$vulkan <- function() {
      stop("GGMLR_REQUIRE_VULKAN is set but no Vulkan device was found: ", ggml_vulkan_status())
    }
  }
  backends
}

# Runs `code` once per backend, as a separate test named "<desc> [<backend>]",
# with `make_backend` bound to the backend's constructor.
test_each_backend <- function(desc, code) {
  code <- substitute(code)
  for (nm in names(op_backends())) {
    env <- new.env(parent = parent.frame())
    env$make_backend <- op_backends()[[nm]]
    braced <- if (is.call(code) && identical(code[[1]], as.name("{"))) code else call("{", code)
    eval(call("test_that", paste0(desc, " [", nm, "]"), braced), env)
  }
}

# Sizes of an R value as ggml sizes: dim() or length().
ne_of <- function(x) if (is.null(dim(x))) length(x) else dim(x)

# Runs `build(ctx, t)` on tensors made from the R arrays `inputs` (types in
# `types`, f32 by default), computed on a fresh backend with `threads` threads.
# `build` returns the result tensor (or a list of them). Returns the result's
# values (array shaped like the result, ggml order) or a list of them.
run_graph <- function(make_backend, inputs, build, types = list(), threads = NULL) {
  backend <- make_backend()
  on.exit(ggml_backend_free(backend), add = TRUE)
  if (!is.null(threads) && !ggml_vulkan_is_backend(backend)) ggml_backend_cpu_set_n_threads(backend, threads)
  ctx <- ggml_init(256 * ggml_tensor_overhead(), no_alloc = TRUE)
  on.exit(ggml_free(ctx), add = TRUE, after = FALSE)
  t <- lapply(names(inputs), function(nm) {
    x <- inputs[[nm]]
    ty <- if (is.null(types[[nm]])) GGML_TYPE_F32 else types[[nm]]
    ne <- ne_of(x)
    ggml_set_name(ggml_new_tensor(ctx, ty, length(ne), ne), nm)
  })
  names(t) <- names(inputs)
  out <- build(ctx, t)
  outs <- if (inherits(out, "ggml_tensor")) list(out) else out
  buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
  on.exit(if (!is.null(buf)) ggml_backend_buffer_free(buf), add = TRUE, after = FALSE)
  for (nm in names(inputs)) ggml_backend_tensor_set_data(t[[nm]], as.vector(inputs[[nm]]))
  for (o in outs) ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, o))
  vals <- lapply(outs, function(o) {
    ne <- ggml_tensor_shape(o)
    array(ggml_backend_tensor_get_data(o), dim = ne[seq_len(ggml_n_dims(o))])
  })
  if (inherits(out, "ggml_tensor")) vals[[1]] else vals
}

# |got - want| <= tol * max(|want|, scale), element-wise; a message shows the worst.
expect_close <- function(got, want, tol = 1e-5, scale = 1) {
  got <- as.vector(got)
  want <- as.vector(want)
  expect_identical(length(got), length(want))
  err <- abs(got - want) / pmax(abs(want), scale)
  same_inf <- is.infinite(want) & got == want
  err[same_inf] <- 0
  worst <- if (length(err)) max(err) else 0
  expect(isTRUE(worst <= tol),
    sprintf("largest relative error %.3g > %.3g (at element %d: got %.7g, want %.7g)",
      worst, tol, which.max(err), got[which.max(err)], want[which.max(err)]))
}

# Tolerance for values that went through a type.
tol_of <- function(type) switch(as.character(type), "0" = 1e-5, "1" = 1e-3, "30" = 8e-3, 1e-5)

# Random normal values, exactly representable in f32.
rarray <- function(...) {
  d <- c(...)
  array(round_to(rnorm(prod(d)), GGML_TYPE_F32), dim = d)
}

# ggml's permute axes as an aperm() permutation.
perm_of <- function(axes) order(axes)

# x rounded to the nearest value of `type` (f32: 24 significant bits, f16: 11, bf16: 8),
# so references can start from exactly the values the tensor holds.
round_to <- function(x, type) {
  bits <- switch(as.character(type), "0" = 23, "1" = 10, "30" = 7, return(x))
  e <- floor(log2(abs(x)))
  q <- 2^(pmax(e, if (bits == 10) -14 else -126) - bits)
  out <- round(x / q) * q
  out[x == 0] <- 0
  out
}

# The four sizes of an array (trailing 1s added).
ggml_shape4 <- function(x) {
  d <- if (is.null(dim(x))) length(x) else dim(x)
  c(d, rep(1L, 4 - length(d)))
}
