# Hostile input to ncnn nets: strings that are not text, params whose sizes
# ask for more memory than exists or overflow, layers listing a blob twice,
# garbage files. Every case runs in a child process (helper-hostile.R).

ncnn_setup <- quote({
  one_layer <- function(layer, input = array(1, c(2, 2, 1)), light = TRUE) {
    net <- ncnn_net(num_threads = 1, light_mode = light)
    net$load_param_mem(paste0("7767517\n2 2\nInput data 0 1 data\n", layer, "\n"))
    net$load_model(ncnn_datareader_empty())
    ex <- net$create_extractor()
    ex$input("data", input)
    ex$extract("out")
  }
})

test_that("strings that are not UTF-8 text are errors, not crashes", {
  expect_hostile_errors(list(
    param_mem_ff = hcase(ncnn_net(1)$load_param_mem(rawToChar(as.raw(0xff))), "`text` is not valid UTF-8"),
    param_mem_mixed = hcase(ncnn_net(1)$load_param_mem(c("7767517", rawToChar(as.raw(c(0x31, 0xc3))))), "UTF-8"),
    register_name = hcase(ncnn_net(1)$register_custom_layer(rawToChar(as.raw(c(0x41, 0xff))), function() ncnn_layer(identity)), "`type` is not valid UTF-8"),
    blob_name = hcase({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU r 1 1 data out\n")
      net$load_model(ncnn_datareader_empty())
      net$create_extractor()$extract(rawToChar(as.raw(c(0x6f, 0xfe))))
    }, "`blob` is not valid UTF-8"),
    model_path = hcase(ncnn_net(1)$load_model(rawToChar(as.raw(c(0x2f, 0xff)))), "does not exist"),
    bin_as_param = hcase({
      f <- tempfile(fileext = ".bin")
      writeBin(as.raw(c(0, 0, 0, 0, 0xff, 0x7f, 1, 2, 3)), f)
      ncnn_net(1)$load_param(f)
    }, "not a text param file.*load_model"),
    folder_as_param = hcase(ncnn_net(1)$load_param(tempdir()), "is a folder"),
    folder_as_model = hcase({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nReLU r 1 1 data out\n")
      net$load_model(tempdir())
    }, "is a folder")
  ))
})

test_that("a latin-1 string is converted, not refused", {
  res <- hostile_run(list(latin1 = quote({
    net <- ncnn_net(1)
    p <- paste0("7767517\n2 2\nInput data 0 1 data\nReLU caf", "\xe9", " 1 1 data out\n")
    Encoding(p) <- "latin1"
    net$load_param_mem(p)
    net$layers()$name[2] == "caf\u00e9"
  })))
  expect_identical(res$outcome, "value")
  expect_match(res$message, "TRUE")
})

test_that("sizes from a param that need more memory than exists, or overflow, are errors", {
  huge <- list(
    padding_huge = hcase(one_layer("Padding pad 1 1 data out 0=50000 1=50000 2=50000 3=50000"), "Padding.*cannot allocate .*GiB.*machine's memory"),
    padding_overflow = hcase(one_layer("Padding pad 1 1 data out 0=2147483647 1=2147483647 2=2147483647 3=2147483647"), "Padding.*more than can be addressed"),
    padding_channels = hcase(one_layer("Padding pad 1 1 data out 7=2147483647 8=2147483647 0=2147483647"), "Padding"),
    interp_scale = hcase(one_layer("Interp i 1 1 data out 0=1 1=50000.0 2=50000.0"), "Interp.*cannot allocate"),
    interp_bilinear = hcase(one_layer("Interp i 1 1 data out 0=2 1=1e9 2=1e9"), "Interp"),
    interp_inf = hcase(one_layer("Interp i 1 1 data out 0=2 1=1e30 2=1e30"), "Interp"),
    interp_size = hcase(one_layer("Interp i 1 1 data out 0=1 3=2000000000 4=2000000000"), "Interp"),
    innerproduct_weights = hcase({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nInnerProduct ip 1 1 data out 0=1 2=2000000000000\n")
      net$load_model(ncnn_datareader_empty())
    }, "InnerProduct"),
    innerproduct_bytes = hcase({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nInnerProduct ip 1 1 data out 0=1 2=900000000\n")
      net$load_model(as.raw(rep(0, 64)))
    }, "weights end early"),
    conv_weights = hcase({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nConvolution c 1 1 data out 0=100000 1=3 6=2000000000000\n")
      net$load_model(ncnn_datareader_empty())
    }, "Convolution"),
    conv_kernel = hcase(one_layer("Convolution c 1 1 data out 0=1 1=2000000000 6=2000000000"), NULL),
    pooling_kernel = hcase(one_layer("Pooling p 1 1 data out 0=0 1=2147483647 2=1"), NULL),
    pooling_pad = hcase(one_layer("Pooling p 1 1 data out 0=0 1=2 2=1 3=2147483647"), NULL),
    reshape_huge = hcase(one_layer("Reshape r 1 1 data out 0=2147483647 1=2147483647 2=2147483647"), NULL),
    deconv_kernel = hcase(one_layer("Deconvolution d 1 1 data out 0=1 1=3 3=2147483647 6=9"), NULL),
    slice_points = hcase(one_layer("Slice s 1 1 data out -23300=1,2147483647"), NULL),
    crop_huge = hcase(one_layer("Crop c 1 1 data out 0=2147483647 1=2147483647"), NULL),
    tile_huge = hcase(one_layer("Tile t 1 1 data out 0=0 1=2147483647"), NULL)
  )
  res <- hostile_run(lapply(huge, `[[`, "code"), setup = ncnn_setup)
  for (nm in names(huge)) {
    r <- res[res$name == nm, ]
    # An error naming what was wrong, or (for the layers that ignore the
    # key or clamp it) a value; never a crash, a hang or a panic.
    expect_true(r$outcome %in% c("error", "value"), label = paste(nm, r$outcome, r$message))
    if (r$outcome == "error") {
      expect_hostile(r, pattern = huge[[nm]]$pattern)
    }
  }
})

test_that("a layer listing the same bottom twice works in light mode (it panicked)", {
  res <- hostile_run(list(
    binaryop = quote({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nBinaryOp sq 2 1 x x out 0=2\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1:4, c(2, 2)))
      as.vector(ex$extract("out"))
    }),
    concat = quote({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nConcat c 2 1 x x out 0=0\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1:4, c(2, 2)))
      dim(ex$extract("out"))
    }),
    eltwise3 = quote({
      net <- ncnn_net(1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nEltwise e 3 1 x x x out 0=1\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1:4, c(2, 2)))
      as.vector(ex$extract("out"))
    })
  ))
  expect_identical(res$outcome, rep("value", 3), info = paste(res$message, collapse = "; "))
  expect_identical(res$message[1], "1 4 9 16")       # x * x, computed by base R
  expect_identical(res$message[2], "2 4")            # two 2x2 side by side along w
  expect_identical(res$message[3], "3 6 9 12")       # x + x + x
})

test_that("a new input invalidates what was computed from the old one", {
  net <- ncnn_net(1, light_mode = FALSE)
  net$load_param_mem("7767517\n3 3\nInput data 0 1 x\nReLU r 1 1 x y\nSigmoid s 1 1 y out\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("x", array(c(-1, 2, -3, 4), c(2, 2)))
  sig <- function(v) 1 / (1 + exp(-pmax(v, 0)))
  expect_equal(as.vector(ex$extract("out")), sig(c(-1, 2, -3, 4)), tolerance = 1e-6)
  ex$input("x", array(c(5, -6, 7, -8), c(2, 2)))
  expect_equal(as.vector(ex$extract("out")), sig(c(5, -6, 7, -8)), tolerance = 1e-6)
  expect_equal(as.vector(ex$extract("y")), pmax(c(5, -6, 7, -8), 0))
})

test_that("warnings and messages of a custom layer reach the caller's handlers", {
  net <- ncnn_net(1)
  net$register_custom_layer("Noisy", function() ncnn_layer(function(x) {
    warning("negative values clipped")
    message("noisy layer ran")
    pmax(x, 0)
  }))
  net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nNoisy n 1 1 x out\n")
  net$load_model(ncnn_datareader_empty())
  ex <- net$create_extractor()
  ex$input("x", array(c(-1, 1), c(2, 1)))
  seen <- character()
  out <- withCallingHandlers(ex$extract("out"),
    warning = function(w) { seen <<- c(seen, conditionMessage(w)); invokeRestart("muffleWarning") },
    message = function(m) { seen <<- c(seen, conditionMessage(m)); invokeRestart("muffleMessage") })
  expect_identical(seen, c("negative values clipped", "noisy layer ran\n"))
  expect_equal(as.vector(out), c(0, 1))
  ex$input("x", array(c(-2, 2), c(2, 1)))
  expect_identical(tryCatch(ex$extract("out"), warning = function(w) conditionMessage(w)),
                   "negative values clipped")
  ex$input("x", array(c(-3, 3), c(2, 1)))
  expect_silent(suppressMessages(suppressWarnings(ex$extract("out"))))
  ex$input("x", array(c(-3, 3), c(2, 1)))
  expect_warning(expect_message(ex$extract("out"), "noisy layer ran"), "clipped")
})

test_that("an interrupt or the abort restart inside a custom layer stays what it is", {
  res <- hostile_run(list(
    interrupt = quote({
      net <- ncnn_net(1)
      net$register_custom_layer("Int", function() ncnn_layer(function(x) {
        tools::pskill(Sys.getpid(), tools::SIGINT)
        Sys.sleep(2)
        x
      }))
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nInt i 1 1 x out\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1, c(1, 1)))
      r <- tryCatch(ex$extract("out"), interrupt = function(e) "interrupt", error = function(e) conditionMessage(e))
      # the net is still usable
      ex2 <- net$create_extractor()
      c(r, class(tryCatch(ex2$input("x", array(1, c(1, 1))), error = function(e) e))[1])
    }),
    abort = quote({
      net <- ncnn_net(1)
      net$register_custom_layer("Ab", function() ncnn_layer(function(x) invokeRestart("abort")))
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nAb a 1 1 x out\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1, c(1, 1)))
      withRestarts(ex$extract("out"), abort = function() "aborted")
    }),
    outer_restart = quote({
      net <- ncnn_net(1)
      net$register_custom_layer("Jump", function() ncnn_layer(function(x) invokeRestart("mine")))
      net$load_param_mem("7767517\n2 2\nInput data 0 1 x\nJump j 1 1 x out\n")
      net$load_model(ncnn_datareader_empty())
      ex <- net$create_extractor()
      ex$input("x", array(1, c(1, 1)))
      withRestarts(tryCatch(ex$extract("out"), error = function(e) conditionMessage(e)), mine = function() "jumped")
    })
  ))
  expect_identical(res$outcome, rep("value", 3), info = paste(res$message, collapse = "; "))
  expect_match(res$message[1], "^interrupt")
  expect_identical(res$message[2], "aborted")
  # R code called from the engine cannot reach restarts outside it: a clear
  # error, without the source of the package's internals
  expect_match(res$message[3], "no 'restart' 'mine' found")
  expect_false(grepl("function \\(what", res$message[3]))
})

test_that("garbage params and models are errors, in bulk", {
  set.seed(14)
  good <- "7767517\n4 4\nInput data 0 1 data\nConvolution c 1 1 data y 0=2 1=3 4=1 6=18\nReLU r 1 1 y z\nPooling p 1 1 z out 0=0 1=2 2=2\n"
  cases <- list()
  for (i in 1:20) {
    bytes <- charToRaw(good)
    k <- sample(length(bytes), 3)
    bytes[k] <- as.raw(sample(c(32:126, 10), 3))
    txt <- rawToChar(bytes)
    cases[[sprintf("mutated_param_%02d", i)]] <- bquote({
      net <- ncnn_net(1)
      ok <- tryCatch({ net$load_param_mem(.(txt)); TRUE }, ncnn_error = function(e) FALSE)
      if (ok) {
        net$load_model(as.raw(sample(0:255, 200, TRUE)))
        ex <- net$create_extractor()
        ex$input(0, array(runif(75), c(5, 5, 3)))
        ex$extract(net$output_names()[1])
      }
      stop(structure(class = c("ggmlR_error", "error", "condition"), list(message = "refused", call = NULL)))
    })
  }
  for (i in 1:10) {
    b <- as.raw(sample(0:255, 64, TRUE))
    cases[[sprintf("random_binary_param_%02d", i)]] <- bquote(ncnn_net(1)$load_param_bin({
      f <- tempfile(); writeBin(.(b), f); f
    }))
  }
  res <- hostile_run(cases)
  expect_hostile(res)
})
