#!/usr/bin/env bash
# Installs a source tarball as CRAN would build it here: no network (a new
# network namespace with `unshare -n`, or, where that is not allowed, proxies
# that lead nowhere) and an empty CARGO_HOME, into a fresh library; then
# loads the package and runs a small computation. The CARGO_HOME must still
# be empty afterwards: everything came from the tarball's vendored crates.
set -euo pipefail
tarball=$1
lib=$(mktemp -d)
home=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$lib" "$home" "$log"' EXIT
offline=(unshare -n)
if ! unshare -n true 2>/dev/null; then
  echo "unshare -n is not allowed here: cutting the network with proxies that lead nowhere"
  offline=(env http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 CARGO_HTTP_PROXY=http://127.0.0.1:9)
fi
echo "offline install of $(basename "$tarball") (CARGO_HOME=$home, ${offline[*]})"
if ! CARGO_HOME=$home "${offline[@]}" R CMD INSTALL -l "$lib" "$tarball" >"$log" 2>&1; then
  tail -40 "$log"
  echo "offline install: FAILED"
  exit 1
fi
grep -E "^using rustc|^building offline" "$log" || true
if [ -n "$(ls -A "$home")" ]; then
  echo "offline install: CARGO_HOME is not empty afterwards:"; ls -A "$home"; exit 1
fi
"${offline[@]}" Rscript -e "library(ggmlR, lib.loc = '$lib')" \
  -e 'x <- ag_tensor(matrix(1:4, 2)); stopifnot(identical((x %*% x)$data, matrix(c(7, 10, 15, 22), 2)))' \
  -e "cat('offline install: OK, ggmlR', format(packageVersion('ggmlR', lib.loc = '$lib')), '\\n')"
