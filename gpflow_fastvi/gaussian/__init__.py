"""
The Gaussian algebra shared by every model, ignorant of site rules: sufficient statistics of sites,
the collapsed bound, the closed-form optimal q(u), all through Cholesky factors.
"""

from .batching import map_over_batches, sum_over_batches, sum_over_dataset
from .cholesky import checked_cholesky, escalating_cholesky, is_factorisable, robust_cholesky
from .collapsed import (
    CollapsedBound,
    CollapsedFactors,
    collapsed_bound,
    collapsed_factors,
    gaussian_factors,
)
from .natural import (
    NaturalParameters,
    expected_sites,
    kl_to_prior,
    marginal_covariance,
    marginals,
    natural_gradient_parameters,
    natural_parameters,
    natural_step,
    q_from_natural,
    site_target,
    sites_elbo,
    step_statistics,
    stored_q,
    summed_expected_sites,
    whitened_q,
)
from .optimal_q import optimal_marginals, optimal_q
from .statistics import (
    Projection,
    kmm_cholesky,
    projected_marginals,
    shift_sites,
    statistics_from_projection,
    triangular_inverse,
    unexplained_variance,
    whitened_projection,
)

__all__ = [
    "CollapsedBound",
    "CollapsedFactors",
    "NaturalParameters",
    "Projection",
    "checked_cholesky",
    "collapsed_bound",
    "collapsed_factors",
    "escalating_cholesky",
    "expected_sites",
    "gaussian_factors",
    "is_factorisable",
    "kl_to_prior",
    "kmm_cholesky",
    "map_over_batches",
    "marginal_covariance",
    "marginals",
    "natural_gradient_parameters",
    "natural_parameters",
    "natural_step",
    "optimal_marginals",
    "optimal_q",
    "projected_marginals",
    "q_from_natural",
    "robust_cholesky",
    "shift_sites",
    "site_target",
    "sites_elbo",
    "statistics_from_projection",
    "step_statistics",
    "stored_q",
    "sum_over_batches",
    "sum_over_dataset",
    "summed_expected_sites",
    "triangular_inverse",
    "unexplained_variance",
    "whitened_projection",
    "whitened_q",
]
