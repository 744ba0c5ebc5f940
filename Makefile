# ggmlR developer commands. `make demo` and `make test` each do the whole
# set-up on a fresh Debian 12 machine that has Rust.
SHELL := /bin/bash
export PATH := $(PATH):$(HOME)/.cargo/bin
R ?= R
RSCRIPT ?= Rscript
# One target dir for cargo's tests and the package build, so dependencies
# compile once.
CARGO_TARGET := src/rust/target
CARGO_ENV := CARGO_PROFILE_RELEASE_STRIP=debuginfo
DEBS := r-base-core r-base-dev r-cran-testthat r-cran-roxygen2 r-cran-cli \
        r-cran-rlang r-cran-generics mesa-vulkan-drivers libvulkan1 \
        r-cran-knitr r-cran-rmarkdown pandoc r-cran-pkgdown qpdf tidy \
        r-cran-future r-cran-codetools
SPEC_DIR ?= ../shared/spec
# Set RLIB=/some/dir to install into (and test from) a private R library.
RLIB ?=
ifneq ($(RLIB),)
export R_LIBS := $(RLIB):$(R_LIBS)
INSTALL_LIB := -l $(RLIB)
endif

.PHONY: setup deps check-deps install-debs install lockfile test test-rust test-r layers panics demo tarball check site bench docs fuzz clean

## Everything both main commands need: Debian packages, then the package.
setup: deps install

deps:
	@$(MAKE) -s install-debs PKGS="$(DEBS)"
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }

# LaTeX for the PDF manual that R CMD check builds (make check only).
CHECK_DEBS := texlive-latex-base texlive-latex-recommended texlive-fonts-recommended
check-deps: deps
	@$(MAKE) -s install-debs PKGS="$(CHECK_DEBS)"

install-debs:
	@missing=""; for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "Debian packages: all present"; fi

## Keep the tarball's lock file (src/rust/ggmlr/Cargo.lock) equal to the workspace's.
lockfile:
	@cargo metadata --format-version 1 --locked >/dev/null 2>&1 || cargo generate-lockfile
	@cmp -s Cargo.lock src/rust/ggmlr/Cargo.lock || cp Cargo.lock src/rust/ggmlr/Cargo.lock

install: lockfile
	@if [ -n "$(RLIB)" ]; then mkdir -p "$(RLIB)"; fi
	$(R) CMD INSTALL --no-multiarch $(INSTALL_LIB) .

test: setup test-rust test-r

test-rust:
	$(CARGO_ENV) cargo test --release --locked --workspace --target-dir $(CARGO_TARGET)

## Every unwrap/expect/panicking macro in the crates' non-test code, and those
## without an `// INVARIANT:` comment, and the index expressions of the file
## readers without a `// BOUNDS:` comment (both also tests of `make test-rust`).
panics:
	$(CARGO_ENV) cargo run --release --locked -q -p layercheck --target-dir $(CARGO_TARGET) -- --panics src/rust/core src/rust/ggmlr
	$(CARGO_ENV) cargo run --release --locked -q -p layercheck --target-dir $(CARGO_TARGET) -- --bounds

## The crates' module imports: no cycles, only the directions in each LAYERS file.
layers:
	$(CARGO_ENV) cargo run --release --locked -q -p layercheck --target-dir $(CARGO_TARGET) -- --tree src/rust/core src/rust/ggmlr

# GGMLR_REQUIRE_VULKAN turns a missing Vulkan device into a test failure.
# The residency specification (../shared/spec) runs unchanged beside the
# package's own tests when it is there.
# It runs a second time with a Vulkan backend holding the residency pools.
test-r:
	GGMLR_REQUIRE_VULKAN=1 $(RSCRIPT) tools/run-tests.R tests/testthat \
	  $$( [ -f $(SPEC_DIR)/test-ag-residency-scopes.R ] && \
	      echo $(SPEC_DIR) --vulkan-backend=$(SPEC_DIR) )

demo: setup
	$(RSCRIPT) inst/examples/demo.R

# A CRAN-style source tarball, built outside the repository (inside it, cargo
# would take the tarball's crate for a member of this workspace): the
# package's files as git sees them (committed or not, less the ignored),
# plus the vendored crates (tools/vendor.sh), with the vignettes built.
CHECK_DIR ?= /tmp/ggmlR-check
tarball: deps lockfile
	rm -rf $(CHECK_DIR) && mkdir -p $(CHECK_DIR)/ggmlR
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C $(CHECK_DIR)/ggmlR
	tools/vendor.sh $(CHECK_DIR)/ggmlR/src/rust/vendor.tar.xz
	cd $(CHECK_DIR) && $(R) CMD build ggmlR

# R CMD check --as-cran on that tarball, vignettes rebuilt and the PDF manual
# made (in Times: Debian's small LaTeX lacks the inconsolata font); no remote
# CRAN look-ups, which need the network. Any ERROR or WARNING fails. Then the
# tarball is installed with networking unavailable and an empty CARGO_HOME
# (tools/check-offline-install.sh).
check: check-deps tarball
	cd $(CHECK_DIR) && _R_CHECK_CRAN_INCOMING_REMOTE_=false _R_CHECK_SYSTEM_CLOCK_=0 R_RD4PDF="times,hyper" \
	  $(R) CMD check --as-cran ggmlR_*.tar.gz
	@log=$(CHECK_DIR)/ggmlR.Rcheck/00check.log; grep -E "^Status:" $$log; \
	  if grep -qE "^Status:.*(ERROR|WARNING)" $$log; then echo "R CMD check --as-cran: ERROR or WARNING"; exit 1; fi
	tools/check-offline-install.sh $(CHECK_DIR)/ggmlR_*.tar.gz

# The pkgdown site of the installed package in docs/, then a check that every
# help topic and vignette has its page, no example failed and no internal link
# is broken (tools/check-site.R).
site: deps install
	$(RSCRIPT) tools/build-site.R docs

bench: setup
	@for f in inst/bench/*.R; do echo "== $$f"; $(RSCRIPT) $$f || exit 1; done

docs: install
	$(RSCRIPT) tools/make-wrappers.R R/extendr-wrappers.R
	$(RSCRIPT) -e 'roxygen2::roxygenise(load_code = roxygen2::load_installed)'
	$(R) CMD INSTALL --no-multiarch $(INSTALL_LIB) .

# Bounded fuzzing (FUZZ_SECONDS each) of the ncnn param and model readers
# (ncnn_readers), ncnn forward passes of single layers with random params
# and small inputs (ncnn_forward), the saved-model reader (savefile), the
# ONNX reader and planner (onnx_reader) and the GGUF reader (gguf_reader).
# Installs cargo-fuzz when missing; uses a nightly toolchain when one is
# installed, else stable with RUSTC_BOOTSTRAP=1.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= ncnn_readers ncnn_forward savefile onnx_reader gguf_reader
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do mkdir -p fuzz/corpus/$$t; done
	cd fuzz && if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then TC=+nightly; else TC=; export RUSTC_BOOTSTRAP=1; fi; \
	  for t in $(FUZZ_TARGETS); do \
	    seeds=seeds; [ -d seeds/$$t ] && seeds=seeds/$$t; \
	    echo "== fuzz $$t"; \
	    cargo $$TC fuzz run $$t corpus/$$t $$seeds -- \
	      -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -max_len=65536 -timeout=20 -print_final_stats=1 || exit 1; \
	  done

clean:
	rm -rf $(CARGO_TARGET) target ggmlR_*.tar.gz ggmlR.Rcheck src/*.o src/*.so
