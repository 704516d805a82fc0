"""Exceptions raised by :mod:`gpflow_fastvi`, each naming what went wrong and what to do instead."""

import re
from typing import Optional


class GPflowFastVIError(Exception):
    """Base class of every error raised on purpose by :mod:`gpflow_fastvi`."""


class IncompatibleLikelihoodError(GPflowFastVIError, ValueError):
    """The model's site rule cannot be derived for the likelihood it was given."""


class UnsupportedConfigurationError(GPflowFastVIError, ValueError):
    """An option of :class:`gpflow.models.SVGP` that the models cannot take (a multi-output kernel
    or inducing variable), refused when a model is built."""


class InvalidDataError(GPflowFastVIError, ValueError):
    """Training or test data with the wrong shape, non-finite values or labels the model cannot
    use; for a ``tf.data.Dataset``, also one that yields no batches, repeats without end where a
    pass must read all of it, or yields another number of rows than the model's ``num_data``."""


class InvalidCallbackError(GPflowFastVIError, TypeError):
    """A ``fit`` callback returned something other than ``None`` or a mapping of row entries."""


class CholeskyError(GPflowFastVIError, ArithmeticError):
    """A matrix could not be Cholesky-factorised, even after adding the largest jitter allowed."""


class DivergenceWarning(UserWarning):
    """``fit`` stopped a run that diverged (an objective no approximation of log p(y) can reach,
    or an SVGP ELBO that collapsed) and put the model back to the best iterate it passed through."""


class ApproximationWarning(UserWarning):
    """``fit`` stopped a model whose objective is an approximation of the ELBO (VITaylor) where
    that objective kept rising while the SVGP ELBO stayed below its best, and put the model back
    to the iterate of the highest ELBO: the approximation, not the optimiser, led away."""


class NotConvergedWarning(UserWarning):
    """``fit`` reached its default cap on iterations before its convergence test was met."""


FAULT_MARK = "¦"
"""What encloses the sentence of a check that runs inside a compiled function (a later batch of a
stream), so that :func:`graph_fault` can find it in TensorFlow's error message."""


def graph_fault(message: str) -> Optional[str]:
    """The sentence of the package's in-graph check that failed, from the message of the
    ``tf.errors.InvalidArgumentError`` it raised (without TensorFlow's graph trace); ``None``
    if the error came from elsewhere."""
    found = re.search(f"{FAULT_MARK}([^{FAULT_MARK}]+){FAULT_MARK}", message)
    if found is None:
        return None
    # TensorFlow prints each part of the sentence in brackets: "[Batch] [3] [of the ...]".
    return " ".join(part.strip() for part in re.split(r"\]\s*\[", found.group(1)))
