# Real GGUF, ncnn and ONNX files mangled where their counts, lengths,
# offsets and indices are: every mangled file is refused with a ggmlR_error
# or loads and runs, and never crashes, panics or fails as an internal
# error. Each reader's mutants run in one child R process.

readers_setup <- quote({
  # `n` mutants of `bytes` (seeded): truncations, 4-byte words overwritten
  # with the values that break sizes and indices (-1, INT_MAX, INT_MIN, 0,
  # 2^31 + 1, random), and single bytes set to 0x00, 0x7f, 0x80 or 0xff.
  mutants <- function(bytes, n, seed) {
    set.seed(seed)
    len <- length(bytes)
    words <- list(as.raw(c(255, 255, 255, 255)), as.raw(c(255, 255, 255, 127)), as.raw(c(0, 0, 0, 128)),
                  as.raw(c(0, 0, 0, 0)), as.raw(c(1, 0, 0, 128)), NULL)
    lapply(seq_len(n), function(i) {
      b <- bytes
      kind <- i %% 3
      if (kind == 0) return(b[seq_len(sample(len - 1, 1))])
      # positions biased to the start, where the headers and tables are
      at <- min(len - 4, floor(len * stats::runif(1)^3) + 1)
      if (kind == 1) {
        w <- words[[sample(length(words), 1)]]
        if (is.null(w)) w <- as.raw(sample(0:255, 4, TRUE))
        b[at + 0:3] <- w
      } else {
        b[at] <- as.raw(sample(c(0, 127, 128, 255), 1))
      }
      b
    })
  }
  # Load (and use) each mutant with `use(path)`; a summary of what happened:
  # "<bad> bad of <n> (<loaded> loaded)" and the first bad outcome.
  survive <- function(bytes, n, seed, use, ext) {
    bad <- character()
    loaded <- 0
    for (b in mutants(bytes, n, seed)) {
      f <- tempfile(fileext = ext)
      writeBin(b, f)
      r <- tryCatch({ use(f); "loaded" },
        ggmlR_error = function(e) {
          m <- conditionMessage(e)
          if (grepl("internal error|panicked|out of bounds|unwrap|overflow", m)) paste("internal:", m) else "refused"
        },
        error = function(e) paste(class(e)[1], conditionMessage(e)))
      unlink(f)
      if (r == "loaded") loaded <- loaded + 1 else if (r != "refused") bad <- c(bad, r)
    }
    sprintf("%d bad of %d (%d loaded)%s", length(bad), n, loaded, if (length(bad)) paste(":", bad[1]) else "")
  }
})

test_that("mangled GGUF, ncnn and ONNX files are refused or load, never crash", {
  fx <- function(...) normalizePath(test_path("fixtures", ...))
  cases <- list(
    gguf = bquote({
      survive(readBin(.(fx("gguf", "all-types.gguf")), "raw", 1e6), 300, 1, function(f) {
        g <- gguf_load(f)
        on.exit(gguf_free(g))
        invisible(gguf_metadata(g))
        for (nm in gguf_tensor_names(g)) invisible(gguf_tensor_data(g, nm))
      }, ".gguf")
    }),
    ncnn_param_bin = bquote({
      weights <- .(fx("ncnn", "arch_resnet.bin"))
      x <- array(stats::runif(32 * 32 * 3), c(32, 32, 3))
      survive(readBin(.(fx("ncnn", "arch_resnet.param.bin")), "raw", 1e6), 300, 2, function(f) {
        net <- ncnn_net(1)
        net$load_param_bin(f)
        net$load_model(weights)
        ex <- net$create_extractor()
        ex$input(0, x)
        invisible(ex$extract(36))
      }, ".param.bin")
    }),
    ncnn_model_bin = bquote({
      param <- .(fx("ncnn", "arch_resnet.param.bin"))
      x <- array(stats::runif(32 * 32 * 3), c(32, 32, 3))
      survive(readBin(.(fx("ncnn", "arch_resnet.bin")), "raw", 1e6), 100, 3, function(f) {
        net <- ncnn_net(1)
        net$load_param_bin(param)
        net$load_model(f)
        ex <- net$create_extractor()
        ex$input(0, x)
        invisible(ex$extract(36))
      }, ".bin")
    }),
    onnx = bquote({
      x <- array(stats::runif(3 * 32 * 32), c(1, 3, 32, 32))
      survive(readBin(.(fx("onnx-arch", "cnn.onnx")), "raw", 1e6), 300, 4, function(f) {
        m <- onnx_load(f, n_threads = 1)
        invisible(onnx_run(m, list(x = x)))
      }, ".onnx")
    })
  )
  res <- hostile_run(cases, setup = readers_setup, timeout = 600)
  expect_identical(res$outcome, rep("value", length(cases)), info = paste(res$name, res$outcome, res$message, collapse = "; "))
  for (i in seq_along(cases)) {
    expect_match(res$message[i], "^0 bad of", info = res$name[i])
  }
  # the mutants reach past the header: some load, most are refused
  loaded <- as.numeric(sub(".*\\((\\d+) loaded\\).*", "\\1", res$message))
  expect_true(all(loaded < c(300, 300, 100, 300)), info = paste(res$message, collapse = "; "))
})

test_that("a NUL inside a name or string of a file is shown as \\0, and the object stays usable", {
  fx <- function(...) normalizePath(test_path("fixtures", ...))
  # R strings cannot hold NUL; making one raised an R error past the locks
  # the call held, and the next call on the object waited for ever.
  res <- hostile_run(list(
    gguf = bquote({
      b <- readBin(.(fx("gguf", "all-types.gguf")), "raw", 1e6)
      at <- grepRaw("general.architecture", b)
      b[at + 7] <- as.raw(0)                     # the key general\0architecture
      v <- grepRaw("ggmlr-test", b)
      b[v + 5] <- as.raw(0)                      # its value ggmlr\0test
      f <- tempfile(fileext = ".gguf")
      writeBin(b, f)
      g <- gguf_load(f)
      m <- gguf_metadata(g)
      k <- names(m)[1]
      c(k, m[[1]], names(gguf_metadata_types(g))[1], length(gguf_tensor_names(g)))
    }),
    onnx = bquote({
      b <- readBin(.(fx("onnx-arch", "cnn.onnx")), "raw", 1e6)
      b[grepRaw("pytorch", b) + 2] <- as.raw(0)  # producer py\0orch
      f <- tempfile(fileext = ".onnx")
      writeBin(b, f)
      m <- onnx_load(f)
      s <- utils::capture.output(print(m))
      c(any(grepl("py\\0orch", s, fixed = TRUE)), names(onnx_inputs(m)))
    })
  ), timeout = 120)
  expect_identical(res$outcome, c("value", "value"), info = paste(res$name, res$outcome, res$message, collapse = "; "))
  n_tensors <- length(gguf_tensor_names(gguf_load(fx("gguf", "all-types.gguf"))))
  expect_identical(res$message[1], paste("general\\0architecture ggmlr\\0test general\\0architecture", n_tensors))
  expect_identical(res$message[2], "TRUE x")
})
