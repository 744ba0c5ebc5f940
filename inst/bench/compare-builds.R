# Two builds of ggmlR side by side: installs git revision BASE and the working
# tree (or revision NEW) into two private R libraries, then times the same
# work with each, alternating between them in rounds, each round in a fresh
# R process per build. Prints each measure's best time per build and the
# ratio NEW / BASE (< 1: NEW is faster).
#
#   Rscript inst/bench/compare-builds.R [BASE [NEW]]
#
# BASE and NEW are git revisions; NEW defaults to the working tree and BASE
# to HEAD (so `make bench` compares uncommitted changes with the last
# commit). The measures: one training step (forward, backward, Adam) of the two MLPs of
# train_step.R on device "cpu" and, when a Vulkan device exists, "gpu"; and
# one ncnn inference of the three fixture architectures at 1 and 2 threads.
# GGMLR_BENCH_ROUNDS (default 5) sets the rounds; GGMLR_COMPARE_DIR keeps
# the builds between runs (default: a temporary folder, removed at the end).
# Needs: git, cargo, and the package's build dependencies.

args <- commandArgs(trailingOnly = TRUE)
base_ref <- if (length(args)) args[[1L]] else "HEAD"
new_ref <- if (length(args) >= 2L) args[[2L]] else NA_character_
rounds <- as.integer(Sys.getenv("GGMLR_BENCH_ROUNDS", "5"))
repo <- normalizePath(".")
if (!file.exists(file.path(repo, "DESCRIPTION"))) stop("run from the repository root")

keep <- nzchar(Sys.getenv("GGMLR_COMPARE_DIR"))
work <- if (keep) Sys.getenv("GGMLR_COMPARE_DIR") else tempfile("ggmlr-compare-")
dir.create(work, showWarnings = FALSE, recursive = TRUE)
if (!keep) on.exit(unlink(work, recursive = TRUE), add = TRUE)

run <- function(cmd, args, ...) {
  st <- system2(cmd, args, ...)
  if (!identical(st, 0L)) stop(cmd, " ", paste(args, collapse = " "), " failed (status ", st, ")")
}

# A source tree of `ref` (NA: the working tree, as it is).
source_of <- function(ref, name) {
  dir <- file.path(work, paste0("src-", name))
  unlink(dir, recursive = TRUE)
  dir.create(dir)
  if (is.na(ref)) {
    files <- system2("git", c("-C", repo, "ls-files", "-co", "--exclude-standard"), stdout = TRUE)
    files <- files[file.exists(file.path(repo, files))]
    for (d in unique(dirname(files))) dir.create(file.path(dir, d), recursive = TRUE, showWarnings = FALSE)
    file.copy(file.path(repo, files), file.path(dir, files))
  } else {
    tar <- file.path(work, paste0(name, ".tar"))
    run("git", c("-C", repo, "archive", "--format=tar", "-o", shQuote(tar), shQuote(ref)))
    run("tar", c("-xf", shQuote(tar), "-C", shQuote(dir)))
  }
  dir
}

# Installs the tree into its own library (reusing a cargo target folder per
# build name, so a kept GGMLR_COMPARE_DIR rebuilds only what changed).
install <- function(ref, name) {
  src <- source_of(ref, name)
  lib <- file.path(work, paste0("lib-", name))
  dir.create(lib, showWarnings = FALSE)
  target <- file.path(work, paste0("target-", name))
  if (dir.exists(target)) file.rename(target, file.path(src, "src", "rust", "target"))
  lock <- file.path(src, "Cargo.lock")
  if (file.exists(lock)) file.copy(lock, file.path(src, "src", "rust", "ggmlr", "Cargo.lock"), overwrite = TRUE)
  message("installing ", if (is.na(ref)) "the working tree" else ref, " into ", lib)
  run(file.path(R.home("bin"), "R"), c("CMD", "INSTALL", "--no-multiarch", "-l", shQuote(lib), shQuote(src)),
      stdout = FALSE, stderr = FALSE)
  file.rename(file.path(src, "src", "rust", "target"), target)
  lib
}

libs <- c(base = install(base_ref, "base"), new = install(new_ref, "new"))

# What each child process times: prints "measure<TAB>milliseconds" lines.
probe <- file.path(work, "probe.R")
writeLines(con = probe, c(
  'suppressPackageStartupMessages(library(ggmlR))',
  'fixtures <- commandArgs(trailingOnly = TRUE)[[1L]]',
  '# The fastest of `batches` batches, each running f until 60 ms have passed.',
  'best <- function(f, batches = 5L, batch_s = 0.06) {',
  '  t0 <- proc.time()[["elapsed"]]; while (proc.time()[["elapsed"]] - t0 < 0.2) f()',
  '  min(vapply(seq_len(batches), function(i) {',
  '    n <- 0L; t0 <- proc.time()[["elapsed"]]',
  '    repeat { f(); n <- n + 1L; el <- proc.time()[["elapsed"]] - t0; if (el >= batch_s) break }',
  '    el / n', '  }, 0)) * 1000',
  '}',
  'step_of <- function(d_in, d_h, d_out, batch, device) {',
  '  old <- ag_device(device); set.seed(1)',
  '  model <- ag_sequential(ag_linear(d_in, d_h, "relu"), ag_linear(d_h, d_out))',
  '  opt <- optimizer_adam(model$parameters(), lr = 1e-3)',
  '  x <- ag_tensor(matrix(rnorm(d_in * batch), d_in, batch))',
  '  y <- sample.int(d_out, batch, replace = TRUE) - 1L',
  '  function() {',
  '    with_grad_tape(loss <- ag_softmax_cross_entropy_loss(model$forward(x), y))',
  '    opt$step(backward(loss)); opt$zero_grad() }',
  '}',
  'devices <- c("cpu", if (ggml_vulkan_available()) "gpu")',
  'for (dev in devices) {',
  '  cat(sprintf("step 128-128-10 b64 %s\\t%.4f\\n", dev, best(step_of(128L, 128L, 10L, 64L, dev))))',
  '  cat(sprintf("step 512-256-10 b512 %s\\t%.4f\\n", dev, best(step_of(512L, 256L, 10L, 512L, dev))))',
  '}',
  'set.seed(1); x <- array(runif(224 * 224 * 3, -1, 1), c(224, 224, 3))',
  'for (arch in c("arch_squeezenet", "arch_mobilenet", "arch_resnet")) for (th in 1:2) {',
  '  net <- ncnn_net(num_threads = th)',
  '  net$load_param(file.path(fixtures, paste0(arch, ".param")))',
  '  net$load_model(file.path(fixtures, paste0(arch, ".bin")))',
  '  f <- function() { ex <- net$create_extractor(); ex$input("data", x); ex$extract("prob") }',
  '  cat(sprintf("ncnn %s %d thread(s)\\t%.4f\\n", sub("arch_", "", arch), th, best(f)))',
  '}'
))

fixtures <- file.path(repo, "tests", "testthat", "fixtures", "ncnn")
times <- list()
for (r in seq_len(rounds)) {
  for (side in if (r %% 2L) c("base", "new") else c("new", "base")) {
    out <- system2(file.path(R.home("bin"), "Rscript"), c(shQuote(probe), shQuote(fixtures)),
                   stdout = TRUE, env = paste0("R_LIBS=", libs[[side]]))
    for (line in grep("\t", out, value = TRUE)) {
      kv <- strsplit(line, "\t", fixed = TRUE)[[1L]]
      times[[kv[[1L]]]][[side]] <- min(times[[kv[[1L]]]][[side]], as.numeric(kv[[2L]]), Inf)
    }
  }
  message("round ", r, " of ", rounds, " done")
}

cat(sprintf("\nBASE %s vs NEW %s, best of %d alternating rounds (ms)\n",
            base_ref, if (is.na(new_ref)) "working tree" else new_ref, rounds))
cat(sprintf("%-32s %10s %10s %9s\n", "measure", "BASE", "NEW", "NEW/BASE"))
for (m in names(times)) {
  b <- times[[m]][["base"]]; n <- times[[m]][["new"]]
  cat(sprintf("%-32s %10.3f %10.3f %9.3f\n", m, b, n, n / b))
}
