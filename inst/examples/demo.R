# ggmlR demo: the backends this machine offers.
library(ggmlR)

cat("ggmlR engine", ggml_version(), "\n")
cat("backend devices:", ggml_backend_dev_count(), "\n")
cat("Vulkan:", ggml_vulkan_status(), "\n")

cpu <- ggml_backend_cpu_init()
print(cpu)
ggml_backend_free(cpu)
