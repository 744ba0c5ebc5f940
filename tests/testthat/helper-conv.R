# References of the convolution tests: loops over the definitions.

# Reference 2-D convolution (cross-correlation, as ggml) of x [W, H, C, N]
# with kernel k [KW, KH, C, OC]; returns [OW, OH, OC, N].
conv2d_ref <- function(x, k, s = c(1, 1), p = c(0, 0), d = c(1, 1)) {
  dx <- dim(x); dk <- dim(k)
  ow <- (dx[1] + 2 * p[1] - d[1] * (dk[1] - 1) - 1) %/% s[1] + 1
  oh <- (dx[2] + 2 * p[2] - d[2] * (dk[2] - 1) - 1) %/% s[2] + 1
  out <- array(0, c(ow, oh, dk[4], dx[4]))
  for (n in seq_len(dx[4])) for (o in seq_len(dk[4])) for (y in seq_len(oh)) for (xx in seq_len(ow)) {
    acc <- 0
    for (c in seq_len(dx[3])) for (ky in seq_len(dk[2])) for (kx in seq_len(dk[1])) {
      ix <- (xx - 1) * s[1] + (kx - 1) * d[1] - p[1] + 1
      iy <- (y - 1) * s[2] + (ky - 1) * d[2] - p[2] + 1
      if (ix >= 1 && ix <= dx[1] && iy >= 1 && iy <= dx[2]) acc <- acc + k[kx, ky, c, o] * x[ix, iy, c, n]
    }
    out[xx, y, o, n] <- acc
  }
  out
}

pool_ref <- function(x, op, k, s, p) {
  dx <- dim(x)
  ow <- (dx[1] + 2 * p[1] - k[1]) %/% s[1] + 1
  oh <- (dx[2] + 2 * p[2] - k[2]) %/% s[2] + 1
  out <- array(0, c(ow, oh, dx[3], dx[4]))
  for (n in seq_len(dx[4])) for (c in seq_len(dx[3])) for (y in seq_len(oh)) for (xx in seq_len(ow)) {
    ix <- (xx - 1) * s[1] - p[1] + seq_len(k[1])
    iy <- (y - 1) * s[2] - p[2] + seq_len(k[2])
    ix <- ix[ix >= 1 & ix <= dx[1]]
    iy <- iy[iy >= 1 & iy <= dx[2]]
    v <- x[ix, iy, c, n]
    out[xx, y, c, n] <- if (op == GGML_OP_POOL_MAX) max(v) else sum(v) / prod(k)
  }
  out
}
