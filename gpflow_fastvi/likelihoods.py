"""
What the package knows about GPflow's likelihoods beyond their own interface: the highest value a
log-density can take, which the Taylor sites (:mod:`gpflow_fastvi.sites.taylor`) and
:func:`~gpflow_fastvi.fit`'s watch on divergence (:mod:`gpflow_fastvi.training.watch`) both
respect.
"""

from typing import Optional

import gpflow

DISCRETE_LIKELIHOODS = (
    gpflow.likelihoods.Bernoulli,
    gpflow.likelihoods.Poisson,
    gpflow.likelihoods.Ordinal,
)
"""Likelihoods of a discrete variable: each log p(yᵢ | fᵢ) is a log-probability, so ≤ 0."""


def log_density_ceiling(likelihood: gpflow.likelihoods.Likelihood) -> Optional[float]:
    """
    An upper bound on log p(yᵢ | fᵢ) over every fᵢ and every point, and so on log p(y) per point:
    0 for a likelihood of a discrete variable (:data:`DISCRETE_LIKELIHOODS`); ``None`` where
    none is known (a density, such as the Gaussian's, can exceed 1).
    """
    return 0.0 if isinstance(likelihood, DISCRETE_LIKELIHOODS) else None


__all__ = ["DISCRETE_LIKELIHOODS", "log_density_ceiling"]
