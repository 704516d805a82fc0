"""Checks that a likelihood is one a model's site rule was derived for."""

import gpflow
import numpy as np
import tensorflow as tf

from ..exceptions import IncompatibleLikelihoodError, InvalidDataError
from ..sites._labels import binary_labels_to_01


def is_logit_bernoulli(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` is a Bernoulli whose inverse link is the logistic sigmoid (checked numerically)."""
    if not isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        return False
    t = tf.constant(np.linspace(-30.0, 30.0, 61), dtype=gpflow.config.default_float())
    return bool(
        np.allclose(likelihood.invlink(t).numpy(), tf.sigmoid(t).numpy(), rtol=1e-10, atol=0)
    )


def check_logit_bernoulli(likelihood: gpflow.likelihoods.Likelihood, needed_by: str) -> None:
    """Raise :class:`IncompatibleLikelihoodError` unless ``likelihood`` is a logit Bernoulli."""
    if is_logit_bernoulli(likelihood):
        return
    link = getattr(likelihood, "invlink", None)
    raise IncompatibleLikelihoodError(
        f"{needed_by} needs gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid) (the logit link); got "
        f"{type(likelihood).__name__}"
        + (f" with invlink={getattr(link, '__name__', link)}" if link is not None else "")
        + ". GPflow's default Bernoulli() is the probit link: use Bernoulli(invlink=tf.sigmoid), "
        "or VITaylor for other likelihoods."
    )


def check_scalar_likelihood(likelihood: gpflow.likelihoods.Likelihood, model: str) -> None:
    """Raise :class:`IncompatibleLikelihoodError` unless ``likelihood`` factorises over points."""
    if not isinstance(likelihood, gpflow.likelihoods.ScalarLikelihood):
        raise IncompatibleLikelihoodError(
            f"{model} needs a likelihood that factorises over data points with one latent function "
            f"(a gpflow.likelihoods.ScalarLikelihood, such as Bernoulli, Poisson or Gaussian); got "
            f"{type(likelihood).__name__}."
        )


def targets_for_likelihood(likelihood: gpflow.likelihoods.Likelihood, Y: np.ndarray) -> np.ndarray:
    """
    Check targets [N, 1] against what ``likelihood`` can score and return them in its convention:
    binary labels ({0, 1} or {−1, +1}, stored as {0, 1}) for Bernoulli, non-negative integer counts
    for Poisson, anything finite otherwise.
    """
    if isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        return binary_labels_to_01(Y)
    if isinstance(likelihood, gpflow.likelihoods.Poisson):
        bad = (Y < 0) | (Y != np.round(Y))
        if np.any(bad):
            raise InvalidDataError(
                "Y must hold non-negative integer counts for a Poisson likelihood; found "
                f"{np.unique(Y[bad])[:6].tolist()}."
            )
    return Y
