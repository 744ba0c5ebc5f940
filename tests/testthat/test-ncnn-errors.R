# Failures are ncnn_error conditions that say what and where; the net stays usable.

relu_param <- "7767517\n2 2\nInput data 0 1 data\nReLU relu 1 1 data out\n"

test_that("malformed text params name the problem and the line", {
  net <- ncnn_net(num_threads = 1)
  cases <- list(
    c("1234\n1 1\nInput data 0 1 data\n", "too old"),
    c("7767517\n0 1\n", "must be positive"),
    c("7767517\n2 2\nInput data 0 1 data\n", "ends early"),
    c("7767517\n2 1\nInput data 0 1 data\nReLU r 1 1 data out\n", "declares 1 blobs"),
    c("7767517\n1 1\nInput data 0 1 data 32=1\n", "line 3: key 32 is out of range"),
    c("7767517\n1 1\nInput data 0 1 data -23300=3,1,2\n", "declares 3 values but has 2"),
    c("7767517\n1 1\nInput data 0 1 data 0=1x\n", "malformed"),
    c("7767517\n2 2\nInput data 0 1 data\nNoSuchLayer n 1 1 data out\n", "line 4.*unknown layer type 'NoSuchLayer'"),
    c("7767517\n2 2\nInput data 0 1 data\nSpectrogram n 1 1 data out\n", "Spectrogram is not supported"),
    c("7767517\n2 2\nInput data 0 1 data\nConvolution c 1 1 data out 0=4 1=3 6=10\n", "Convolution.*weight_data_size"),
    c("7767517\n2 2\nInput data 0 1 data\nSoftmax s 1 1 data out 0=1\n", "fixbug0")
  )
  for (cs in cases) {
    err <- expect_error(net$load_param_mem(cs[1]), class = "ncnn_error")
    expect_match(conditionMessage(err), cs[2])
  }
  # still usable
  net$load_param_mem(relu_param)
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("data", c(-1, 2))
  expect_equal(as.vector(ex$extract("out")), c(0, 2))
})

test_that("param files and binary params report paths and byte offsets", {
  net <- ncnn_net(num_threads = 1)
  expect_error(net$load_param(tempfile()), class = "ncnn_error")
  expect_error(net$load_param_bin(tempfile()), class = "ncnn_error")
  path <- tempfile(fileext = ".param.bin")
  writeBin(as.integer(c(7767517, 2, 2, 16, 0, 1, 0, -233, 26, 1, 1, 0)), path, size = 4L, endian = "little")
  err <- expect_error(net$load_param_bin(path), class = "ncnn_error")
  expect_match(conditionMessage(err), "byte 48")
  writeBin(as.integer(c(7767517, 1, 1, 999, 0, 1, 0, -233)), path, size = 4L, endian = "little")
  err <- expect_error(net$load_param_bin(path), class = "ncnn_error")
  expect_match(conditionMessage(err), "unknown layer type index 999")
})

test_that("missing, truncated and unsupported weights are clear errors", {
  net <- ncnn_net(num_threads = 1)
  expect_error(net$load_model(ncnn_datareader_empty()), "load a param first", class = "ncnn_error")
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nInnerProduct fc 1 1 data out 0=2 1=1 2=4\n")
  err <- expect_error(net$load_model(as.raw(rep(0, 12))), class = "ncnn_error")
  expect_match(conditionMessage(err), "fc.*InnerProduct.*weights end early")
  int8 <- c(writeBin(0x000D4B38L, raw(), size = 4L, endian = "little"), as.raw(rep(0, 16)))
  err <- expect_error(net$load_model(int8), class = "ncnn_error")
  expect_match(conditionMessage(err), "int8")
  expect_error(net$load_model(tempfile()), "does not exist", class = "ncnn_error")
  expect_error(net$create_extractor(), "no model loaded", class = "ncnn_error")
  # a correct model afterwards works
  w <- writeBin(c(1, 2, 3, 4, 0.5, -0.5), raw(), size = 4L, endian = "little")
  net$load_model(c(as.raw(c(0, 0, 0, 0)), w))
  ex <- net$create_extractor()
  ex$input("data", c(1, 1))
  expect_equal(as.vector(ex$extract("out")), c(3.5, 6.5))
  # a 256-value table with one byte index per weight decodes
  table <- c(writeBin(7L, raw(), size = 4L, endian = "little"),
             writeBin(seq(0, 25.5, by = 0.1), raw(), size = 4L, endian = "little"),
             as.raw(c(10, 20, 30, 40)), writeBin(c(0, 0), raw(), size = 4L, endian = "little"))
  net$load_model(table)
  ex <- net$create_extractor()
  ex$input("data", c(1, 1))
  expect_equal(as.vector(ex$extract("out")), c(3, 7), tolerance = 1e-6)
})

test_that("unknown blobs, unset inputs and stale extractors are errors", {
  net <- ncnn_net(num_threads = 1)
  net$load_param_mem(relu_param)
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  expect_error(ex$input("nope", 1), "no blob named 'nope'", class = "ncnn_error")
  expect_error(ex$extract(5), "out of range", class = "ncnn_error")
  expect_error(ex$extract("out"), "'data' was not set", class = "ncnn_error")
  expect_error(ex$input("data", "a"), "numeric", class = "ncnn_error")
  expect_error(ex$input("data", array(0, c(1, 1, 1, 1, 1))), "1 to 4", class = "ncnn_error")
  expect_error(ex$extract(NA), class = "ncnn_error")
  net$clear()
  expect_error(ex$extract("out"), "create a new one", class = "ncnn_error")
})

test_that("bad registrations and creators are ncnn errors", {
  net <- ncnn_net(num_threads = 1)
  expect_error(net$register_custom_layer(NA, function() NULL), class = "ncnn_error")
  expect_error(net$register_custom_layer("X", 1), class = "ncnn_error")
  expect_error(net$register_custom_layer("X", function() NULL, destroyer = "no"), class = "ncnn_error")
  expect_error(net$register_custom_layer("", function() NULL), class = "ncnn_error")
  net$register_custom_layer("Weird", function() list(forward = identity))
  err <- expect_error(
    net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nWeird w 1 1 data out\n"),
    class = "ncnn_error"
  )
  expect_match(conditionMessage(err), "layer 'w' \\(Weird, line 4\\).*not an object made by ncnn_layer")
  net$register_custom_layer("Weird", function() stop("cannot build"))
  err <- expect_error(
    net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nWeird w 1 1 data out\n"),
    class = "ncnn_error"
  )
  expect_match(conditionMessage(err), "creator failed: cannot build")
  expect_error(ncnn_layer(1), class = "ncnn_error")
  expect_error(ncnn_net(num_threads = 0), class = "ncnn_error")
})

test_that("an R error inside forward() is an ncnn_error naming the layer; the net stays usable", {
  net <- ncnn_net(num_threads = 1)
  fail <- TRUE
  net$register_custom_layer("Flaky", function() {
    ncnn_layer(function(x) if (fail) stop("flaky failure") else x * 2)
  })
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nFlaky f 1 1 data out\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("data", 1:3)
  err <- expect_error(ex$extract("out"), class = "ncnn_error")
  expect_match(conditionMessage(err), "layer 'f' \\(Flaky, line 4\\).*flaky failure")
  fail <- FALSE
  ex <- net$create_extractor()
  ex$input("data", 1:3)
  expect_equal(as.vector(ex$extract("out")), c(2, 4, 6))
  # a forward that returns something else than an array
  net$register_custom_layer("Flaky", function() ncnn_layer(function(x) "text"))
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nFlaky f 1 1 data out\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("data", 1)
  expect_error(ex$extract("out"), "not a numeric array", class = "ncnn_error")
})

test_that("arrays map to blobs with w fastest, in 1 to 4 dimensions", {
  seen <- NULL
  net <- ncnn_net(num_threads = 1, light_mode = FALSE)
  net$register_custom_layer("Spy", function() ncnn_layer(function(x) {
    seen <<- x
    x
  }))
  net$load_param_mem("7767517\n3 3\nInput data 0 1 data\nSpy s 1 1 data y\nFlatten f 1 1 y out\n")
  net$load_model(ncnn_datareader_empty())
  for (d in list(5L, c(4L, 3L), c(4L, 3L, 2L), c(2L, 3L, 2L, 2L))) {
    x <- array(seq_len(prod(d)) / 7, d)
    ex <- net$create_extractor()
    ex$input("data", x)
    out <- ex$extract("out")
    expect_equal(seen, x, tolerance = 1e-6)
    expect_equal(dim(ex$extract("y")), d)
    # Flatten keeps the memory order: w fastest
    expect_equal(as.vector(out), as.vector(x), tolerance = 1e-6)
  }
})

test_that("custom layers with several blobs get and return lists", {
  net <- ncnn_net(num_threads = 2)
  net$register_custom_layer("AddSub", function() {
    ncnn_layer(function(b) list(b[[1]] + b[[2]], b[[1]] - b[[2]]), one_blob_only = FALSE)
  })
  net$load_param_mem(paste0(
    "7767517\n5 6\nInput a 0 1 a\nInput b 0 1 b\nAddSub s 2 2 a b sum diff\n",
    "Split sp 1 1 sum s2\nReLU r 1 1 diff out\n"
  ))
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("a", c(1, 2, 3))
  ex$input("b", c(3, 2, 1))
  expect_equal(as.vector(ex$extract("out")), c(0, 0, 2))
  expect_equal(as.vector(ex$extract("s2")), c(4, 4, 4))
  expect_setequal(net$input_names(), c("a", "b"))
  expect_setequal(net$output_names(), c("s2", "out"))
  layers <- net$layers()
  expect_s3_class(layers, "data.frame")
  expect_equal(layers$type, c("Input", "Input", "AddSub", "Split", "ReLU"))
  expect_equal(layers$custom, c(FALSE, FALSE, TRUE, FALSE, FALSE))
  net$register_custom_layer("AddSub", function() ncnn_layer(function(b) list(b[[1]]), one_blob_only = FALSE))
  net$load_param_mem("7767517\n3 4\nInput a 0 1 a\nInput b 0 1 b\nAddSub s 2 2 a b sum diff\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("a", 1)
  ex$input("b", 1)
  expect_error(ex$extract("sum"), "returned 1 blobs", class = "ncnn_error")
})

test_that("methods return invisibly and a custom layer cannot re-enter its net", {
  net <- ncnn_net(num_threads = 1)
  expect_invisible(net$load_param_mem(relu_param))
  expect_invisible(net$load_model(ncnn_datareader_empty()))
  expect_invisible(net$clear())
  net$register_custom_layer("Evil", function() ncnn_layer(function(x) {
    net$clear()
    x
  }))
  net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nEvil e 1 1 data out\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("data", 1)
  expect_error(ex$extract("out"), "in use", class = "ncnn_error")
  expect_output(print(net), "2 layers")
})

test_that("light mode releases used blobs; light_mode = FALSE keeps them", {
  param <- "7767517\n3 3\nInput data 0 1 data\nReLU r 1 1 data y\nSigmoid s 1 1 y out\n"
  for (light in c(TRUE, FALSE)) {
    net <- ncnn_net(num_threads = 1, light_mode = light)
    net$load_param_mem(param)
    net$load_model(ncnn_datareader_empty())
    ex <- net$create_extractor()
    ex$input("data", c(-1, 0, 1))
    expect_equal(as.vector(ex$extract("out")), 1 / (1 + exp(-c(0, 0, 1))), tolerance = 1e-6)
    if (light) {
      expect_error(ex$extract("y"), "released after use.*light_mode = FALSE", class = "ncnn_error")
      ex$input("data", c(-1, 0, 1))
    }
    expect_equal(as.vector(ex$extract("y")), c(0, 0, 1))
  }
})

test_that("memory of finished blobs kept for reuse is reported by ag_memory_stats()", {
  net <- ncnn_net(num_threads = 1)
  net$load_param_mem("7767517\n3 3\nInput data 0 1 data\nReLU r1 1 1 data a\nReLU r2 1 1 a out\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  # 64 x 64 x 4 floats: 64 KiB per blob, large enough to be recycled.
  x <- array(rnorm(64 * 64 * 4), c(64, 64, 4))
  ex$input("data", x)
  expect_equal(as.vector(ex$extract("out")), as.vector(pmax(x, 0)), tolerance = 1e-6)
  rm(ex)
  gc()
  s <- ag_memory_stats()
  expect_true("ncnn_cache_bytes" %in% names(s))
  expect_gte(s$ncnn_cache_bytes, 64 * 64 * 4 * 4)
  expect_lte(s$ncnn_cache_bytes, 256 * 1024^2)
})
