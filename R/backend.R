#' Engine version
#'
#' @return The version of the ggmlR engine, a string.
#' @export
#' @examples
#' ggml_version()
ggml_version <- function() .rs(rs_version())

#' Number of backend devices
#'
#' Counts the CPU device plus every Vulkan device the loader reports.
#'
#' @return An integer, at least 1.
#' @export
#' @examples
#' ggml_backend_dev_count()
ggml_backend_dev_count <- function() .rs(rs_backend_dev_count())

#' The CPU backend
#'
#' Creates a compute backend that runs graphs on the CPU.
#'
#' @return A `ggml_backend` object.
#' @seealso [ggml_backend_name()], [ggml_backend_free()]
#' @export
#' @examples
#' b <- ggml_backend_cpu_init()
#' b
#' ggml_backend_free(b)
ggml_backend_cpu_init <- function() {
  .ggmlR_limit_backend_threads(.new_backend(.rs(rs_backend_cpu_init())))
}

.new_backend <- function(ptr) {
  class(ptr) <- "ggml_backend"
  ptr
}

.check_backend <- function(backend, call = sys.call(-1L)) {
  if (!inherits(backend, "ggml_backend")) {
    .abort(sprintf(
      "`backend` must be a ggml_backend object (from ggml_backend_cpu_init() or ggml_vulkan_init()), not %s.",
      class(backend)[1L]
    ), call = call)
  }
  invisible(backend)
}

#' Name of a backend
#'
#' @param backend A `ggml_backend` object.
#' @return The backend's name, a string such as `"CPU"`.
#' @export
#' @examples
#' b <- ggml_backend_cpu_init()
#' ggml_backend_name(b)
ggml_backend_name <- function(backend) {
  .check_backend(backend)
  .rs(rs_backend_name(backend))
}

#' Free a backend
#'
#' Releases the backend. Using it afterwards is an error; freeing it twice is
#' harmless.
#'
#' @inheritParams ggml_backend_name
#' @return `NULL`, invisibly.
#' @export
#' @examples
#' b <- ggml_backend_cpu_init()
#' ggml_backend_free(b)
ggml_backend_free <- function(backend) {
  .check_backend(backend)
  invisible(.rs(rs_backend_free(backend)))
}

#' @export
print.ggml_backend <- function(x, ...) {
  if (isTRUE(.rs(rs_backend_is_freed(x)))) {
    cat("<ggml_backend> (freed)\n")
  } else {
    cat(sprintf("<ggml_backend> %s\n", .rs(rs_backend_name(x))))
  }
  invisible(x)
}

#' Threads of the CPU backend
#'
#' Sets how many threads the CPU backend's kernels use (the default is the
#' number of cores; two under `R CMD check --as-cran`, which sets
#' `_R_CHECK_LIMIT_CORES_`, as CRAN asks).
#'
#' @inheritParams ggml_backend_name
#' @param n_threads A positive whole number.
#' @return `NULL`, invisibly.
#' @export
#' @examples
#' b <- ggml_backend_cpu_init()
#' ggml_backend_cpu_set_n_threads(b, 1)
#' ggml_backend_free(b)
ggml_backend_cpu_set_n_threads <- function(backend, n_threads) {
  .check_backend(backend)
  invisible(.rs(rs_backend_cpu_set_n_threads(backend, n_threads)))
}
