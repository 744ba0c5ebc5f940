# Tensor questions and small tools: layout predicates, strides, flags,
# duplicates and views, copies, walking a context's tensors.

.layout <- function(tensor, call = sys.call(-1L)) .rs(rs_tensor_layout(tensor), call = call)

#' Layout questions
#'
#' ggml's questions about how a tensor's elements lie in memory.
#' `ggml_is_contiguous_0()` (= [ggml_is_contiguous()]) means no gaps at all;
#' `_1` and `_2` allow gaps after dimensions 1 and 2;
#' `ggml_is_contiguous_rows()` means each row (dimension 0) is dense;
#' `ggml_is_contiguous_channels()` means dimension 2 is the densest, then 0,
#' then 1; `ggml_is_contiguously_allocated()` means the elements fill the
#' bytes they span. `ggml_is_transposed()`: the first stride exceeds the
#' second; `ggml_is_permuted()`: some stride exceeds the next.
#' `ggml_nrows()` is the number of rows (ne1 * ne2 * ne3),
#' `ggml_element_size()` the bytes of one element, `ggml_tensor_nb()` the
#' byte strides of the five dimensions ggml counts (the fifth spans the
#' tensor).
#'
#' @param tensor A `ggml_tensor`.
#' @return A logical; `ggml_nrows()`, `ggml_element_size()`: a number;
#'   `ggml_tensor_nb()`: five numbers.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 8)
#' t <- ggml_transpose(ctx, a)
#' ggml_is_contiguous_0(a)
#' ggml_is_contiguous_0(t)
#' ggml_is_transposed(t)
#' ggml_is_permuted(t)
#' c(ggml_is_contiguous_1(t), ggml_is_contiguous_2(t), ggml_is_contiguous_rows(t),
#'   ggml_is_contiguous_channels(t), ggml_is_contiguously_allocated(t))
#' ggml_nrows(a)
#' ggml_element_size(a)
#' ggml_tensor_nb(a)
#' ggml_free(ctx)
ggml_is_contiguous_0 <- function(tensor) .layout(tensor)$contiguous_0

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_contiguous_1 <- function(tensor) .layout(tensor)$contiguous_1

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_contiguous_2 <- function(tensor) .layout(tensor)$contiguous_2

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_contiguous_rows <- function(tensor) .layout(tensor)$contiguous_rows

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_contiguous_channels <- function(tensor) .layout(tensor)$contiguous_channels

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_contiguously_allocated <- function(tensor) .layout(tensor)$contiguously_allocated

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_transposed <- function(tensor) .layout(tensor)$transposed

#' @rdname ggml_is_contiguous_0
#' @export
ggml_is_permuted <- function(tensor) .layout(tensor)$permuted

#' @rdname ggml_is_contiguous_0
#' @export
ggml_nrows <- function(tensor) .layout(tensor)$nrows

#' @rdname ggml_is_contiguous_0
#' @export
ggml_element_size <- function(tensor) .layout(tensor)$element_size

#' @rdname ggml_is_contiguous_0
#' @export
ggml_tensor_nb <- function(tensor) .layout(tensor)$nb

#' Comparing tensors
#'
#' `ggml_are_same_shape()`: the same sizes; `ggml_are_same_stride()`: the
#' same byte strides; `ggml_are_same_layout()`: the same type, sizes and
#' strides; `ggml_can_repeat(a, b)`: `b`'s sizes are whole multiples of
#' `a`'s, so `a` can be repeated (broadcast) to `b`.
#'
#' @param a,b `ggml_tensor`s.
#' @return A logical.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' v <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' m <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 8)
#' ggml_are_same_shape(v, m)
#' ggml_are_same_stride(m, m)
#' ggml_are_same_layout(v, m)
#' ggml_can_repeat(v, m)
#' ggml_free(ctx)
ggml_are_same_shape <- function(a, b) .rs(rs_tensor_compare(a, b))$same_shape

#' @rdname ggml_are_same_shape
#' @export
ggml_are_same_stride <- function(a, b) .rs(rs_tensor_compare(a, b))$same_stride

#' @rdname ggml_are_same_shape
#' @export
ggml_are_same_layout <- function(a, b) .rs(rs_tensor_compare(a, b))$same_layout

#' @rdname ggml_are_same_shape
#' @export
ggml_can_repeat <- function(a, b) .rs(rs_tensor_compare(a, b))$can_repeat

#' Duplicates, whole views and copies
#'
#' `ggml_dup_tensor()` is a new tensor of the same type and sizes (its values
#' are not copied; see [ggml_dup()] for a node that copies them).
#' `ggml_view_tensor()` is a view of all of a tensor. `ggml_tensor_copy()`
#' copies the values of `src` into `dst` (same number of elements; types are
#' converted), wherever their memory is. `ggml_set_zero()` and
#' `ggml_tensor_set_f32_scalar()` fill a tensor with zeros or one value.
#'
#' @param ctx A `ggml_context`.
#' @param tensor,dst,src `ggml_tensor`s with memory (except for
#'   `ggml_dup_tensor()` and `ggml_view_tensor()`).
#' @param value A number.
#' @return A `ggml_tensor`; `ggml_tensor_copy()`: `NULL`, invisibly; the
#'   fillers: the tensor, invisibly.
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_set_f32(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), 1:3)
#' b <- ggml_dup_tensor(ctx, a)
#' ggml_tensor_copy(b, a)
#' ggml_get_f32(b)
#' ggml_get_f32(ggml_view_tensor(ctx, a))
#' ggml_get_f32(ggml_set_zero(b))
#' ggml_get_f32(ggml_tensor_set_f32_scalar(b, 0.5))
#' ggml_free(ctx)
ggml_dup_tensor <- function(ctx, tensor) .new_tensor(.rs(rs_tensor_like(ctx, tensor, FALSE)))

#' @rdname ggml_dup_tensor
#' @export
ggml_view_tensor <- function(ctx, tensor) .new_tensor(.rs(rs_tensor_like(ctx, tensor, TRUE)))

#' @rdname ggml_dup_tensor
#' @export
ggml_tensor_copy <- function(dst, src) invisible(.rs(rs_tensor_copy(dst, src)))

#' @rdname ggml_dup_tensor
#' @export
ggml_tensor_set_f32_scalar <- function(tensor, value) {
  if (!is.numeric(value) || length(value) != 1L) .abort("`value` must be a single number.")
  ggml_set_f32(tensor, value)
}

#' A context's tensors
#'
#' `ggml_tensor_num()` counts the tensors of a context; `ggml_get_first_tensor()`
#' and `ggml_get_next_tensor()` walk them in the order they were created
#' (`NULL` after the last).
#'
#' @param ctx A `ggml_context`.
#' @param tensor One of its tensors.
#' @return An integer, or a `ggml_tensor` (or `NULL`).
#' @export
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), "first")
#' ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8), "second")
#' ggml_tensor_num(ctx)
#' t <- ggml_get_first_tensor(ctx)
#' ggml_get_name(ggml_get_next_tensor(ctx, t))
#' ggml_free(ctx)
ggml_tensor_num <- function(ctx) .rs(rs_ctx_info(ctx))$n_tensors

#' @rdname ggml_tensor_num
#' @export
ggml_get_first_tensor <- function(ctx) {
  t <- .rs(rs_ctx_next_tensor(ctx, NULL))
  if (is.null(t)) NULL else .new_tensor(t)
}

#' @rdname ggml_tensor_num
#' @export
ggml_get_next_tensor <- function(ctx, tensor) {
  if (!inherits(tensor, "ggml_tensor")) .abort("`tensor` must be a ggml_tensor.")
  t <- .rs(rs_ctx_next_tensor(ctx, tensor))
  if (is.null(t)) NULL else .new_tensor(t)
}
