"""
q(u) that is *not* at the closed-form optimum: its marginals, its ELBO, and natural-gradient steps.

Everything is written in the frame whitened by L = chol(Kmm), u = L v, p(v) = N(0, I), where a
Gaussian q(v) = N(m, R Rᵀ) (R lower triangular) has natural parameters

    Λ = (R Rᵀ)⁻¹,        η₁ = Λ m.

L independent latent functions are held as :class:`gpflow.models.SVGP` holds them (a
:class:`WhitenedQ`: means [M, L], square roots [L, M, M]) and every function below is batched over
them: there is no loop over latent functions, and the graph of a model of C classes is the graph
of a binary one with a batch of C.

Sites (a, b, w) on the zero-mean process g, for a batch of s out of n points, are summarised by
their statistics A W Aᵀ and A b, one of each per latent function (:mod:`gpflow_fastvi.gaussian.statistics`). Scaled by n/s they give
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

from typing import Callable, NamedTuple, Tuple

import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites, SiteStatistics
from .collapsed import gaussian_factors
from .optimal_q import optimal_whitened_q
from .statistics import (
    Projection,
    latent_batch,
    latent_columns,
    projected_marginals,
    shift_sites,
    statistics_from_projection,
    times_shared,
    triangular_inverse,
)


class WhitenedQ(NamedTuple):
    """q(v_l) = N(m_l, R_l R_lᵀ) of L latent functions in the frame whitened by L = chol(Kmm), in
    GPflow's layout: the means as the columns of ``m`` [M, L], the lower-triangular square roots
    stacked in ``R`` [L, M, M]."""

    m: tf.Tensor
    R: tf.Tensor


class NaturalParameters(NamedTuple):
    """L Gaussians on v as (η₁, Λ): η₁ = Λ·mean as the columns of [M, L], the precisions Λ
    stacked [L, M, M]."""

    eta1: tf.Tensor
    precision: tf.Tensor


@check_shapes(
    "q_mu: [M, L]",
    "q_sqrt: [L, M, M]",
    "L: [outputs..., M, M]",
    "return.m: [M, L]",
    "return.R: [L, M, M]",
)
def whitened_q(q_mu: tf.Tensor, q_sqrt: tf.Tensor, L: tf.Tensor, whiten: bool) -> WhitenedQ:
    """
    GPflow's ``(q_mu, q_sqrt)`` as q(v) = N(m, R Rᵀ) in the whitened frame: unchanged when they are
    stored whitened, else m = L⁻¹ μ and R = L⁻¹ S½ (still lower triangular). Tensors either way
    (not GPflow's parameters), so that the result nests as a structure of tensors. ``L`` is one
    factor shared by the latent functions [M, M], or one of each [L, M, M].
    """
    q_mu, q_sqrt = tf.convert_to_tensor(q_mu), tf.convert_to_tensor(q_sqrt)
    if whiten:
        return WhitenedQ(m=q_mu, R=q_sqrt)
    m = latent_columns(tf.linalg.triangular_solve(L, latent_batch(q_mu), lower=True))
    R = tf.linalg.triangular_solve(L, q_sqrt, lower=True)
    return WhitenedQ(m=m, R=R)


@check_shapes("q_sqrt: [M, L]", "return: [L, M, M]")
def diagonal_q_sqrt(q_sqrt: tf.Tensor) -> tf.Tensor:
    """GPflow's ``q_sqrt`` of ``q_diag=True``, the standard deviations [M, L], as the diagonal
    square roots [L, M, M] that every function here takes."""
    return tf.linalg.diag(tf.linalg.matrix_transpose(q_sqrt))


@check_shapes("q_sqrt: [L, M, M]", "return: [M, L]")
def mean_field_sqrt(q_sqrt: tf.Tensor) -> tf.Tensor:
    """
    The standard deviations, as GPflow's ``q_sqrt`` of ``q_diag=True`` [M, L], of the factorised
    Gaussian closest in KL[q_mf ‖ q] to each q_l = N(μ_l, S_l S_lᵀ) (``q_sqrt`` = S, lower
    triangular): the textbook mean field, whose mean is μ_l and whose variances are the
    reciprocals of the diagonal of the precision Λ_l = S_l⁻ᵀ S_l⁻¹. For sites of optimum q, q_mf
    is their optimum over the factorised family, and their ELBO there is their collapsed bound
    less KL[q_mf ‖ q] = ½ Σⱼ log Λ_l,jj − ½ log ``|Λ_l|`` ≥ 0 (Hadamard's inequality), which
    :func:`kl_between` gives. A diagonal S is its own mean field.
    """
    S_inv = triangular_inverse(q_sqrt)  # S⁻¹                                              [L, M, M]
    precision_diagonal = tf.reduce_sum(tf.square(S_inv), axis=-2)  # Λ_jj = Σᵢ (S⁻¹)ᵢⱼ²   [L, M]
    return tf.linalg.matrix_transpose(tf.math.rsqrt(precision_diagonal))


@check_shapes(
    "q.m: [M, L]",
    "q.R: [L, M, M]",
    "L: [outputs..., M, M]",
    "return[0]: [M, L]",
    "return[1]: [L, M, M]",
)
def stored_q(q: WhitenedQ, L: tf.Tensor, whiten: bool) -> Tuple[tf.Tensor, tf.Tensor]:
    """The inverse of :func:`whitened_q`: q(v) as GPflow's ``(q_mu, q_sqrt)``."""
    if whiten:
        return q.m, q.R
    return latent_columns(tf.linalg.matmul(L, latent_batch(q.m))), tf.linalg.matmul(L, q.R)


@check_shapes(
    "A: [outputs..., M, N]",
    "Ktilde_diag: [N, outputs...]",
    "q.m: [M, L]",
    "q.R: [L, M, M]",
    "return[0]: [N, L]",
    "return[1]: [N, L]",
)
def marginals(A: tf.Tensor, Ktilde_diag: tf.Tensor, q: WhitenedQ) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    Mean and variance of g_il under q(v_l) = N(m_l, R_l R_lᵀ) at the points whose projection is
    A = L⁻¹ Kmn, for every latent function at once:

        E[g_il] = aᵢᵀ m_l,      Var[g_il] = K̃ᵢᵢ + ‖R_lᵀ aᵢ‖²,      K̃ᵢᵢ = Knn,ᵢᵢ − ‖aᵢ‖².
    """
    RtA = times_shared(tf.linalg.matrix_transpose(q.R), A)  # R_lᵀ A                     [L, M, N]
    return projected_marginals(A, Ktilde_diag, q.m, RtA)


@check_shapes(
    "A: [outputs..., M, N]", "Knn: [outputs..., N, N]", "R: [L, M, M]", "return: [L, N, N]"
)
def marginal_covariance(A: tf.Tensor, Knn: tf.Tensor, R: tf.Tensor) -> tf.Tensor:
    """
    The covariance of g_l at the points whose projection is A = L⁻¹ Kmn under q(v_l) =
    N(m_l, R_l R_lᵀ), Knn − Aᵀ A + (R_lᵀ A)ᵀ (R_lᵀ A): the full-covariance form of
    :func:`marginals`' variance, for each latent function.
    """
    RtA = tf.linalg.matmul(R, A, transpose_a=True)
    return (
        Knn
        - tf.linalg.matmul(A, A, transpose_a=True)
        + tf.linalg.matmul(RtA, RtA, transpose_a=True)
    )


@check_shapes("q.m: [M, L]", "q.R: [L, M, M]", "return: []")
def kl_to_prior(q: WhitenedQ) -> tf.Tensor:
    """
    Σ_l KL[q(v_l) ‖ N(0, I)] = Σ_l ½ (‖R_l‖²_F + ‖m_l‖² − M) − Σ log ``|diag R_l|``, which is also
    Σ_l KL[q(u_l) ‖ p(u_l)]: KL does not change under the bijection u = L v.
    """
    size = tf.cast(tf.size(q.m), q.m.dtype)  # M · L
    trace_and_mean = tf.reduce_sum(tf.square(q.R)) + tf.reduce_sum(tf.square(q.m))
    log_det = tf.reduce_sum(tf.math.log(tf.abs(tf.linalg.diag_part(q.R))))
    return 0.5 * (trace_and_mean - size) - log_det


@check_shapes("q.m: [M, L]", "q.R: [L, M, M]", "p.m: [M, L]", "p.R: [L, M, M]", "return: []")
def kl_between(q: WhitenedQ, p: WhitenedQ) -> tf.Tensor:
    """
    Σ_l KL[q(v_l) ‖ p(v_l)] = Σ_l ½ (‖P_l⁻¹ R_l‖²_F + ‖P_l⁻¹ (m_p,l − m_l)‖² − M)
    + Σ log ``|diag P_l|`` − Σ log ``|diag R_l|`` for q = N(m, R Rᵀ) and p = N(m_p, P Pᵀ), by
    triangular solves with P: :func:`kl_to_prior` is the case p = N(0, I). For sites of optimum p,
    their ELBO at q is their collapsed bound less this KL.
    """
    size = tf.cast(tf.size(q.m), q.m.dtype)  # M · L
    scaled_R = tf.linalg.triangular_solve(p.R, q.R, lower=True)  # P⁻¹ R          [L, M, M]
    difference = tf.linalg.matrix_transpose(p.m - q.m)[..., None]  # [L, M, 1]
    scaled_mean = tf.linalg.triangular_solve(p.R, difference, lower=True)
    trace_and_mean = tf.reduce_sum(tf.square(scaled_R)) + tf.reduce_sum(tf.square(scaled_mean))
    log_det = tf.reduce_sum(tf.math.log(tf.abs(tf.linalg.diag_part(p.R)))) - tf.reduce_sum(
        tf.math.log(tf.abs(tf.linalg.diag_part(q.R)))
    )
    return 0.5 * (trace_and_mean - size) + log_det


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


@check_shapes(
    "stats.AWAt: [L, M, M]",
    "stats.Ab: [M, L]",
    "stats.sum_a: []",
    "stats.trace: []",
    "q.m: [M, L]",
    "q.R: [L, M, M]",
    "return: []",
)
def expected_sites_from_statistics(stats: SiteStatistics, q: WhitenedQ) -> tf.Tensor:
    """
    Σᵢ Σ_l E_q[a_il + b_il g_il − w_il g_il²/2] under q(v_l) = N(m_l, R_l R_lᵀ), read off the
    sites' statistics (sites on the zero-mean g, :func:`~gpflow_fastvi.gaussian.statistics.shift_sites`):
    with E[g_il] = aᵢᵀ m_l and Var[g_il] = K̃ᵢᵢ + ‖R_lᵀ aᵢ‖²,

        Σ a + Σ_l m_lᵀ (A b_l) − ½ Σ_l [m_lᵀ (A W_l Aᵀ) m_l + tr(R_lᵀ (A W_l Aᵀ) R_l)] − ½ Σᵢ Σ_l w_il K̃ᵢᵢ.

    The same number as :func:`expected_sites` summed at :func:`marginals`; reached through the
    statistics, its gradient in the kernel and Z is their hand-written one
    (:func:`~gpflow_fastvi.gaussian.statistics.statistics_from_projection`), with no pass back
    through A = L⁻¹ Kmn and the marginals. M³ per latent function once the statistics are formed.
    """
    P = stats.AWAt
    m = latent_batch(q.m)  #                                                              [L, M, 1]
    quadratic = tf.reduce_sum(m * tf.linalg.matmul(P, m)) + tf.reduce_sum(
        q.R * tf.linalg.matmul(P, q.R)
    )
    return stats.sum_a + tf.reduce_sum(q.m * stats.Ab) - 0.5 * (quadratic + stats.trace)


LocalSites = Callable[[tf.Tensor, tf.Tensor], Sites]
"""(Fmu, Fvar) ↦ the sites on f of a batch, with local parameters optimal for q(f) = N(Fmu, Fvar);
all three [N, L], one column per latent function."""


@check_shapes(
    "projection.A: [outputs..., M, N]",
    "projection.Ktilde_diag: [N, outputs...]",
    "prior_mean: [broadcast N, broadcast L]",
    "q.m: [M, L]",
    "return: []",
)
def summed_expected_sites(
    projection: Projection,
    prior_mean: tf.Tensor,
    q: WhitenedQ,
    local_sites: LocalSites,
) -> tf.Tensor:
    """
    Σᵢ Σ_l E_q[a_il + b_il f_il − w_il f_il²/2] over the points of ``projection`` and the latent
    functions of ``q``, with f = μ(x) + g and the sites' local parameters set by ``local_sites``
    from the marginals: the part of :func:`sites_elbo` that is a sum over points.
    """
    Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, q)
    Fmu = Gmu + prior_mean
    return tf.reduce_sum(expected_sites(local_sites(Fmu, Fvar), Fmu, Fvar))


@check_shapes("expected: []", "q.m: [M, L]", "scale: []", "return: []")
def sites_elbo(expected: tf.Tensor, q: WhitenedQ, scale: tf.Tensor) -> tf.Tensor:
    """
    The ELBO of Gaussian sites at q(v) from a batch's ``expected`` sites
    (:func:`summed_expected_sites`) scaled by ``scale`` = n/s:

        scale · Σᵢ Σ_l E_q[a_il + b_il f_il − w_il f_il²/2] − Σ_l KL[q(u_l) ‖ p(u_l)].

    Unbiased over random batches; at the full batch, the optimal q and optimal local parameters it
    is the collapsed bound.
    """
    return scale * expected - kl_to_prior(q)


@check_shapes("q.m: [M, L]", "q.R: [L, M, M]", "return.m: [M, L]")
def centred_q(q: WhitenedQ) -> WhitenedQ:
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
    return WhitenedQ(m=q.m - tf.reduce_mean(q.m, axis=1, keepdims=True), R=q.R)


@check_shapes(
    "q.m: [M, L]",
    "q.R: [L, M, M]",
    "return.eta1: [M, L]",
    "return.precision: [L, M, M]",
)
def natural_parameters(q: WhitenedQ) -> NaturalParameters:
    """
    Λ_l = R_l⁻ᵀ R_l⁻¹ and η₁_l = Λ_l m_l. The step below averages precisions, so Λ is formed as a
    matrix, from triangular solves with R (never a general inverse).
    """
    R_inv = triangular_inverse(q.R)  # R⁻¹                                                [L, M, M]
    precision = tf.linalg.matmul(R_inv, R_inv, transpose_a=True)  # R⁻ᵀ R⁻¹
    eta1 = tf.linalg.matmul(precision, latent_batch(q.m))  # R⁻ᵀ R⁻¹ m                    [L, M, 1]
    return NaturalParameters(eta1=latent_columns(eta1), precision=precision)


@check_shapes(
    "stats.AWAt: [L, M, M]",
    "stats.Ab: [M, L]",
    "scale: []",
    "return.eta1: [M, L]",
    "return.precision: [L, M, M]",
)
def site_target(stats: SiteStatistics, scale: tf.Tensor) -> NaturalParameters:
    """η̂ for a batch's statistics scaled by ``scale`` = n/s: Λ̂ = I + scale·A W Aᵀ, η̂₁ = scale·A b."""
    M = tf.shape(stats.AWAt)[-1]
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
    "natural.eta1: [M, L]",
    "natural.precision: [L, M, M]",
    "return.m: [M, L]",
    "return.R: [L, M, M]",
)
def q_from_natural(natural: NaturalParameters) -> WhitenedQ:
    """q(v) with natural parameters ``natural``, by their factors (see :func:`optimal_whitened_q`)."""
    factors = gaussian_factors(natural.precision, natural.eta1, what="the precision of q(u)")
    return WhitenedQ(*optimal_whitened_q(factors))


@check_shapes(
    "projection.A: [outputs..., M, N]",
    "projection.Ktilde_diag: [N, outputs...]",
    "prior_mean: [broadcast N, broadcast L]",
    "q.m: [M, L]",
)
def step_statistics(
    projection: Projection,
    prior_mean: tf.Tensor,
    q: WhitenedQ,
    local_sites: LocalSites,
) -> SiteStatistics:
    """
    The statistics of the sites that a natural-gradient step from q(v) moves towards, on the
    points of ``projection``: the sites' local parameters set for the marginals of q
    (``local_sites``, which sees every latent function at once, as a multi-class likelihood
    couples them), moved onto the zero-mean process g. The part of the step that is a sum over
    points; :func:`natural_gradient_parameters` takes it from there.
    """
    Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, q)
    return statistics_from_projection(
        projection, shift_sites(local_sites(Gmu + prior_mean, Fvar), prior_mean)
    )


@check_shapes(
    "q.m: [M, L]",
    "q.R: [L, M, M]",
    "stats.AWAt: [L, M, M]",
    "stats.Ab: [M, L]",
    "scale: []",
    "rho: []",
    "return.eta1: [M, L]",
    "return.precision: [L, M, M]",
)
def natural_gradient_parameters(
    q: WhitenedQ, stats: SiteStatistics, scale: tf.Tensor, rho: tf.Tensor
) -> NaturalParameters:
    """
    The natural parameters of q(v) after one stochastic variational step of size ``rho`` from
    ``q`` towards the target of a batch's :func:`step_statistics` scaled by ``scale`` = n/s,
    whatever the site rule. Nothing is factorised, so a caller can test them (finite?) before
    :func:`q_from_natural` does.
    """
    return natural_step(natural_parameters(q), site_target(stats, scale), rho)
