# The 3-d layers (Convolution3D, ConvolutionDepthWise3D, Deconvolution3D,
# DeconvolutionDepthWise3D, Pooling3D) refuse bad parameters and inputs with
# a clear error and leave the net usable. Their outputs are checked against
# the real ncnn by the layer fixtures (test-ncnn-fixtures.R).

vol_setup <- quote({
  f32 <- function(v) writeBin(as.numeric(v), raw(), size = 4L, endian = "little")
  # A net of one layer on a 4-d input, its weights `n` ones (tagged fp32).
  vol_net <- function(layer, n = 0) {
    net <- ncnn_net(num_threads = 1)
    net$load_param_mem(paste0("7767517\n2 2\nInput data 0 1 data\n", layer, "\n"))
    net$load_model(if (n > 0) c(as.raw(c(0, 0, 0, 0)), f32(rep(1, n))) else ncnn_datareader_empty())
    net
  }
  vol_run <- function(layer, n = 0, input = array(1, c(4, 4, 4, 2))) {
    ex <- vol_net(layer, n)$create_extractor()
    ex$input("data", input)
    ex$extract("out")
  }
})

test_that("hostile 3-d layer parameters are clear errors", {
  expect_hostile_errors(setup = vol_setup, list(
    conv_wds = hcase(vol_net("Convolution3D c 1 1 data out 0=2 1=3 6=53"), "Convolution3D.*weight_data_size 53"),
    conv_kernel0 = hcase(vol_net("Convolution3D c 1 1 data out 0=2 1=0 6=8"), "Convolution3D: kernel_w must be 1 to 65536"),
    conv_kernel_huge = hcase(vol_net("Convolution3D c 1 1 data out 0=1 1=3 21=2147483647 6=9"), "Convolution3D: kernel_d must be"),
    conv_stride_neg = hcase(vol_net("Convolution3D c 1 1 data out 0=1 1=1 23=-2 6=1"), "stride_d must be 1 to 65536, got -2"),
    conv_dilation_huge = hcase(vol_run("Convolution3D c 1 1 data out 0=1 1=3 2=65536 6=54", 54), "smaller than the .* kernel extent"),
    conv_act = hcase(vol_net("Convolution3D c 1 1 data out 0=1 1=1 6=2 9=9"), "activation_type 9"),
    conv_3d_input = hcase(vol_run("Convolution3D c 1 1 data out 0=1 1=1 6=2", 2, array(1, c(4, 4, 2))), "Convolution3D expects a 4-d blob .* with 2 channels"),
    conv_channels = hcase(vol_run("Convolution3D c 1 1 data out 0=1 1=1 6=3", 3), "with 3 channels, got \\[4, 4, 4, 2\\]"),
    conv_small = hcase(vol_run("Convolution3D c 1 1 data out 0=1 1=5 6=250", 250), "smaller than the 5x5x5 kernel"),
    conv_pad_huge = hcase(vol_run(sprintf("Convolution3D c 1 1 data out 0=1 1=1 6=2 4=%d", 60000), 2), "Convolution3D.*too large|Convolution3D.*cannot allocate"),
    dw_group = hcase(vol_net("ConvolutionDepthWise3D c 1 1 data out 0=3 1=1 6=6 7=2"), "num_output 3 is not divisible by group 2"),
    dw_group0 = hcase(vol_net("ConvolutionDepthWise3D c 1 1 data out 0=2 1=1 6=2 7=0"), "ConvolutionDepthWise3D: group must be"),
    deconv_outsize = hcase(vol_run("Deconvolution3D d 1 1 data out 0=1 1=2 6=16 25=3", 16), "need SAME padding"),
    deconv_outsize_big = hcase(vol_run("Deconvolution3D d 1 1 data out 0=1 1=2 6=16 4=-233 25=30", 16), "larger than the"),
    deconv_stride_huge = hcase(vol_run("Deconvolution3D d 1 1 data out 0=1 1=2 3=65536 13=65536 23=65536 6=16", 16), "empty or too large"),
    deconv_cut_all = hcase(vol_run("Deconvolution3D d 1 1 data out 0=1 1=2 6=16 24=3", 16), "cuts away the whole"),
    deconv_outpad = hcase(vol_net("Deconvolution3D d 1 1 data out 0=1 1=2 6=16 20=-1"), "output padding must be 0 to 65536, got -1"),
    deconv_weights_short = hcase({
      net <- ncnn_net(num_threads = 1)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nDeconvolution3D d 1 1 data out 0=1 1=2 6=16\n")
      net$load_model(c(as.raw(c(0, 0, 0, 0)), f32(rep(1, 5))))
    }, "weights end early"),
    deconvdw_group = hcase(vol_net("DeconvolutionDepthWise3D d 1 1 data out 0=4 1=1 6=4 7=3"), "DeconvolutionDepthWise3D.*divisible by group 3"),
    pool_type = hcase(vol_net("Pooling3D p 1 1 data out 0=2 1=2"), "pooling_type 2 is not 0"),
    pool_mode = hcase(vol_net("Pooling3D p 1 1 data out 0=0 1=2 5=7"), "pad_mode 7"),
    pool_pad_neg = hcase(vol_net("Pooling3D p 1 1 data out 0=0 1=2 3=-233"), "pads must not be negative"),
    pool_kernel0 = hcase(vol_net("Pooling3D p 1 1 data out 0=0 1=0"), "Pooling3D: kernel_w must be"),
    pool_adaptive0 = hcase(vol_net("Pooling3D p 1 1 data out 0=0 7=1 8=0"), "adaptive output size"),
    pool_adaptive_huge = hcase(vol_run("Pooling3D p 1 1 data out 0=0 7=1 8=60000"), "empty or too large"),
    pool_small = hcase(vol_run("Pooling3D p 1 1 data out 0=0 1=9 5=1"), "smaller than the 9x9x9 kernel"),
    pool_2d_input = hcase(vol_run("Pooling3D p 1 1 data out 0=1 4=1", input = array(1, c(4, 4))), "Pooling3D expects a non-empty 4-d blob"),
    pool_pad_huge = hcase(vol_run("Pooling3D p 1 1 data out 0=0 1=2 3=60000 13=60000 23=60000"), "Pooling3D")
  ))
})

test_that("a 3-d layer that refused an input works on the next one", {
  eval(vol_setup)
  net <- vol_net("Convolution3D c 1 1 data out 0=1 1=2 6=16", 16)
  ex <- net$create_extractor()
  ex$input("data", array(1, c(4, 4, 2)))
  expect_error(ex$extract("out"), "4-d blob", class = "ggmlR_error")
  x <- array(seq_len(4 * 3 * 2 * 2) / 10, c(4, 3, 2, 2))
  ex <- net$create_extractor()
  ex$input("data", x)
  y <- ex$extract("out")
  expect_equal(dim(y), c(3, 2, 1, 1))
  # all-ones 2x2x2 kernel over both channels: window sums, from base R
  want <- array(0, c(3, 2, 1))
  for (i in 1:3) for (j in 1:2) want[i, j, 1] <- sum(x[i:(i + 1), j:(j + 1), 1:2, ])
  expect_equal(as.vector(y), as.vector(want), tolerance = 1e-6)
})
