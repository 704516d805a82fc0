"""
The checks of values inside the package's graphs (a factorisation that failed, sites that are not
finite), and the one switch that leaves them out of a loss traced for an optimiser's trial points.

A failed check raises ``tf.errors.InvalidArgumentError`` with a message that names the problem,
which is what a user needs when the model's own state fails. At a line search's trial point a
failure is not an error: the loss there is +inf and the search shortens its step. A check that
fails there still raises inside the graph, and TensorFlow's executor logs the failed op on the
standard error before the exception reaches the optimiser that would answer it, a log line in a
normal fit. So a loss traced under :func:`trial_points` carries no checks: a failing value is NaN
instead, which reaches the loss, and the optimiser's evaluation
(:class:`~gpflow_fastvi.training.plans.LBFGSStage`) reads a non-finite loss as +inf, running the
checked loss only where the point is its own start, to raise the named error there.
"""

import contextlib
import contextvars
from typing import Iterator

import numpy as np
import tensorflow as tf

_TRIAL_POINTS = contextvars.ContextVar("trial_points", default=False)


@contextlib.contextmanager
def trial_points() -> Iterator[None]:
    """Trace (or run) the package's graphs without their value checks (module docstring)."""
    token = _TRIAL_POINTS.set(True)
    try:
        yield
    finally:
        _TRIAL_POINTS.reset(token)


def checked_finite(x: tf.Tensor, message: str) -> tf.Tensor:
    """``x``, raising ``InvalidArgumentError`` with ``message`` where it is not finite (as it
    is under :func:`trial_points`, unchecked)."""
    if _TRIAL_POINTS.get():
        return x
    return tf.debugging.assert_all_finite(x, message)


def checked_positive(x: tf.Tensor, message: str) -> tf.Tensor:
    """``x``, raising ``InvalidArgumentError`` with ``message`` where it is not > 0; under
    :func:`trial_points` NaN there instead, which reaches the loss."""
    if _TRIAL_POINTS.get():
        return tf.where(x > 0.0, x, tf.constant(np.nan, dtype=x.dtype))
    with tf.control_dependencies([tf.debugging.assert_positive(x, message)]):
        return tf.identity(x)
