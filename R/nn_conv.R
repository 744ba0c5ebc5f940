# Convolution and max pooling of Keras-style layers.

.nn_conv <- function(x, w, st) {
  .abort(sprintf("layer \"%s\" (%s): convolutions are not available in this build yet", st$label, st$type),
         call = NULL)
}

.nn_max_pool <- function(x, st) {
  .abort(sprintf("layer \"%s\" (max_pooling_2d): pooling is not available in this build yet", st$label),
         call = NULL)
}
