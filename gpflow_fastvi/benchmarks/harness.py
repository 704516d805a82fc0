"""
What every method of a comparison shares: the training clock, the evaluation of a model on the test
data, the progress bar, and the starting kernel and likelihood.

See :mod:`gpflow_fastvi.benchmarks.methods` for the methods and for what a learning curve's rows
hold. TensorFlow and GPflow are imported with this module.
"""

import functools
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from .choices import PG_NAME, SCIPY_NAME
from .result import Row


class TrainingClock:
    """Wall-clock seconds since creation, less the time spent inside :meth:`paused` blocks."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._paused = 0.0

    def elapsed(self) -> float:
        """Seconds since creation, paused time excluded."""
        return time.perf_counter() - self._start - self._paused

    @contextmanager
    def paused(self) -> Iterator[None]:
        """A block whose seconds the clock leaves out (evaluations, progress output)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - began


def _evaluate(
    model: gpflow.models.GPModel,
    elbo: Optional[Callable[[], tf.Tensor]],
    X: tf.Tensor,
    Y: tf.Tensor,
    multiclass: bool,
) -> Tuple[tf.Tensor, ...]:
    """The tensors of :func:`metrics_function`'s row: predictive mean, log density of the true
    class, and the ELBO if asked for."""
    mean, _ = model.predict_y(X)  # p(y* = 1 | x*, data) [T, 1], or p(y* = c | ...) [T, C]
    if multiclass:
        own = tf.gather(mean, tf.cast(Y[:, 0], tf.int32), axis=1, batch_dims=1)  # [T]
        log_density = tf.math.log(own)
    else:
        log_density = model.predict_log_density((X, Y))  # log p(y* | x*, data)  [T]
    return (mean, log_density) if elbo is None else (mean, log_density, elbo())


def metrics_function(
    model: gpflow.models.GPModel,
    elbo: Optional[Callable[[], tf.Tensor]],
    X_test: np.ndarray,
    Y_test: np.ndarray,
    *,
    compiled: bool = True,
) -> Callable[[], Row]:
    """
    A function returning the model's current test accuracy, mean test NLL and (unless ``elbo`` is
    ``None``) ELBO.

    For a binary model the NLL is ``-predict_log_density`` and a point is called positive where
    ``predict_y``'s mean exceeds 1/2. For a model of C > 2 latent functions ``predict_y``'s mean
    holds the C class probabilities [T, C]: the predicted class is the most probable one and the
    NLL is −log of the true class's probability, the same quantity for every C-class likelihood
    (GPflow's ``Softmax`` estimates its predictive probabilities from fresh Monte Carlo draws at
    every call, so its rows carry that noise).

    With ``compiled`` the tensor work is a ``tf.function``, traced once, for a trace that evaluates
    hundreds of times; a caller that scores a model once passes ``compiled=False`` rather than
    trace a function for each model it scores.
    """
    labels = np.asarray(Y_test).ravel()
    multiclass = model.num_latent_gps > 1
    # A partial, not a closure: TensorFlow counts traces per code object, so the closures of
    # every method's scorer (each traced once) would add up to a false retracing warning.
    evaluate = functools.partial(
        _evaluate, model, elbo, tf.constant(X_test), tf.constant(Y_test), multiclass
    )
    if compiled:  # plain TensorFlow inside: nothing for AutoGraph to convert
        evaluate = tf.function(evaluate, autograph=False)

    def metrics() -> Row:
        mean, log_density, *elbo_value = evaluate()
        if multiclass:
            predicted = np.argmax(mean.numpy(), axis=1)
        else:
            predicted = mean.numpy().ravel() > 0.5
        row: Row = {
            "test_accuracy": float(np.mean(predicted == labels)),
            "test_nll": float(-np.mean(log_density.numpy())),
        }
        if elbo_value:
            row["elbo"] = float(elbo_value[0].numpy())
        return row

    return metrics


def progress_bar(enabled: bool, method: str, time_budget: float) -> Any:
    """A tqdm bar counting ``method``'s training seconds up to ``time_budget``; None if not
    ``enabled``."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=round(time_budget, 1), desc=method, unit="s", leave=True)


def advance_progress(bar: Any, seconds: float) -> None:
    """Move ``bar`` (from :func:`progress_bar`, or None) on to ``seconds`` of training."""
    if bar is not None:
        bar.update(round(max(0.0, min(seconds, bar.total) - bar.n), 1))


# --------------------------------------------------------------------------------------------------
# Shared set-up
# --------------------------------------------------------------------------------------------------


def make_kernel(D: int) -> gpflow.kernels.Kernel:
    """SE kernel, ARD lengthscales all √D, variance 1.0: the same start for every method."""
    return gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=np.full(D, np.sqrt(D)))


def make_likelihood(num_classes: int = 2, method: str = "") -> gpflow.likelihoods.Likelihood:
    """
    The likelihood ``method`` is trained with on ``num_classes`` classes: for two classes the logit
    link, ``Bernoulli(invlink=tf.sigmoid)``, the same for every method. For C > 2 classes each
    method takes the C-class likelihood it is made for: PolyaGammaSVGP the logistic-softmax it
    augments (:class:`~gpflow_fastvi.likelihoods.LogisticSoftmax`); SVGP + Scipy GPflow's
    ``MultiClass`` (RobustMax), whose quadrature gives L-BFGS-B the deterministic loss it needs, as
    GPflow's multi-class notebook trains it; every other method GPflow's ``Softmax``.
    """
    if num_classes == 2:
        return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    if method == PG_NAME:
        from ..likelihoods import LogisticSoftmax

        return LogisticSoftmax(num_classes)
    if method == SCIPY_NAME:
        return gpflow.likelihoods.MultiClass(num_classes)
    return gpflow.likelihoods.Softmax(num_classes)


def likelihood_name(num_classes: int, method: str) -> str:
    """How :func:`make_likelihood`'s choice is written in a comparison's settings."""
    if num_classes == 2:
        return "Bernoulli(invlink=tf.sigmoid)"
    return f"{type(make_likelihood(num_classes, method)).__name__}({num_classes})"


def labels_for(likelihood: gpflow.likelihoods.Likelihood, Y: np.ndarray) -> np.ndarray:
    """``Y`` as ``likelihood`` takes it: integer classes for GPflow's ``Softmax``, which refuses
    float labels; the float64 labels themselves for every other likelihood."""
    if isinstance(likelihood, gpflow.likelihoods.Softmax):
        return Y.astype(np.int64)
    return Y


__all__ = [
    "TrainingClock",
    "advance_progress",
    "make_kernel",
    "labels_for",
    "likelihood_name",
    "make_likelihood",
    "metrics_function",
    "progress_bar",
]
