"""
q(u) that is *not* at the closed-form optimum: its marginals, its ELBO, and natural-gradient steps.

Everything is written in the frame whitened by L = chol(Kmm), u = L v, p(v) = N(0, I), where a
Gaussian q(v) = N(m, R Rᵀ) (R lower triangular) has natural parameters

    Λ = (R Rᵀ)⁻¹,        η₁ = Λ m.

Sites (a, b, w) on the zero-mean process g, for a batch of s out of n points, are summarised by
their statistics A W Aᵀ and A b (:mod:`gpflow_fastvi.gaussian.statistics`). Scaled by n/s they give
the *target*

    Λ̂ = I + (n/s) A W Aᵀ,        η̂₁ = (n/s) A b,

the optimal q(v) if the batch stood for all the data. The natural gradient of the ELBO with respect
to the natural parameters is η̂ − η (:cite:t:`hensman2013gaussian`), so a step of size ρ is

    η ← (1 − ρ) η + ρ η̂,

a convex combination of two positive-definite precisions. With the full batch and ρ = 1 it lands on
the closed-form optimum of :mod:`gpflow_fastvi.gaussian.optimal_q` from any start. Natural parameters
change linearly with the frame, so the step is the same whether ``q_mu``/``q_sqrt`` are stored
whitened or not.
"""

from typing import Callable, NamedTuple, Sequence, Tuple

import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites, SiteStatistics
from .collapsed import gaussian_factors
from .optimal_q import optimal_q
from .statistics import Projection, projected_marginals, shift_sites, statistics_per_latent


class NaturalParameters(NamedTuple):
    """A Gaussian on v as (η₁, Λ): η₁ = Λ·mean [M, 1] and the precision Λ [M, M]."""

    eta1: tf.Tensor
    precision: tf.Tensor


@check_shapes(
    "q_mu: [M, 1]",
    "q_sqrt: [1, M, M]",
    "L: [M, M]",
    "return[0]: [M, 1]",
    "return[1]: [M, M]",
)
def whitened_q(
    q_mu: tf.Tensor, q_sqrt: tf.Tensor, L: tf.Tensor, whiten: bool
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    GPflow's ``(q_mu, q_sqrt)`` as q(v) = N(m, R Rᵀ) in the whitened frame: unchanged when they are
    stored whitened, else m = L⁻¹ μ and R = L⁻¹ S½ (still lower triangular).
    """
    R = q_sqrt[0]
    if whiten:
        return q_mu, R
    m = tf.linalg.triangular_solve(L, q_mu, lower=True)
    R = tf.linalg.triangular_solve(L, R, lower=True)
    return m, R


@check_shapes(
    "m: [M, 1]",
    "R: [M, M]",
    "L: [M, M]",
    "return[0]: [M, 1]",
    "return[1]: [1, M, M]",
)
def stored_q(m: tf.Tensor, R: tf.Tensor, L: tf.Tensor, whiten: bool) -> Tuple[tf.Tensor, tf.Tensor]:
    """The inverse of :func:`whitened_q`: q(v) = N(m, R Rᵀ) as GPflow's ``(q_mu, q_sqrt)``."""
    if whiten:
        return m, R[None]
    return tf.linalg.matmul(L, m), tf.linalg.matmul(L, R)[None]


@check_shapes(
    "A: [M, N]",
    "Ktilde_diag: [N]",
    "m: [M, 1]",
    "R: [M, M]",
    "return[0]: [N, 1]",
    "return[1]: [N, 1]",
)
def marginals(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, m: tf.Tensor, R: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    Mean and variance of gᵢ under q(v) = N(m, R Rᵀ) at the points whose projection is A = L⁻¹ Kmn:

        E[gᵢ] = aᵢᵀ m,      Var[gᵢ] = K̃ᵢᵢ + ‖Rᵀ aᵢ‖²,      K̃ᵢᵢ = Knn,ᵢᵢ − ‖aᵢ‖².
    """
    RtA = tf.linalg.matmul(R, A, transpose_a=True)  # Rᵀ A                                 [M, N]
    return projected_marginals(A, Ktilde_diag, m, RtA)


@check_shapes("A: [M, N]", "Knn: [N, N]", "R: [M, M]", "return: [N, N]")
def marginal_covariance(A: tf.Tensor, Knn: tf.Tensor, R: tf.Tensor) -> tf.Tensor:
    """
    The covariance of g at the points whose projection is A = L⁻¹ Kmn under q(v) = N(m, R Rᵀ),
    Knn − Aᵀ A + (Rᵀ A)ᵀ (Rᵀ A): the full-covariance form of :func:`marginals`' variance.
    """
    RtA = tf.linalg.matmul(R, A, transpose_a=True)
    return (
        Knn
        - tf.linalg.matmul(A, A, transpose_a=True)
        + tf.linalg.matmul(RtA, RtA, transpose_a=True)
    )


@check_shapes("m: [M, 1]", "R: [M, M]", "return: []")
def kl_to_prior(m: tf.Tensor, R: tf.Tensor) -> tf.Tensor:
    """
    KL[q(v) ‖ N(0, I)] = ½ (‖R‖²_F + ‖m‖² − M) − Σ log ``|diag R|``, which is also KL[q(u) ‖ p(u)]:
    KL does not change under the bijection u = L v.
    """
    M = tf.cast(tf.shape(m)[0], m.dtype)
    trace_and_mean = tf.reduce_sum(tf.square(R)) + tf.reduce_sum(tf.square(m))
    log_det = tf.reduce_sum(tf.math.log(tf.abs(tf.linalg.diag_part(R))))
    return 0.5 * (trace_and_mean - M) - log_det


@check_shapes(
    "sites.a: [N, L]",
    "sites.b: [N, L]",
    "sites.w: [N, L]",
    "Fmu: [N, L]",
    "Fvar: [N, L]",
    "return: [N, L]",
)
def expected_sites(sites: Sites, Fmu: tf.Tensor, Fvar: tf.Tensor) -> tf.Tensor:
    """E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] = aᵢ + bᵢ μᵢ − wᵢ (μᵢ² + σᵢ²)/2 for q(fᵢ) = N(μᵢ, σᵢ²), for
    each point and each of the L latent functions."""
    return sites.a + sites.b * Fmu - 0.5 * sites.w * (tf.square(Fmu) + Fvar)


LocalSites = Callable[[tf.Tensor, tf.Tensor], Sites]
"""(Fmu, Fvar) ↦ the sites on f of a batch, with local parameters optimal for q(f) = N(Fmu, Fvar);
all three [N, L], one column per latent function."""

LatentQ = Sequence[Tuple[tf.Tensor, tf.Tensor]]
"""q(v) of each of L latent functions, as the pairs (m [M, 1], R [M, M]) of q(v_l) = N(m, R Rᵀ)."""


def flat_latents(q: LatentQ) -> Tuple[tf.Tensor, ...]:
    """q(v) of every latent function as one flat tuple (m_1, R_1, m_2, R_2, …), as a pass over
    the data takes its shared tensors."""
    return tuple(t for pair in q for t in pair)


def latent_pairs(flat: Sequence[tf.Tensor]) -> LatentQ:
    """The inverse of :func:`flat_latents`."""
    return list(zip(flat[::2], flat[1::2]))


def concat_latents(stored: Sequence[Tuple[tf.Tensor, tf.Tensor]]) -> Tuple[tf.Tensor, tf.Tensor]:
    """GPflow's ``(q_mu [M, L], q_sqrt [L, M, M])`` from one ``(q_mu [M, 1], q_sqrt [1, M, M])``
    per latent function."""
    if len(stored) == 1:
        return stored[0]
    means, roots = zip(*stored)
    return tf.concat(means, axis=1), tf.concat(roots, axis=0)


@check_shapes(
    "A: [M, N]",
    "Ktilde_diag: [N]",
    "return[0]: [N, L]",
    "return[1]: [N, L]",
)
def latent_marginals(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, q: LatentQ
) -> Tuple[tf.Tensor, tf.Tensor]:
    """:func:`marginals` of each latent function of ``q``, side by side: one projection A for all
    of them, one Rᵀ A per latent function."""
    means, variances = zip(*(marginals(A, Ktilde_diag, m, R) for m, R in q))
    return tf.concat(means, axis=1), tf.concat(variances, axis=1)


@check_shapes(
    "projection.A: [M, N]",
    "projection.Ktilde_diag: [N]",
    "prior_mean: [broadcast N, broadcast L]",
    "return: []",
)
def summed_expected_sites(
    projection: Projection,
    prior_mean: tf.Tensor,
    q: LatentQ,
    local_sites: LocalSites,
) -> tf.Tensor:
    """
    Σᵢ Σ_l E_q[a_il + b_il f_il − w_il f_il²/2] over the points of ``projection`` and the latent
    functions of ``q``, with f = μ(x) + g and the sites' local parameters set by ``local_sites``
    from the marginals: the part of :func:`sites_elbo` that is a sum over points.
    """
    Gmu, Fvar = latent_marginals(projection.A, projection.Ktilde_diag, q)
    Fmu = Gmu + prior_mean
    return tf.reduce_sum(expected_sites(local_sites(Fmu, Fvar), Fmu, Fvar))


@check_shapes("expected: []", "scale: []", "return: []")
def sites_elbo(expected: tf.Tensor, q: LatentQ, scale: tf.Tensor) -> tf.Tensor:
    """
    The ELBO of Gaussian sites at q(v) (:data:`LatentQ`, one Gaussian per latent function) from a
    batch's ``expected`` sites (:func:`summed_expected_sites`) scaled by ``scale`` = n/s:

        scale · Σᵢ Σ_l E_q[a_il + b_il f_il − w_il f_il²/2] − Σ_l KL[q(u_l) ‖ p(u_l)].

    Unbiased over random batches; at the full batch, the optimal q and optimal local parameters it
    is the collapsed bound.
    """
    return scale * expected - latent_kl(q)


def centred_latents(q: LatentQ) -> LatentQ:
    """
    q(v) with the whitened means of the latent functions centred, m_l − (1/L) Σ_k m_k, their
    covariances unchanged: the best q along the shift of every latent function by the same
    function, f_l ↦ f_l + aᵀs, for a likelihood that does not see that shift (the softmax). Its
    expected log-likelihood is unchanged and Σ_l KL[q(v_l) ‖ N(0, I)] falls by (L/2)‖s̄‖²,
    s̄ the mean of the m_l, the most any shift can take off. So at the optimum of such a model's
    ELBO the means sum to zero, and a fixed-point iteration that approaches it slowly along
    this direction (by a factor λ/(1 + λ) per step, λ the sites' precision there, close to 1 on
    much data) gets there at once.
    """
    mean = tf.add_n([m for m, _ in q]) / float(len(q))
    return [(m - mean, R) for m, R in q]


def latent_kl(q: LatentQ) -> tf.Tensor:
    """Σ_l KL[q(u_l) ‖ p(u_l)] over the latent functions of ``q`` (:func:`kl_to_prior` each)."""
    return tf.add_n([kl_to_prior(m, R) for m, R in q])


@check_shapes("m: [M, 1]", "R: [M, M]", "return.eta1: [M, 1]", "return.precision: [M, M]")
def natural_parameters(m: tf.Tensor, R: tf.Tensor) -> NaturalParameters:
    """
    Λ = R⁻ᵀ R⁻¹ and η₁ = Λ m. The step below averages precisions, so Λ is formed as a matrix, from
    triangular solves with R (never a general inverse).
    """
    M = tf.shape(R)[0]
    R_inv = tf.linalg.triangular_solve(R, tf.eye(M, dtype=R.dtype), lower=True)  # R⁻¹
    precision = tf.linalg.matmul(R_inv, R_inv, transpose_a=True)  # R⁻ᵀ R⁻¹
    eta1 = tf.linalg.matmul(R_inv, tf.linalg.matmul(R_inv, m), transpose_a=True)  # R⁻ᵀ R⁻¹ m
    return NaturalParameters(eta1=eta1, precision=precision)


@check_shapes(
    "stats.AWAt: [M, M]",
    "stats.Ab: [M, 1]",
    "scale: []",
    "return.eta1: [M, 1]",
    "return.precision: [M, M]",
)
def site_target(stats: SiteStatistics, scale: tf.Tensor) -> NaturalParameters:
    """η̂ for a batch's statistics scaled by ``scale`` = n/s: Λ̂ = I + scale·A W Aᵀ, η̂₁ = scale·A b."""
    M = tf.shape(stats.AWAt)[0]
    precision = tf.eye(M, dtype=stats.AWAt.dtype) + scale * stats.AWAt
    return NaturalParameters(eta1=scale * stats.Ab, precision=precision)


def natural_step(
    current: NaturalParameters, target: NaturalParameters, rho: tf.Tensor
) -> NaturalParameters:
    """η ← (1 − ρ) η + ρ η̂: a natural-gradient step of size ρ ∈ (0, 1]."""
    return NaturalParameters(
        eta1=(1.0 - rho) * current.eta1 + rho * target.eta1,
        precision=(1.0 - rho) * current.precision + rho * target.precision,
    )


@check_shapes(
    "natural.eta1: [M, 1]",
    "natural.precision: [M, M]",
    "L: [M, M]",
    "return[0]: [M, 1]",
    "return[1]: [1, M, M]",
)
def q_from_natural(
    natural: NaturalParameters, L: tf.Tensor, whiten: bool
) -> Tuple[tf.Tensor, tf.Tensor]:
    """GPflow's ``(q_mu, q_sqrt)`` for q(v) with natural parameters ``natural``; see :func:`optimal_q`."""
    factors = gaussian_factors(natural.precision, natural.eta1, what="the precision of q(u)")
    return optimal_q(factors, L, whiten)


@check_shapes(
    "projection.A: [M, N]",
    "projection.Ktilde_diag: [N]",
    "prior_mean: [broadcast N, broadcast L]",
)
def step_statistics(
    projection: Projection,
    prior_mean: tf.Tensor,
    q: LatentQ,
    local_sites: LocalSites,
) -> Tuple[SiteStatistics, ...]:
    """
    The statistics of the sites that a natural-gradient step from q(v) (:data:`LatentQ`) moves
    towards, on the points of ``projection``, one :class:`~gpflow_fastvi.types.SiteStatistics`
    per latent function: the sites' local parameters set for the marginals of q
    (``local_sites``, which sees every latent function at once, as a multi-class likelihood
    couples them), moved onto the zero-mean process g. The part of the step that is a sum over
    points; :func:`natural_gradient_parameters` takes it from there, per latent function.
    """
    Gmu, Fvar = latent_marginals(projection.A, projection.Ktilde_diag, q)
    return statistics_per_latent(
        projection, shift_sites(local_sites(Gmu + prior_mean, Fvar), prior_mean)
    )


@check_shapes(
    "m: [M, 1]",
    "R: [M, M]",
    "stats.AWAt: [M, M]",
    "stats.Ab: [M, 1]",
    "scale: []",
    "rho: []",
    "return.eta1: [M, 1]",
    "return.precision: [M, M]",
)
def natural_gradient_parameters(
    m: tf.Tensor, R: tf.Tensor, stats: SiteStatistics, scale: tf.Tensor, rho: tf.Tensor
) -> NaturalParameters:
    """
    The natural parameters of q(v) after one stochastic variational step of size ``rho`` from
    q(v) = N(m, R Rᵀ) towards the target of a batch's :func:`step_statistics` scaled by ``scale``
    = n/s, whatever the site rule. Nothing is factorised, so a caller can test them (finite?)
    before :func:`q_from_natural` does.
    """
    return natural_step(natural_parameters(m, R), site_target(stats, scale), rho)
