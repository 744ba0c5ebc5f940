/* Registers the routines of the Rust library with R. */
#include <R_ext/Rdynload.h>

void R_init_ggmlR_extendr(DllInfo *dll);

void R_init_ggmlR(DllInfo *dll) {
    R_init_ggmlR_extendr(dll);
}
