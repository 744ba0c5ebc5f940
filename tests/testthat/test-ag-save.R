test_that("a saved model loads back with the same outputs", {
  set.seed(50)
  build <- function() ag_sequential(ag_linear(4, 6, "relu"), ag_batch_norm(6), ag_linear(6, 3))
  m <- build()
  x <- rmat(4, 8)
  m$forward(ag_tensor(x))          # moves the running statistics
  ag_eval(m)
  want <- m$forward(ag_tensor(x))$data
  f <- tempfile(fileext = ".rds")
  on.exit(unlink(f))
  expect_identical(ag_save_model(m, f, model_fn = build), f)
  m2 <- ag_load_model(f)
  expect_false(m2$training)
  expect_identical(m2$forward(ag_tensor(x))$data, want)
  expect_identical(m2$layers[[2]]$running_var, m$layers[[2]]$running_var)
  # the file is not R data: its own header, and no code in it
  expect_identical(readBin(f, "raw", 8), charToRaw("GGMLRMDL"))
  # the architecture is stored as data; a given builder is used instead, and
  # a wrong one is refused
  ag_save_model(m, f)
  expect_identical(ag_load_model(f)$forward(ag_tensor(x))$data, want)
  expect_error(ag_load_model(f, model_fn = function() ag_sequential(ag_linear(4, 5))), "does not match")
  expect_error(ag_load_model(f, model_fn = function() ag_sequential(ag_linear(4, 7, "relu"), ag_batch_norm(7), ag_linear(7, 3))), "parameter 'layer1_W'")
  expect_identical(ag_load_model(f, model_fn = build)$forward(ag_tensor(x))$data, want)
  saveRDS(list(a = 1), f)
  expect_error(ag_load_model(f), "RDS", class = "ggmlR_error")
})

test_that("the dataloader yields full batches covering the data", {
  set.seed(51)
  x <- matrix(1:20, 2, 10); y <- matrix(1:10, 1, 10)
  dl <- ag_dataloader(x, y, batch_size = 3)
  expect_identical(dl$n_batches(), 3L)
  seen <- c()
  while (dl$has_next()) {
    b <- dl$next_batch()
    expect_identical(dim(b$x), c(2L, 3L))
    expect_identical(b$x$data[1, ], (b$y$data[1, ] - 1) * 2 + 1)
    seen <- c(seen, b$y$data)
  }
  expect_length(unique(seen), 9L)
  expect_error(dl$next_batch(), "reset")
  expect_length(dl$epoch(), 3L)
  dl2 <- ag_dataloader(t(x), batch_size = 5, shuffle = FALSE, col_major = FALSE)
  expect_identical(dl2$next_batch()$x$data, x[, 1:5] + 0)
  expect_error(ag_dataloader(x, matrix(1, 1, 3)), "samples")
})
