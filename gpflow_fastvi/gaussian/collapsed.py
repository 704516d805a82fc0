"""
The collapsed bound: the Gaussian-site ELBO maximised in closed form over q(u).

For sites (a, b, w) on a zero-mean GP with inducing values u (Kmm = L Lᵀ, A = L⁻¹ Kmn),

    max_q  Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] − KL[q(u) ‖ p(u)]
      = Σᵢ aᵢ + ½ bᵀ Knm (Kmm + Kmn W Knm)⁻¹ Kmn b
        + ½ log|Kmm| − ½ log|Kmm + Kmn W Knm| − ½ Σᵢ wᵢ (Knn,ᵢᵢ − Qnn,ᵢᵢ).

This is Titsias' bound (:cite:t:`titsias2009variational`) for heteroscedastic noise 1/wᵢ and
pseudo-targets bᵢ/wᵢ, plus the sites' constants. In the whitened frame, B = I + A W Aᵀ = LB LBᵀ and
c = LB⁻¹ A b give

    ½ bᵀ Knm (Kmm + Kmn W Knm)⁻¹ Kmn b = ½ ‖c‖²,     ½ log|Kmm| − ½ log|Kmm + Kmn W Knm| = −Σ log diag LB.

For L latent functions with sites of their own the bound is the sum of L such bounds, one B_l and
c_l each: the factors are batched ([L, M, M] and [M, L]) and every term is summed over l.
"""

from typing import NamedTuple

import tensorflow as tf
from check_shapes import check_shapes

from ..types import SiteStatistics
from .cholesky import checked_cholesky
from .statistics import latent_batch, latent_columns


class CollapsedFactors(NamedTuple):
    """The two factors every closed-form quantity is built from, one of each per latent function."""

    LB: tf.Tensor
    """LB_l = chol(B_l), B_l = I + A W_l Aᵀ, shape [L, M, M]."""
    c: tf.Tensor
    """c_l = LB_l⁻¹ A b_l as the columns of [M, L]."""


class CollapsedBound(NamedTuple):
    """The collapsed bound as its named terms, each summed over the latent functions; :attr:`total`
    is their sum."""

    sum_a: tf.Tensor
    """Σᵢ aᵢ: the sites' constants."""
    quad_term: tf.Tensor
    """½ ‖c‖² = ½ bᵀ Knm (Kmm + Kmn W Knm)⁻¹ Kmn b."""
    logdet_term: tf.Tensor
    """−Σ log diag LB = ½ log|Kmm| − ½ log|Kmm + Kmn W Knm|."""
    trace_term: tf.Tensor
    """−½ Σᵢ wᵢ (Knn,ᵢᵢ − Qnn,ᵢᵢ)."""

    @property
    def total(self) -> tf.Tensor:
        return self.sum_a + self.quad_term + self.logdet_term + self.trace_term


@check_shapes(
    "precision: [L, M, M]",
    "eta1: [M, L]",
    "return.LB: [L, M, M]",
    "return.c: [M, L]",
)
def gaussian_factors(precision: tf.Tensor, eta1: tf.Tensor, *, what: str) -> CollapsedFactors:
    """
    The factors of L Gaussians on v given by their natural parameters, precisions Λ_l and
    η₁ = Λ_l·mean_l: LB_l = chol(Λ_l) and c_l = LB_l⁻¹ η₁_l, so that mean_l = LB_l⁻ᵀ c_l and
    ½ η₁_lᵀ Λ_l⁻¹ η₁_l = ½ ‖c_l‖².

    The optimal q(v) for some sites is the case Λ = B = I + A W Aᵀ, η₁ = A b; a natural-gradient
    step (:mod:`gpflow_fastvi.gaussian.natural`) produces other Λ and η₁ of the same kind.
    """
    LB = checked_cholesky(precision, what=what)
    c = tf.linalg.triangular_solve(LB, latent_batch(eta1), lower=True)  # c = LB⁻¹ η₁
    return CollapsedFactors(LB=LB, c=latent_columns(c))


@check_shapes(
    "stats.AWAt: [L, M, M]",
    "stats.Ab: [M, L]",
    "return.LB: [L, M, M]",
    "return.c: [M, L]",
)
def collapsed_factors(stats: SiteStatistics) -> CollapsedFactors:
    """LB = chol(I + A W Aᵀ) and c = LB⁻¹ A b from the site statistics, per latent function."""
    M = tf.shape(stats.AWAt)[-1]
    # B = I + A W Aᵀ, positive definite for w ≥ 0: the precision of the optimal q(v)
    B = tf.eye(M, dtype=stats.AWAt.dtype) + stats.AWAt
    return gaussian_factors(B, stats.Ab, what="B = I + A W Aᵀ")


@check_shapes(
    "stats.AWAt: [L, M, M]",
    "factors.LB: [L, M, M]",
    "factors.c: [M, L]",
    "return.sum_a: []",
    "return.quad_term: []",
    "return.logdet_term: []",
    "return.trace_term: []",
)
def collapsed_bound(stats: SiteStatistics, factors: CollapsedFactors) -> CollapsedBound:
    """The collapsed bound of the module docstring, term by term, summed over the latent functions."""
    return CollapsedBound(
        sum_a=stats.sum_a,
        quad_term=0.5 * tf.reduce_sum(tf.square(factors.c)),
        logdet_term=-tf.reduce_sum(tf.math.log(tf.linalg.diag_part(factors.LB))),
        trace_term=-0.5 * stats.trace,
    )
