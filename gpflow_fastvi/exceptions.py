"""Exceptions raised by :mod:`gpflow_fastvi`, each naming what went wrong and what to do instead."""


class GPflowFastVIError(Exception):
    """Base class of every error raised on purpose by :mod:`gpflow_fastvi`."""


class IncompatibleLikelihoodError(GPflowFastVIError, ValueError):
    """The model's site rule cannot be derived for the likelihood it was given."""


class InvalidDataError(GPflowFastVIError, ValueError):
    """Training or test data with the wrong shape, non-finite values or labels the model cannot use."""


class CholeskyError(GPflowFastVIError, ArithmeticError):
    """A matrix could not be Cholesky-factorised, even after adding the largest jitter allowed."""
