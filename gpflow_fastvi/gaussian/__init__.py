"""
The Gaussian algebra shared by every model, ignorant of site rules: sufficient statistics of sites,
the collapsed bound, the closed-form optimal q(u), all through Cholesky factors.
"""

from .batching import map_over_batches, sum_over_batches
from .cholesky import checked_cholesky, robust_cholesky
from .collapsed import CollapsedBound, CollapsedFactors, collapsed_bound, collapsed_factors
from .optimal_q import optimal_marginals, optimal_q
from .statistics import (
    shift_sites,
    site_statistics,
    statistics_from_projection,
    unexplained_variance,
    whitened_projection,
)

__all__ = [
    "CollapsedBound",
    "CollapsedFactors",
    "checked_cholesky",
    "collapsed_bound",
    "collapsed_factors",
    "map_over_batches",
    "optimal_marginals",
    "optimal_q",
    "robust_cholesky",
    "shift_sites",
    "site_statistics",
    "statistics_from_projection",
    "sum_over_batches",
    "unexplained_variance",
    "whitened_projection",
]
