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
