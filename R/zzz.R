.onLoad <- function(libname, pkgname) {
  .ag_residency_on_load(.ag_device_state)
}
