# The generic verbs of modelling packages, for Keras-style models:
# compile(), fit() and evaluate() from the 'generics' package (re-exported),
# and stats::predict().

#' Generic verbs for Keras-style models
#'
#' `compile()`, `fit()`, `evaluate()` and `predict()` call [ggml_compile()],
#' [ggml_fit()], [ggml_evaluate()] and [ggml_predict()]. The generics
#' `compile()`, `fit()` and `evaluate()` are those of the 'generics' package,
#' re-exported so that they work after `library(ggmlR)` alone.
#'
#' @param object,x A `ggml_sequential_model` or `ggml_functional_model`.
#' @param ... Arguments of the `ggml_*()` function.
#' @return As the `ggml_*()` function.
#' @name ggml_model_generics
#' @aliases compile fit evaluate
#' @importFrom generics compile fit evaluate
#' @rawNamespace export(compile)
#' @rawNamespace export(evaluate)
#' @rawNamespace export(fit)
#' @examples
#' model <- ggml_model_sequential() |>
#'   ggml_layer_dense(2, activation = "softmax", input_shape = 3)
#' model <- compile(model, loss = "categorical_crossentropy", backend = "cpu")
#' x <- matrix(runif(30), 10, 3)
#' y <- cbind(x[, 1] > 0.5, x[, 1] <= 0.5) * 1
#' model <- fit(model, x, y, epochs = 2, verbose = 0)
#' evaluate(model, x, y)
#' predict(model, x)
NULL

#' @rdname ggml_model_generics
#' @method compile ggml_sequential_model
#' @export
compile.ggml_sequential_model <- function(object, ...) ggml_compile(object, ...)

#' @rdname ggml_model_generics
#' @method compile ggml_functional_model
#' @export
compile.ggml_functional_model <- function(object, ...) ggml_compile(object, ...)

#' @rdname ggml_model_generics
#' @method fit ggml_sequential_model
#' @export
fit.ggml_sequential_model <- function(object, ...) ggml_fit(object, ...)

#' @rdname ggml_model_generics
#' @method fit ggml_functional_model
#' @export
fit.ggml_functional_model <- function(object, ...) ggml_fit(object, ...)

#' @rdname ggml_model_generics
#' @method evaluate ggml_sequential_model
#' @export
evaluate.ggml_sequential_model <- function(x, ...) ggml_evaluate(x, ...)

#' @rdname ggml_model_generics
#' @method evaluate ggml_functional_model
#' @export
evaluate.ggml_functional_model <- function(x, ...) ggml_evaluate(x, ...)

#' @rdname ggml_model_generics
#' @param newdata Data to predict on (or give it as the second argument).
#' @method predict ggml_sequential_model
#' @export
predict.ggml_sequential_model <- function(object, newdata, ...) ggml_predict(object, newdata, ...)

#' @rdname ggml_model_generics
#' @method predict ggml_functional_model
#' @export
predict.ggml_functional_model <- function(object, newdata, ...) ggml_predict(object, newdata, ...)
