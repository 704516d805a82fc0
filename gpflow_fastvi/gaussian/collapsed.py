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
"""

from typing import NamedTuple, Sequence

import tensorflow as tf
from check_shapes import check_shapes

from ..types import SiteStatistics
from .cholesky import checked_cholesky


class CollapsedFactors(NamedTuple):
    """The two factors every closed-form quantity is built from."""

    LB: tf.Tensor
    """LB = chol(B), B = I + A W Aᵀ, shape [M, M]."""
    c: tf.Tensor
    """c = LB⁻¹ A b, shape [M, 1]."""


class CollapsedBound(NamedTuple):
    """The collapsed bound as its named terms; :attr:`total` is their sum."""

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
    "precision: [M, M]",
    "eta1: [M, 1]",
    "return.LB: [M, M]",
    "return.c: [M, 1]",
)
def gaussian_factors(precision: tf.Tensor, eta1: tf.Tensor, *, what: str) -> CollapsedFactors:
    """
    The factors of a Gaussian on v given by its natural parameters, precision Λ and η₁ = Λ·mean:
    LB = chol(Λ) and c = LB⁻¹ η₁, so that mean = LB⁻ᵀ c and ½ η₁ᵀ Λ⁻¹ η₁ = ½ ‖c‖².

    The optimal q(v) for some sites is the case Λ = B = I + A W Aᵀ, η₁ = A b; a natural-gradient
    step (:mod:`gpflow_fastvi.gaussian.natural`) produces other Λ and η₁ of the same kind.
    """
    LB = checked_cholesky(precision, what=what)
    c = tf.linalg.triangular_solve(LB, eta1, lower=True)  # c = LB⁻¹ η₁
    return CollapsedFactors(LB=LB, c=c)


@check_shapes(
    "stats.AWAt: [M, M]",
    "stats.Ab: [M, 1]",
    "return.LB: [M, M]",
    "return.c: [M, 1]",
)
def collapsed_factors(stats: SiteStatistics) -> CollapsedFactors:
    """LB = chol(I + A W Aᵀ) and c = LB⁻¹ A b from the site statistics."""
    M = tf.shape(stats.AWAt)[0]
    # B = I + A W Aᵀ, positive definite for w ≥ 0: the precision of the optimal q(v)
    B = tf.eye(M, dtype=stats.AWAt.dtype) + stats.AWAt
    return gaussian_factors(B, stats.Ab, what="B = I + A W Aᵀ")


@check_shapes(
    "stats.AWAt: [M, M]",
    "factors.LB: [M, M]",
    "factors.c: [M, 1]",
    "return.sum_a: []",
    "return.quad_term: []",
    "return.logdet_term: []",
    "return.trace_term: []",
)
def collapsed_bound(stats: SiteStatistics, factors: CollapsedFactors) -> CollapsedBound:
    """The collapsed bound of the module docstring, term by term."""
    return CollapsedBound(
        sum_a=stats.sum_a,
        quad_term=0.5 * tf.reduce_sum(tf.square(factors.c)),
        logdet_term=-tf.reduce_sum(tf.math.log(tf.linalg.diag_part(factors.LB))),
        trace_term=-0.5 * stats.trace,
    )


def summed_bound(
    stats: Sequence[SiteStatistics], factors: Sequence[CollapsedFactors]
) -> CollapsedBound:
    """The collapsed bound of several latent functions, each with its own statistics and factors:
    :func:`collapsed_bound` of each, every term summed over them (the bound of one is itself)."""
    bounds = [collapsed_bound(s, f) for s, f in zip(stats, factors)]
    if len(bounds) == 1:
        return bounds[0]
    return CollapsedBound(*(tf.add_n(list(terms)) for terms in zip(*bounds)))
