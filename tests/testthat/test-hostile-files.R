# Saved models: every kind round-trips; corrupted, truncated and foreign
# files are refused; a failed save leaves the previous file intact; nothing
# in a file is ever run.

set.seed(14)

model_kinds <- function() list(
  linear = ag_linear(4, 3, "tanh"),
  linear_plain = ag_linear(4, 2),
  embedding = ag_embedding(6, 4),
  attention = ag_multihead_attention(4, 2, bias = FALSE),
  attention_bias = ag_multihead_attention(4, 2, dropout = 0.1),
  batch_norm = ag_batch_norm(4, eps = 1e-3, momentum = 0.2),
  sequential = ag_sequential(ag_linear(4, 6, "relu"), ag_batch_norm(6), ag_dropout(0.25),
                             ag_linear(6, 3, "softmax"))
)

input_for <- function(kind) {
  if (kind == "embedding") c(0, 5, 2) else ag_tensor(matrix(seq(-1, 1, length.out = 4 * 5), 4, 5))
}

test_that("every model kind saves and loads back with the same outputs, without model_fn", {
  f <- tempfile(fileext = ".ggmlr")
  on.exit(unlink(f))
  for (kind in names(model_kinds())) {
    m <- model_kinds()[[kind]]
    if (kind == "sequential") m$forward(input_for(kind))   # moves the running statistics
    ag_eval(m)
    want <- m$forward(input_for(kind))$data
    ag_save_model(m, f)
    back <- ag_load_model(f)
    expect_identical(class(back), class(m), info = kind)
    expect_false(back$training, info = kind)
    expect_identical(back$forward(input_for(kind))$data, want, info = kind)
    for (nm in names(m$parameters())) {
      expect_identical(back$parameters()[[nm]]$data, m$parameters()[[nm]]$data, info = paste(kind, nm))
    }
  }
  seq_m <- model_kinds()$sequential
  seq_m$forward(input_for("sequential"))
  ag_save_model(seq_m, f)
  expect_identical(ag_load_model(f)$layers[[2]]$running_var, seq_m$layers[[2]]$running_var)
  expect_identical(ag_load_model(f)$layers[[3]]$rate, 0.25)
})

test_that("a model with layers of one's own needs model_fn at load, never stored", {
  mine <- function() {
    l <- ag_linear(2, 2)
    class(l) <- c("my_layer", class(l))
    ag_sequential(l, ag_linear(2, 1))
  }
  f <- tempfile(fileext = ".ggmlr")
  on.exit(unlink(f))
  m <- mine()
  ag_save_model(m, f, model_fn = mine)
  expect_false(any(grepl("my_layer", rawToChar(readBin(f, "raw", file.size(f))[-(1:24)], multiple = TRUE))))
  expect_error(ag_load_model(f), "stores no architecture.*pass `model_fn`", class = "ggmlR_error")
  back <- ag_load_model(f, model_fn = mine)
  x <- ag_tensor(matrix(1:4, 2, 2))
  expect_identical(back$forward(x)$data, m$forward(x)$data)
})

test_that("corrupted, truncated and foreign files are refused", {
  f <- tempfile(fileext = ".ggmlr")
  g <- tempfile(fileext = ".ggmlr")
  on.exit(unlink(c(f, g)))
  ag_save_model(model_kinds()$sequential, f)
  bytes <- readBin(f, "raw", file.size(f))
  n <- length(bytes)
  flips <- unique(c(1, 9, 13, 21, 25, 30, round(seq(26, n, length.out = 40))))
  for (i in flips) {
    b <- bytes
    b[i] <- xor(b[i], as.raw(0x10))
    writeBin(b, g)
    expect_error(ag_load_model(g), "corrupted|not a file saved by ggmlR|version|truncated|checksum", class = "ggmlR_error",
                 info = sprintf("byte %d flipped", i))
  }
  for (k in c(0, 5, 23, 24, 100, n - 1)) {
    writeBin(bytes[seq_len(k)], g)
    expect_error(ag_load_model(g), "truncated|not a file saved by ggmlR", class = "ggmlR_error", info = sprintf("%d bytes", k))
  }
  writeBin(c(bytes, as.raw(0)), g)
  expect_error(ag_load_model(g), "corrupted", class = "ggmlR_error")
  writeLines("hello", g)
  expect_error(ag_load_model(g), "not a file saved by ggmlR", class = "ggmlR_error")
  expect_error(ag_load_model(tempdir()), "is a folder", class = "ggmlR_error")
  expect_error(ag_load_model(file.path(tempdir(), "nope.ggmlr")), "there is no file", class = "ggmlR_error")
  expect_error(ag_load_model(NA), "`path`", class = "ggmlR_error")
})

test_that("loading never runs code from the file", {
  marker <- tempfile("ran")
  f <- tempfile(fileext = ".rds")
  on.exit(unlink(c(marker, f)))
  evil <- function() { writeLines("ran", marker); ag_sequential(ag_linear(2, 2)) }
  # A file in the old layout: an RDS whose builder writes the marker.
  saveRDS(list(format = "ggmlR.ag_state", version = 1L, parameters = list(), model_fn = evil), f)
  expect_error(ag_load_model(f), "RDS", class = "ggmlR_error")
  # The new layout cannot hold a function at all.
  expect_error(ggmlR:::.rs(ggmlR:::rs_savefile_write(f, list(format = "ggmlR model", fn = evil))),
               "fn is of type .*holds only numbers", class = "ggmlR_error")
  expect_false(file.exists(marker))
})

test_that("a failed save leaves the previous file intact", {
  f <- tempfile(fileext = ".ggmlr")
  on.exit(unlink(f))
  m <- ag_linear(3, 2)
  ag_save_model(m, f)
  before <- readBin(f, "raw", file.size(f))
  expect_error(ag_save_model(m, "/dev/full"), "not a regular file", class = "ggmlR_error")
  expect_error(ag_save_model(m, tempdir()), "is a folder", class = "ggmlR_error")
  expect_error(ag_save_model(m, file.path(tempfile(), "x.ggmlr")), "does not exist", class = "ggmlR_error")
  expect_error(ag_save_model(m, NA), "`path`", class = "ggmlR_error")
  expect_error(ag_save_model(m, c("a", "b")), "`path`", class = "ggmlR_error")
  expect_error(ag_save_model(42, f), "`model`", class = "ggmlR_error")
  expect_identical(readBin(f, "raw", file.size(f)), before)
  # A disk that fills during the write: the child's file size limit is 8 KiB
  # (writes past it fail with EFBIG; SIGXFSZ is ignored).
  # run under `ulimit -f` through a shell wrapper
  cases <- tempfile(fileext = ".R")
  writeLines(c(
    "suppressPackageStartupMessages(library(ggmlR))",
    "m <- ag_linear(100, 100)",
    sprintf("r <- tryCatch({ ag_save_model(m, '%s'); 'saved' }, error = function(e) conditionMessage(e))", f),
    sprintf("cat(r, file.size('%s'), length(list.files('%s', pattern = 'tmp$', all.files = TRUE)), sep = '\\n')", f, dirname(f))
  ), cases)
  out <- system2("bash", c("-c", shQuote(sprintf("trap '' XFSZ; ulimit -f 8; R_LIBS=%s %s --vanilla %s",
    shQuote(paste(.libPaths(), collapse = ":")), shQuote(hostile_rscript()), shQuote(cases)))),
    stdout = TRUE, stderr = FALSE)
  expect_match(out[1], "writing .* failed .*previous file is unchanged")
  expect_identical(as.numeric(out[2]), as.numeric(length(before)))
  expect_identical(out[3], "0")
  expect_identical(readBin(f, "raw", file.size(f)), before)
  expect_identical(ag_load_model(f)$W$data, m$W$data)
})
