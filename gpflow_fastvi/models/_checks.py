"""Checks that a likelihood is one a model's site rule was derived for."""

import gpflow
import numpy as np
import tensorflow as tf

from ..exceptions import IncompatibleLikelihoodError


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
