//! Compute kernels shared by several layers: the convolution GEMM and its
//! packed weights, Winograd F(4,3), the depthwise kernel, pooling rows and
//! the convolution parameters and padding helpers.

pub mod conv;
pub mod conv_int8;
pub mod deconv;
pub mod depthwise;
pub mod depthwise_pack;
pub mod detect;
pub mod gemm;
pub mod gemv;
pub mod math;
pub mod matmul;
pub mod pool_rows;
pub mod quant;
pub mod roi;
pub mod transpose;
pub mod volume;
pub mod window;
pub mod winograd;
