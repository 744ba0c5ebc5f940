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
        r-cran-rlang mesa-vulkan-drivers libvulkan1
SPEC_DIR ?= ../shared/spec
# Set RLIB=/some/dir to install into (and test from) a private R library.
RLIB ?=
ifneq ($(RLIB),)
export R_LIBS := $(RLIB):$(R_LIBS)
INSTALL_LIB := -l $(RLIB)
endif

.PHONY: setup deps install lockfile test test-rust test-r layers demo check bench docs fuzz clean

## Everything both main commands need: Debian packages, then the package.
setup: deps install

deps:
	@missing=""; for p in $(DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "Debian packages: all present"; fi
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }

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

# The check runs outside the repository: inside it, cargo would take the
# tarball's crate for a member of this workspace.
CHECK_DIR ?= /tmp/ggmlR-check
check: deps lockfile
	rm -rf $(CHECK_DIR) && mkdir -p $(CHECK_DIR)
	cd $(CHECK_DIR) && $(R) CMD build $(CURDIR)
	cd $(CHECK_DIR) && _R_CHECK_FORCE_SUGGESTS_=false $(R) CMD check --no-manual ggmlR_*.tar.gz

bench: setup
	@for f in inst/bench/*.R; do echo "== $$f"; $(RSCRIPT) $$f || exit 1; done

docs: install
	$(RSCRIPT) tools/make-wrappers.R R/extendr-wrappers.R
	$(RSCRIPT) -e 'roxygen2::roxygenise(load_code = roxygen2::load_installed)'
	$(R) CMD INSTALL --no-multiarch $(INSTALL_LIB) .

# Bounded fuzzing of the ncnn param and model readers (FUZZ_SECONDS each).
# Installs cargo-fuzz when missing; uses a nightly toolchain when one is
# installed, else stable with RUSTC_BOOTSTRAP=1.
FUZZ_SECONDS ?= 60
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	@mkdir -p fuzz/corpus/ncnn_readers
	cd fuzz && if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then TC=+nightly; else TC=; export RUSTC_BOOTSTRAP=1; fi; \
	  cargo $$TC fuzz run ncnn_readers corpus/ncnn_readers seeds -- \
	    -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1

clean:
	rm -rf $(CARGO_TARGET) target ggmlR_*.tar.gz ggmlR.Rcheck src/*.o src/*.so
