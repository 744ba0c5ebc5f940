# Runs the ONNX node test cases written by tools/onnx-node-tests.py against
# the installed ggmlR and prints, per operator, how many cases pass.
#   Rscript tools/onnx-node-run.R [DIR] [REGEX] [DEVICE] [OUT.tsv]
# DIR defaults to /tmp/onnx-node, REGEX (on case names) to all, DEVICE to
# "cpu". A case passes when every output has the expected shape and values
# within the case's tolerance (|got - want| <= atol + rtol * |want|, as
# numpy's assert_allclose).
suppressPackageStartupMessages(library(ggmlR))
args <- commandArgs(trailingOnly = TRUE)
dir <- if (length(args) >= 1) args[[1]] else "/tmp/onnx-node"
re <- if (length(args) >= 2) args[[2]] else "."
device <- if (length(args) >= 3) args[[3]] else "cpu"
out <- if (length(args) >= 4) args[[4]] else NULL
index <- utils::read.delim(file.path(dir, "index.tsv"), stringsAsFactors = FALSE)
index <- index[grepl(re, index$case), , drop = FALSE]
read_pb <- function(f) ggmlR:::.onnx_read_tensor(f)

run_case <- function(case, rtol, atol) {
  d <- file.path(dir, case)
  m <- tryCatch(onnx_load(file.path(d, "model.onnx"), device = device, n_threads = 1),
                error = function(e) e)
  if (inherits(m, "error")) return(c("error", conditionMessage(m)))
  sets <- list.files(d, pattern = "^test_data_set_", full.names = TRUE)
  for (s in sets) {
    ins <- list.files(s, pattern = "^input_[0-9]+\\.pb$", full.names = TRUE)
    ins <- ins[order(as.integer(gsub("\\D", "", basename(ins))))]
    inputs <- list()
    for (f in ins) {
      t <- tryCatch(read_pb(f), error = function(e) e)
      if (inherits(t, "error")) return(c("error", conditionMessage(t)))
      v <- t$value
      if (length(t$shape) >= 1 && is.null(dim(v))) dim(v) <- t$shape
      inputs[[t$name]] <- v
    }
    got <- tryCatch(onnx_run(m, inputs), error = function(e) e)
    if (inherits(got, "error")) return(c("error", conditionMessage(got)))
    outs <- list.files(s, pattern = "^output_[0-9]+\\.pb$", full.names = TRUE)
    outs <- outs[order(as.integer(gsub("\\D", "", basename(outs))))]
    for (j in seq_along(outs)) {
      want <- tryCatch(read_pb(outs[[j]]), error = function(e) e)
      if (inherits(want, "error")) return(c("error", conditionMessage(want)))
      g <- if (!is.null(got[[want$name]])) got[[want$name]] else got[[j]]
      if (is.null(g)) return(c("fail", sprintf("output %s missing", want$name)))
      gshape <- if (is.null(dim(g))) length(g) else dim(g)
      wshape <- if (length(want$shape) == 0) 1L else want$shape
      if (length(want$shape) <= 1 && is.null(dim(g))) wshape <- prod(want$shape)
      if (!identical(as.integer(gshape), as.integer(wshape)))
        return(c("fail", sprintf("output %s: shape %s, expected %s", want$name,
                                 paste(gshape, collapse = "x"), paste(want$shape, collapse = "x"))))
      a <- as.numeric(g); e <- as.numeric(want$value)
      bad <- !((is.na(a) & is.na(e)) | (is.finite(e) & abs(a - e) <= atol + rtol * abs(e)) | (!is.na(e) & !is.finite(e) & a == e))
      bad[is.na(bad)] <- TRUE
      if (any(bad)) {
        k <- which(bad)[1]
        return(c("fail", sprintf("output %s: %d of %d values differ (first at %d: %g, expected %g)",
                                 want$name, sum(bad), length(e), k, a[k], e[k])))
      }
    }
  }
  c("pass", "")
}

res <- vector("list", nrow(index))
for (i in seq_len(nrow(index))) {
  r <- run_case(index$case[i], index$rtol[i], index$atol[i])
  res[[i]] <- data.frame(case = index$case[i], op = index$op[i], status = r[1],
                         detail = substr(gsub("\n", " ", r[2]), 1, 300), stringsAsFactors = FALSE)
}
res <- do.call(rbind, res)
if (!is.null(out)) utils::write.table(res, out, sep = "\t", quote = FALSE, row.names = FALSE)
by_op <- split(res, res$op)
tab <- data.frame(op = names(by_op),
                  pass = vapply(by_op, function(x) sum(x$status == "pass"), 1L),
                  total = vapply(by_op, nrow, 1L))
tab <- tab[order(tab$op), ]
for (i in seq_len(nrow(tab))) cat(sprintf("%-28s %3d / %3d\n", tab$op[i], tab$pass[i], tab$total[i]))
cat(sprintf("node tests: %d of %d cases pass (%s)\n", sum(tab$pass), sum(tab$total), device))
