"""
Likelihoods: what the package knows about GPflow's own beyond their interface (the highest value a
log-density can take, which the Taylor sites of :mod:`gpflow_fastvi.sites.taylor` and
:func:`~gpflow_fastvi.fit`'s watch on divergence, :mod:`gpflow_fastvi.training.watch`, both
respect), and :class:`LogisticSoftmax`, a multi-class likelihood for GPflow's models.
"""

from typing import Any, Optional

import gpflow
import tensorflow as tf
from check_shapes import inherit_check_shapes
from gpflow.base import TensorType


def class_indices(Y: TensorType, num_classes: int, name: str) -> tf.Tensor:
    """
    Labels Y [..., 1] as integer classes [...] (int64), checked in the graph to be integers in
    {0, …, C − 1}, for a mini-batch that a ``tf.data`` pipeline delivers and NumPy never sees; the
    error names ``name``. ``tf.one_hot`` would turn a label out of range into a row of zeros.
    """
    Y = tf.convert_to_tensor(Y)
    if not Y.dtype.is_integer:
        tf.debugging.assert_equal(Y, tf.round(Y), message=f"{name}: labels must be integer classes")
    classes = tf.cast(Y[..., 0], tf.int64)
    tf.debugging.assert_greater_equal(
        classes, tf.constant(0, tf.int64), message=f"{name}: a label is below 0"
    )
    tf.debugging.assert_less(
        classes,
        tf.constant(num_classes, tf.int64),
        message=f"{name}: a label is not below the number of classes, {num_classes}",
    )
    return classes


def checked_class_labels(Y: TensorType, num_classes: int, name: str) -> tf.Tensor:
    """
    Y [..., 1] as it is, once :func:`class_indices` has checked it in the graph: the check of
    labels at a compiled call's entry, before the loops over batches and steps, whose site rules
    then read them with :func:`one_hot_of_checked_classes` (a check inside such a loop makes
    TensorFlow log that it skips optimising the loop).
    """
    Y = tf.convert_to_tensor(Y)
    classes = class_indices(Y, num_classes, name)
    with tf.control_dependencies([classes]):
        return tf.identity(Y)


def one_hot_of_checked_classes(Y: TensorType, num_classes: int, dtype: tf.DType) -> tf.Tensor:
    """Labels Y [..., 1] as one-hot rows [..., C], with no check: for labels checked where they
    entered (NumPy's :func:`~gpflow_fastvi.validation.class_labels` for arrays, the stream's
    checks for a dataset, :func:`checked_class_labels` for a compiled call's tensors)."""
    classes = tf.cast(tf.convert_to_tensor(Y)[..., 0], tf.int64)
    return tf.one_hot(classes, num_classes, dtype=dtype)


def one_hot_classes(Y: TensorType, num_classes: int, name: str, dtype: tf.DType) -> tf.Tensor:
    """Labels Y [..., 1] as one-hot rows [..., C] of ``dtype``, checked by :func:`class_indices`
    (whose error names ``name``): the one form every C-class computation of the package reads."""
    return tf.one_hot(class_indices(Y, num_classes, name), num_classes, dtype=dtype)


class LogisticSoftmax(gpflow.likelihoods.MonteCarloLikelihood):
    r"""
    The logistic-softmax likelihood of C classes (:cite:t:`galyfajou2020multiclass`),

        p(y = k | f) = σ(f_k) / Σ_c σ(f_c),

    with f = (f_1, …, f_C) the values of C latent functions at a point and σ the logistic
    function. It is a different likelihood from GPflow's :class:`~gpflow.likelihoods.Softmax`
    (exp in place of σ): each class's probability saturates, so one latent function far above
    the others does not take all the mass, and the model becomes conditionally conjugate once
    augmented with a Gamma, a Poisson and a Pólya-Gamma variable per point.

    As for GPflow's ``Softmax``, ``Y`` holds the class of each point, an integer in
    {0, …, C − 1} of shape [N, 1] (as integers or as floats holding integers); the log-density is
    exact, and the expectations over q(f) = N(Fmu, diag(Fvar)) that ``predict_y``,
    ``predict_log_density`` and SVGP's ELBO need are Monte Carlo estimates with
    ``num_monte_carlo_points`` draws per point (100 by default, as GPflow's). ``predict_y``
    returns the C class probabilities E_q[p(y = k | f)].

    :param num_classes: C, at least 2; the model's ``num_latent_gps``.
    """

    def __init__(self, num_classes: int, **kwargs: Any) -> None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes must be an integer ≥ 2, got {num_classes!r}")
        super().__init__(input_dim=None, latent_dim=num_classes, observation_dim=None, **kwargs)
        self.num_classes = num_classes

    def classes(self, Y: TensorType) -> tf.Tensor:
        """The labels Y [..., 1] as integer classes [...], checked in the graph
        (:func:`class_indices`)."""
        return class_indices(Y, self.num_classes, "LogisticSoftmax")

    @inherit_check_shapes
    def _log_prob(self, X: TensorType, F: TensorType, Y: TensorType) -> tf.Tensor:
        log_sigmoid = -tf.math.softplus(-F)  # log σ(f_c), finite for any f
        one_hot = one_hot_classes(Y, self.num_classes, "LogisticSoftmax", log_sigmoid.dtype)
        own = tf.reduce_sum(one_hot * log_sigmoid, axis=-1)  # broadcasts as GPflow's shapes do
        return own - tf.reduce_logsumexp(log_sigmoid, axis=-1)

    @inherit_check_shapes
    def _conditional_mean(self, X: TensorType, F: TensorType) -> tf.Tensor:
        sigmoid = tf.sigmoid(F)
        return sigmoid / tf.reduce_sum(sigmoid, axis=-1, keepdims=True)

    @inherit_check_shapes
    def _conditional_variance(self, X: TensorType, F: TensorType) -> tf.Tensor:
        p = self.conditional_mean(X, F)
        return p - tf.square(p)


MULTI_CLASS_LIKELIHOODS: tuple = (
    gpflow.likelihoods.Softmax,
    gpflow.likelihoods.MultiClass,
    LogisticSoftmax,
)
"""Likelihoods of one of C classes per point, each with ``num_classes`` and labels in {0, …, C − 1}."""

MULTI_CLASS_HINT = (
    "For C classes use VIConcave with gpflow.likelihoods.Softmax(C) or MultiClass(C), VITaylor "
    "with Softmax(C), or PolyaGammaSVGP with gpflow_fastvi.likelihoods.LogisticSoftmax(C), and "
    "num_latent_gps=C."
)
"""What the errors of the binary and scalar models say to use for a multi-class problem."""

DISCRETE_LIKELIHOODS: tuple = (
    gpflow.likelihoods.Bernoulli,
    gpflow.likelihoods.Poisson,
    gpflow.likelihoods.Ordinal,
    *MULTI_CLASS_LIKELIHOODS,
)
"""Likelihoods of a discrete variable: each log p(yᵢ | fᵢ) is a log-probability, so ≤ 0."""


def log_density_ceiling(likelihood: gpflow.likelihoods.Likelihood) -> Optional[float]:
    """
    An upper bound on log p(yᵢ | fᵢ) over every fᵢ and every point, and so on log p(y) per point:
    0 for a likelihood of a discrete variable (:data:`DISCRETE_LIKELIHOODS`); ``None`` where none
    is known (a density, such as the Gaussian's, can exceed 1).
    """
    return 0.0 if isinstance(likelihood, DISCRETE_LIKELIHOODS) else None


__all__ = [
    "DISCRETE_LIKELIHOODS",
    "checked_class_labels",
    "class_indices",
    "LogisticSoftmax",
    "MULTI_CLASS_LIKELIHOODS",
    "log_density_ceiling",
]
