"""
What every method of a comparison shares: the training clock, the evaluation of a model on the test
data, the progress bar, and the starting kernel and likelihood.

See :mod:`gpflow_fastvi.benchmarks.methods` for the methods and for what a learning curve's rows
hold. TensorFlow and GPflow are imported with this module.
"""

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf

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

    With ``compiled`` the tensor work is a ``tf.function``, traced once, for a trace that evaluates
    hundreds of times; a caller that scores a model once passes ``compiled=False`` rather than
    trace a function for each model it scores.
    """
    X = tf.constant(X_test)
    Y = tf.constant(Y_test)
    is_positive = np.asarray(Y_test).ravel() > 0.5

    def evaluate() -> Tuple[tf.Tensor, ...]:
        mean, _ = model.predict_y(X)  # p(y* = 1 | x*, data)                        [T, 1]
        log_density = model.predict_log_density((X, Y))  # log p(y* | x*, data)  [T]
        return (mean, log_density) if elbo is None else (mean, log_density, elbo())

    if compiled:  # plain TensorFlow inside: nothing for AutoGraph to convert
        evaluate = tf.function(evaluate, autograph=False)

    def metrics() -> Row:
        mean, log_density, *elbo_value = evaluate()
        predicted_positive = mean.numpy().ravel() > 0.5
        row: Row = {
            "test_accuracy": float(np.mean(predicted_positive == is_positive)),
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


def make_likelihood() -> gpflow.likelihoods.Likelihood:
    """The logit link, ``Bernoulli(invlink=tf.sigmoid)``: the same for every method."""
    return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)


__all__ = [
    "TrainingClock",
    "advance_progress",
    "make_kernel",
    "make_likelihood",
    "metrics_function",
    "progress_bar",
]
