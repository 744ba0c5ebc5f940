# Vulkan tests run wherever a device exists. With GGMLR_REQUIRE_VULKAN=1 (set
# by `make test`), a missing device is a failure, not a skip, so CI on
# lavapipe cannot silently stop testing the Vulkan path.
skip_if_no_vulkan <- function() {
  if (ggml_vulkan_available()) return(invisible(TRUE))
  if (nzchar(Sys.getenv("GGMLR_REQUIRE_VULKAN"))) {
    fail(paste(
      "GGMLR_REQUIRE_VULKAN is set but no Vulkan device was found:",
      .rs(rs_vulkan_status())
    ))
  }
  skip(paste("no Vulkan device:", .rs(rs_vulkan_status())))
}

# The best-backend choice (ggml_backend_init_best(), ag_device("gpu")) takes a
# CPU-type Vulkan device such as lavapipe only when GGMLR_VULKAN_CPU_DEVICE is
# set: the suite sets it, so that the device "gpu" paths run on Vulkan in CI as
# on a GPU. The tests of the choice itself unset it locally.
if (!nzchar(Sys.getenv("GGMLR_VULKAN_CPU_DEVICE"))) Sys.setenv(GGMLR_VULKAN_CPU_DEVICE = "1")

# Runs `code` with GGMLR_VULKAN_CPU_DEVICE set to `value` ("" unsets it).
with_vulkan_cpu_device <- function(value, code) {
  old <- Sys.getenv("GGMLR_VULKAN_CPU_DEVICE", unset = NA)
  on.exit(if (is.na(old)) Sys.unsetenv("GGMLR_VULKAN_CPU_DEVICE") else Sys.setenv(GGMLR_VULKAN_CPU_DEVICE = old))
  if (nzchar(value)) Sys.setenv(GGMLR_VULKAN_CPU_DEVICE = value) else Sys.unsetenv("GGMLR_VULKAN_CPU_DEVICE")
  force(code)
}
