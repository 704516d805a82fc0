"""
The two small records that every model passes through the shared Gaussian algebra.

A *site* is a quadratic in the latent function value that stands in for one data point's
log-likelihood, :math:`\\log p(y_i \\mid f_i) \\ge (\\text{or} \\approx)\\; a_i + b_i f_i - \\tfrac12 w_i f_i^2`.
Site rules (:mod:`gpflow_fastvi.sites`) produce :class:`Sites`; the Gaussian algebra
(:mod:`gpflow_fastvi.gaussian`) turns them into :class:`SiteStatistics` and from there into the optimal
q(u) and the collapsed bound.
"""

from typing import NamedTuple

import tensorflow as tf


class Sites(NamedTuple):
    """Coefficients of the Gaussian sites a + b f − w f²/2, one per data point, each of shape [N, 1]."""

    a: tf.Tensor
    """Constant term aᵢ (it carries the bound's dependence on the site parameters)."""
    b: tf.Tensor
    """Linear coefficient bᵢ (a precision-weighted pseudo-target)."""
    w: tf.Tensor
    """Curvature wᵢ > 0 (a pseudo-observation precision)."""


class SiteStatistics(NamedTuple):
    """
    Sums over data points that are all the collapsed algebra needs, expressed in the frame whitened
    by L = chol(Kmm), i.e. with A = L⁻¹ Kmn.

    Every field is a sum over points, so statistics of disjoint batches add up
    (:func:`gpflow_fastvi.gaussian.statistics.site_statistics`).
    """

    AWAt: tf.Tensor
    """A W Aᵀ = L⁻¹ (Kmn W Knm) L⁻ᵀ, shape [M, M]."""
    Ab: tf.Tensor
    """A b = L⁻¹ Kmn b, shape [M, 1]."""
    sum_a: tf.Tensor
    """Σᵢ aᵢ, a scalar."""
    trace: tf.Tensor
    """Σᵢ wᵢ (Knn,ᵢᵢ − Qnn,ᵢᵢ): the sites' weight on what u cannot explain, a scalar."""
