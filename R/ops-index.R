#' Ops that place values by index
#'
#' `ggml_roll()`: circular shift by `shift0..shift3` along each dimension
#' (`out[i] = a[i - shift]`). `ggml_pad_reflect_1d()`: `p0` and `p1` mirrored
#' values before and after each row, the edge not repeated (`[1 2 3 4]` with
#' 2 and 2 gives `[3 2 1 2 3 4 3 2]`). `ggml_win_part()`: the `w x w` windows
#' (zero-padded) of `a` `[C, W, H, 1]`, `[C, w, w, windows]` with windows
#' row-major; `ggml_win_unpart()` rebuilds the `w0 x h0` map. `ggml_get_rel_pos()`:
#' the relative-position rows of `a` `[C, 2 qh - 1]` for a `qh x kh` window
#' (`qh == kh`), `[C, kh, qh]`; `ggml_add_rel_pos()` adds such tables to
#' attention scores `a` `[K*K, Q1*Q2, B]` (`pw`, `ph` `[K, Q1, Q2, B]`: entry
#' `(kh, kw)` of each row gets `ph[kh] + pw[kw]`). `ggml_diag()`: a vector
#' `[n]` as the diagonal of an `[n, n]` matrix. `ggml_diag_mask_zero()`:
#' entries with column index above `n_past + row index` set to 0.
#' `ggml_get_rows_back(a, b, c)`: the gradient of [ggml_get_rows()] (`a` the
#' gradient of its result, `b` the row indices, `c` a tensor of the source's
#' shape): rows of `a` added into the rows they came from.
#' `ggml_repeat_back(a, b)`: `a` summed over its repetitions of `b`'s shape.
#' `ggml_set()`: a copy of `a` (with `_inplace`, `a` itself) with `b`
#' written into the view of it at byte `offset` with byte strides `nb1..nb3`
#' (counted over `a`'s elements in ggml order); `ggml_set_1d()` and
#' `ggml_set_2d()` take the remaining strides from `a`'s shape. `ggml_arange()`:
#' `start, start + step, ...` below `stop` (f32). `ggml_timestep_embedding()`:
#' for timesteps `t` `[N]`, `[dim, N]` holding `cos(t f_j)` then `sin(t f_j)`
#' with `f_j = max_period^(-j / (dim / 2))` (an odd `dim` gets a zero column).
#' `ggml_mul_mat_id(as, b, ids)`: the products of mixtures of experts: for
#' experts `as` `[K, M, E]`, inputs `b` `[K, n1, T]` and i32 expert ids `[n,
#' T]`, column `(i, t)` of the `[M, n, T]` result is expert `ids[i, t]`'s
#' matrix (as in [ggml_mul_mat()]) times `b[, i %% n1, t]`.
#'
#' @param a,b `ggml_tensor`s.
#' @inheritParams ggml_add
#' @param shift0,shift1,shift2,shift3 Shifts.
#' @param p0,p1 Values padded before and after.
#' @param w Window size.
#' @param w0,h0 Width and height of the map.
#' @param qh,kh Query and key window sizes.
#' @param pw,ph Relative-position tables.
#' @param n_past Leading columns left beyond the diagonal.
#' @param c The tensor whose shape the gradient takes.
#' @param nb1,nb2,nb3 Byte strides of the written view.
#' @param offset Byte offset of the written view.
#' @param start,stop,step The range.
#' @param timesteps A vector of timesteps.
#' @param dim,max_period Embedding size and longest period.
#' @param as Stacked expert matrices.
#' @param ids Expert ids (i32).
#' @return A `ggml_tensor`.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), 1:4)
#' r <- ggml_roll(ctx, a, 1, 0, 0, 0)
#' d <- ggml_diag(ctx, a)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, d))
#' ggml_get_f32(r)
#' matrix(ggml_get_f32(d), 4)
#' run <- function(r) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, r))
#'   ggml_get_f32(r)
#' }
#' run(ggml_pad_reflect_1d(ctx, a, 2, 2)) # 3 2 1 2 3 4 3 2
#' run(ggml_arange(ctx, 0, 1, 0.25))
#' t <- ggml_arange(ctx, 0, 3)
#' matrix(run(ggml_timestep_embedding(ctx, t, 4, 100)), 4)
#' # causal masks: entries above the diagonal set to 0
#' m <- function() ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 3), 1)
#' matrix(run(ggml_diag_mask_zero(ctx, m(), 0)), 3)
#' matrix(run(ggml_diag_mask_zero_inplace(ctx, m(), 1)), 3)
#' # writing a 2-vector into a copy of a 4 x 3 matrix (offsets in bytes)
#' big <- function() ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3), 0)
#' two <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), c(7, 8))
#' matrix(run(ggml_set_1d(ctx, big(), two, 4)), 4)
#' matrix(run(ggml_set_1d_inplace(ctx, big(), two, 8)), 4)
#' col <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 3), 1:3)
#' matrix(run(ggml_set_2d(ctx, big(), col, 16, 12)), 4) # the 4th value of each row
#' matrix(run(ggml_set_2d_inplace(ctx, big(), col, 16, 0)), 4)
#' matrix(run(ggml_set(ctx, big(), two, 16, 48, 48, 4)), 4)
#' matrix(run(ggml_set_inplace(ctx, big(), two, 16, 48, 48, 0)), 4)
#' # gradients of get_rows and repeat
#' rows <- ggml_set_i32(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2), c(2, 2))
#' g <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2), 1)
#' matrix(run(ggml_get_rows_back(ctx, g, rows, big())), 4) # row 2 gets both
#' run(ggml_repeat_back(ctx, g, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)))
#' # windows of a [C, W, H] map and back
#' img <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 1, 3, 3), 1:9)
#' w <- ggml_win_part(ctx, img, 2)
#' ggml_tensor_shape(w) # 1 channel, 2 x 2 windows, 4 of them
#' run(ggml_win_unpart(ctx, w, 3, 3, 2))
#' # relative positions for a 2 x 2 window, added to attention scores
#' tab <- ggml_set_f32(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3), 1:6)
#' rel <- ggml_get_rel_pos(ctx, tab, 2, 2)
#' ggml_tensor_shape(rel)
#' s <- function() ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 4, 1), 0)
#' pw <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 1), 1:8)
#' ph <- ggml_set_f32(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 1), 0)
#' matrix(run(ggml_add_rel_pos(ctx, s(), pw, ph)), 4)
#' matrix(run(ggml_add_rel_pos_inplace(ctx, s(), ph, pw)), 4)
#' # a mixture of two experts: token 1 goes to expert 1, token 2 to expert 0
#' experts <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 2, 2),
#'                         c(1, 0, 0, 1, 2, 0, 0, 2))
#' xs <- ggml_set_f32(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 1, 2), c(1, 2, 3, 4))
#' ids <- ggml_set_i32(ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 1, 2), c(1, 0))
#' run(ggml_mul_mat_id(ctx, experts, xs, ids)) # 2 4 3 4
#' ggml_free(ctx)
ggml_roll <- function(ctx, a, shift0 = 0L, shift1 = 0L, shift2 = 0L, shift3 = 0L) {
  .op(ctx, "roll", list(a), c(shift0, shift1, shift2, shift3))
}

#' @rdname ggml_roll
#' @export
ggml_pad_reflect_1d <- function(ctx, a, p0, p1) .op(ctx, "pad_reflect_1d", list(a), c(p0, p1))

#' @rdname ggml_roll
#' @export
ggml_win_part <- function(ctx, a, w) .op(ctx, "win_part", list(a), w)

#' @rdname ggml_roll
#' @export
ggml_win_unpart <- function(ctx, a, w0, h0, w) .op(ctx, "win_unpart", list(a), c(w0, h0, w))

#' @rdname ggml_roll
#' @export
ggml_get_rel_pos <- function(ctx, a, qh, kh) .op(ctx, "get_rel_pos", list(a), c(qh, kh))

#' @rdname ggml_roll
#' @export
ggml_add_rel_pos <- function(ctx, a, pw, ph) .op(ctx, "add_rel_pos", list(a, pw, ph))

#' @rdname ggml_roll
#' @export
ggml_add_rel_pos_inplace <- function(ctx, a, pw, ph) {
  .op(ctx, "add_rel_pos", list(a, pw, ph), inplace = TRUE)
}

#' @rdname ggml_roll
#' @export
ggml_diag <- function(ctx, a) .op(ctx, "diag", list(a))

#' @rdname ggml_roll
#' @export
ggml_diag_mask_zero <- function(ctx, a, n_past) .op(ctx, "diag_mask_zero", list(a), n_past)

#' @rdname ggml_roll
#' @export
ggml_diag_mask_zero_inplace <- function(ctx, a, n_past) {
  .op(ctx, "diag_mask_zero", list(a), n_past, inplace = TRUE)
}

#' @rdname ggml_roll
#' @export
ggml_get_rows_back <- function(ctx, a, b, c) .op(ctx, "get_rows_back", list(a, b, c))

#' @rdname ggml_roll
#' @export
ggml_repeat_back <- function(ctx, a, b) .op(ctx, "repeat_back", list(a, b))

#' @rdname ggml_roll
#' @export
ggml_set <- function(ctx, a, b, nb1, nb2, nb3, offset) .set(ctx, a, b, c(nb1, nb2, nb3), offset, FALSE)

#' @rdname ggml_roll
#' @export
ggml_set_inplace <- function(ctx, a, b, nb1, nb2, nb3, offset) .set(ctx, a, b, c(nb1, nb2, nb3), offset, TRUE)

#' @rdname ggml_roll
#' @export
ggml_set_1d <- function(ctx, a, b, offset) .set(ctx, a, b, .strides(a)[2:4], offset, FALSE)

#' @rdname ggml_roll
#' @export
ggml_set_1d_inplace <- function(ctx, a, b, offset) .set(ctx, a, b, .strides(a)[2:4], offset, TRUE)

#' @rdname ggml_roll
#' @export
ggml_set_2d <- function(ctx, a, b, nb1, offset) .set(ctx, a, b, c(nb1, .strides(a)[3:4]), offset, FALSE)

#' @rdname ggml_roll
#' @export
ggml_set_2d_inplace <- function(ctx, a, b, nb1, offset) .set(ctx, a, b, c(nb1, .strides(a)[3:4]), offset, TRUE)

# Byte strides of a contiguous tensor of `a`'s type and shape.
.strides <- function(a, call = sys.call(-1L)) {
  i <- .rs(rs_tensor_info(a), call = call)
  es <- ggml_type_size(i$type_code)
  es * cumprod(c(1, i$ne[1:3]))
}

.set <- function(ctx, a, b, nb, offset, inplace, call = sys.call(-1L)) {
  p <- c(nb, offset)
  if (!is.numeric(p) || length(p) != 4L || anyNA(p) || any(p < 0) || any(p != round(p))) {
    .abort("the byte strides and offset of ggml_set must be whole numbers >= 0.", call = call)
  }
  .new_tensor(.rs(rs_set(ctx, a, b, as.numeric(nb), as.numeric(offset), inplace), call = call))
}

#' @rdname ggml_roll
#' @export
ggml_arange <- function(ctx, start, stop, step = 1) {
  .op(ctx, "arange", list(), c(start, stop, step))
}

#' @rdname ggml_roll
#' @export
ggml_timestep_embedding <- function(ctx, timesteps, dim, max_period = 10000L) {
  .op(ctx, "timestep_embedding", list(timesteps), c(dim, max_period))
}

#' @rdname ggml_roll
#' @export
ggml_mul_mat_id <- function(ctx, as, b, ids) .op(ctx, "mul_mat_id", list(as, b, ids))
