# Custom layers that read their parameters (load_param) and weights
# (load_model), with pipelines created and destroyed around them.

layer_dir <- test_path("fixtures", "ncnn-layers")

blob_file <- function(case, suffix, dim) {
  con <- file(file.path(layer_dir, paste0(case, suffix)), "rb")
  on.exit(close(con))
  stopifnot(identical(readBin(con, "raw", 8L), charToRaw("GGMLRF32")))
  array(readBin(con, "numeric", n = prod(dim), size = 4L, endian = "little"), dim)
}

# A transposed convolution written in R from its param and weights.
r_deconvolution <- function() {
  self <- ncnn_layer(
    function(x) {
      d <- dim(x)
      w <- d[1]; h <- d[2]; inch <- d[3]
      W <- array(self$weight, c(self$kw, self$kh, inch, self$num_output))
      outw <- (w - 1) * self$sw + self$dw * (self$kw - 1) + 1 + self$opr
      outh <- (h - 1) * self$sh + self$dh * (self$kh - 1) + 1 + self$opb
      out <- array(rep(self$bias, each = outw * outh), c(outw, outh, self$num_output))
      xs <- (seq_len(w) - 1) * self$sw + 1
      ys <- (seq_len(h) - 1) * self$sh + 1
      for (p in seq_len(self$num_output)) {
        for (q in seq_len(inch)) {
          for (ky in seq_len(self$kh)) {
            for (kx in seq_len(self$kw)) {
              cols <- xs + (kx - 1) * self$dw
              rows <- ys + (ky - 1) * self$dh
              out[cols, rows, p] <- out[cols, rows, p] + x[, , q] * W[kx, ky, q, p]
            }
          }
        }
      }
      if (self$act == 1) out[out < 0] <- 0
      if (self$act == 2) out[out < 0] <- out[out < 0] * self$act_params[1]
      out[(self$pl + 1):(outw - self$pr), (self$pt + 1):(outh - self$pb), , drop = FALSE]
    },
    load_param = function(pd) {
      self$num_output <- pd$get(0, 0L)
      self$kw <- pd$get(1, 0L)
      self$kh <- pd$get(11, self$kw)
      self$dw <- pd$get(2, 1L)
      self$dh <- pd$get(12, self$dw)
      self$sw <- pd$get(3, 1L)
      self$sh <- pd$get(13, self$sw)
      self$pl <- pd$get(4, 0L)
      self$pr <- pd$get(15, self$pl)
      self$pt <- pd$get(14, self$pl)
      self$pb <- pd$get(16, self$pt)
      self$opr <- pd$get(18, 0L)
      self$opb <- pd$get(19, self$opr)
      self$bias_term <- pd$get(5, 0L)
      self$n <- pd$get(6, 0L)
      self$act <- pd$get(9, 0L)
      self$act_params <- pd$get(10, numeric())
    },
    load_model = function(mb) {
      self$weight <- mb$load(self$n, 0)
      self$bias <- if (self$bias_term) mb$load(self$num_output, 1) else rep(0, self$num_output)
    }
  )
  self
}

run_deconv <- function(case, custom) {
  net <- ncnn_net(num_threads = 1)
  if (custom) net$register_custom_layer("Deconvolution", r_deconvolution)
  net$load_param(file.path(layer_dir, paste0(case, ".param")))
  net$load_model(file.path(layer_dir, paste0(case, ".bin")))
  ex <- net$create_extractor()
  ex$input("data", blob_file(case, ".0.in", c(6, 5, 3)))
  ex$extract("out")
}

test_that("a Deconvolution written in R from its params and weights matches the builtin and real ncnn", {
  for (case in c("deconv_s1", "deconv_s2", "deconv_s2_k4_pad", "deconv_asym", "deconv_dilation", "deconv_outpad", "deconv_act", "deconv_fp16")) {
    builtin <- run_deconv(case, FALSE)
    custom <- run_deconv(case, TRUE)
    expect_equal(dim(custom), dim(builtin), info = case)
    expect_equal(as.vector(custom), as.vector(builtin), tolerance = 1e-5, info = case)
    ref <- blob_file(case, ".0.out", dim(builtin))
    expect_lt(max(abs(custom - ref)) / max(abs(ref)), 1e-5, label = case)
  }
})

test_that("pd$get() returns ints, floats, arrays, strings and defaults", {
  seen <- NULL
  net <- ncnn_net(num_threads = 1)
  net$register_custom_layer("Probe", function() {
    ncnn_layer(function(x) x, load_param = function(pd) {
      seen <<- list(pd$get(0, 7L), pd$get(1, 0), pd$get(2, 0), pd$get(3, 0), pd$get(4, NULL), pd$get(5, "none"),
                    pd$get(9, 42L), pd$get(10, c(1, 2)), pd)
    })
  })
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nProbe p 1 1 data out 0=3 1=0.25 2=-233 -23303=3,1,2,3 -23304=2,0.5,1.5 5=abc\n")
  expect_identical(seen[[1]], 3L)
  expect_identical(seen[[2]], 0.25)
  expect_identical(seen[[3]], -233L)
  expect_identical(seen[[4]], 1:3)
  expect_identical(seen[[5]], c(0.5, 1.5))
  expect_identical(seen[[6]], "abc")
  expect_identical(seen[[7]], 42L)
  expect_identical(seen[[8]], c(1, 2))
  # the dict is the layer's own copy: it stays readable
  expect_identical(seen[[9]]$get(0, 0L), 3L)
  expect_error(seen[[9]]$get(32, 0), "0 to 31", class = "ncnn_error")
})

test_that("pd$get() reads a binary param's values by the default's type", {
  seen <- NULL
  net <- ncnn_net(num_threads = 1)
  net$register_custom_layer(256, function() {
    ncnn_layer(function(x) x, load_param = function(pd) seen <<- list(pd$get(0, 0L), pd$get(1, 0), pd$get(0, 0), pd$get(2, 0L)))
  })
  f32 <- function(v) readBin(writeBin(v, raw(), size = 4L, endian = "little"), "integer", size = 4L, endian = "little")
  path <- tempfile(fileext = ".param.bin")
  on.exit(unlink(path))
  writeBin(as.integer(c(7767517, 2, 2, 16, 0, 1, 0, -233, 256, 1, 1, 0, 1, 0, 5, 1, f32(1.5), 2, -233, -233)),
    path, size = 4L, endian = "little")
  net$load_param_bin(path)
  expect_identical(seen, list(5L, 1.5, 5L, -233L))
})

test_that("mb$load() reads fp32, fp16, int8 and raw arrays in file order, with extents", {
  got <- NULL
  keep <- NULL
  net <- ncnn_net(num_threads = 1)
  net$register_custom_layer("Reader", function() {
    ncnn_layer(function(x) x, load_model = function(mb) {
      keep <<- mb
      got <<- list(mb$load(3, 0), mb$load(c(2, 2), 0), mb$load(3, 0), mb$load(2, 1))
    })
  })
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReader r 1 1 data out\n")
  le <- function(v, size = 4L) writeBin(v, raw(), size = size, endian = "little")
  fp16 <- as.raw(c(0x00, 0x3c, 0x00, 0x40, 0x00, 0x42, 0x00, 0xbc)) # 1, 2, 3, -1
  bytes <- c(le(0L), le(c(0.5, 1.5, 2.5)),
             le(0x01306B47L), fp16,
             le(0x000D4B38L), as.raw(c(0x05, 0xfb, 0x7f, 0x00)),
             le(c(9.25, -1)))
  net$load_model(bytes)
  expect_equal(got[[1]], c(0.5, 1.5, 2.5))
  expect_equal(got[[2]], array(c(1, 2, 3, -1), c(2, 2)))
  expect_identical(got[[3]], c(5L, -5L, 127L))
  expect_equal(got[[4]], c(9.25, -1))
  # the reader is lent for the call only
  expect_error(keep$load(1, 1), "only inside the layer's load_model", class = "ncnn_error")
  # reading past the end is the usual clear error, and the net stays usable
  err <- expect_error(net$load_model(bytes[1:20]), class = "ncnn_error")
  expect_match(conditionMessage(err), "layer 'r'.*weights end early")
  net$load_model(bytes)
  expect_equal(got[[4]], c(9.25, -1))
})

test_that("pipelines are created after the weights and destroyed before the layer", {
  log <- character()
  net <- ncnn_net(num_threads = 1)
  net$register_custom_layer("Piped", function() {
    ncnn_layer(function(x) x,
      load_param = function(pd) log <<- c(log, "param"),
      load_model = function(mb) log <<- c(log, "model"),
      create_pipeline = function(opt) log <<- c(log, paste0("create:", opt$num_threads)),
      destroy_pipeline = function(opt) log <<- c(log, "destroy")
    )
  }, function(layer) log <<- c(log, "destroyer"))
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nPiped p 1 1 data out\n")
  expect_equal(log, "param")
  net$load_model(ncnn_datareader_empty())
  expect_equal(log, c("param", "model", "create:1"))
  net$load_model(ncnn_datareader_empty())
  expect_equal(log[4:6], c("destroy", "model", "create:1"))
  net$clear()
  expect_equal(log[7:8], c("destroy", "destroyer"))
  # a layer whose pipeline was never created is destroyed without it
  log <- character()
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nPiped p 1 1 data out\n")
  net$clear()
  expect_equal(log, c("param", "destroyer"))
})

test_that("errors in load_param, load_model and create_pipeline fail the load and leave the net usable", {
  for (which in c("load_param", "load_model", "create_pipeline")) {
    destroyed <- 0L
    net <- ncnn_net(num_threads = 1)
    args <- list(function(x) x)
    args[[which]] <- function(arg) stop("broken on purpose")
    net$register_custom_layer("Broken", function() do.call(ncnn_layer, args), function(layer) destroyed <<- destroyed + 1L)
    param <- "7767517\n2 2\nInput data 0 1 data\nBroken b 1 1 data out\n"
    if (which == "load_param") {
      err <- expect_error(net$load_param_mem(param), class = "ncnn_error")
      expect_equal(destroyed, 1L)
    } else {
      net$load_param_mem(param)
      err <- expect_error(net$load_model(ncnn_datareader_empty()), class = "ncnn_error")
      expect_error(net$create_extractor(), "no model loaded", class = "ncnn_error")
    }
    expect_match(conditionMessage(err), sprintf("layer 'b'.*%s\\(\\) failed: broken on purpose", which))
    net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU r 1 1 data out\n")
    net$load_model(ncnn_datareader_empty())
    ex <- net$create_extractor()
    ex$input("data", c(-1, 2))
    expect_equal(as.vector(ex$extract("out")), c(0, 2))
  }
  expect_error(ncnn_layer(function(x) x, load_model = 3), "`load_model` must be NULL or a function", class = "ncnn_error")
})
