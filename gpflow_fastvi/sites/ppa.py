"""
PPA sites: probabilistic point assimilation (:cite:t:`king2006fast`, the model behind
:class:`~gpflow_fastvi.KLCorrected`).

The PPA model puts the GP prior on f̄ and lets the likelihood see fₙ = f̄ₙ + noise of precision β.
Its factorised posterior q(f̄) ∏ₙ q(fₙ) is found by alternating two closed-form updates.

**q(fₙ) given q(f̄)** is the *tilted* distribution

    q(fₙ) = p(yₙ | fₙ) N(fₙ | μₙ, β⁻¹) / Zₙ,    Zₙ = ∫ p(yₙ | f) N(f | μₙ, β⁻¹) df,

with μₙ the mean of q(f̄ₙ). Its moments are derivatives of log Zₙ in μₙ, gₙ = ∂ log Zₙ and
hₙ = ∂² log Zₙ:

    ⟨fₙ⟩ = μₙ + gₙ / β,      Var[fₙ] = β⁻¹ + hₙ / β².

Zₙ is ``likelihood.predict_log_density`` at mean μₙ and variance β⁻¹ where GPflow has it in
closed form (``Gaussian``, the probit ``Bernoulli()``), Gauss–Hermite quadrature of the stable
log σ(y f) for the logit, and for every other scalar likelihood Gauss–Hermite quadrature centred
on the tilted distribution itself (:func:`tilted_log_normaliser`). :func:`tilted_moments`
differentiates it automatically.

**q(f̄) given q(fₙ)** is GP regression on the pseudo-targets ⟨fₙ⟩ with noise variance β⁻¹. The
site on f̄ₙ is point n's whole contribution to the bound at the stored q(fₙ), a quadratic in f̄ₙ:

    E_q(fₙ)[log p(yₙ | fₙ) + log N(fₙ | f̄ₙ, β⁻¹) − log q(fₙ)]
      = log N(⟨fₙ⟩ | f̄ₙ, β⁻¹) − β Var[fₙ]/2 + E_q(fₙ)[log p(yₙ | fₙ)] + H[q(fₙ)]
      ≤ log ∫ p(yₙ | f) N(f | f̄ₙ, β⁻¹) df                                        (Jensen),

so b = β⟨fₙ⟩, w = β and a = log N(⟨fₙ⟩ | 0, β⁻¹) plus the local term, free of the kernel,
E_q(fₙ)[log p(yₙ | fₙ)] + H[q(fₙ)] − β Var[fₙ]/2 (:func:`ppa_sites`). Both of the paper's bounds
on log p(y) are then the shared Gaussian algebra of these sites and nothing else. At the tilted
q(fₙ) the local term is log Zₙ + ½ log(2π/β) + gₙ²/(2β) per point (:func:`local_terms`; the first
two of its terms alone, :func:`tilted_evidence`, are log Zₙ + ½ log(2π/β) + ½ + (gₙ² + hₙ)/(2β)).

**The E-step as an optimisation.** Maximised over q(fₙ), point n's term is log Zₙ(m̄ₙ) − β Var[f̄ₙ]/2
with m̄ the mean of q(f̄), so the E-steps' fixed point has the mean that maximises
Σₙ log Zₙ(m̄ₙ) + log p(f̄ = m̄). The paper's update (the sites above, w = β) is Newton's method on
that function with the curvature −hₙ replaced by its bound β (hₙ ≥ −β, as Var[fₙ] ≥ 0): it never
lowers the bound and is slow where −hₙ ≪ β. The Taylor sites of log Zₙ at the cavity mean make it
Newton's method itself, with the same fixed point (:func:`newton_sites`,
:meth:`~gpflow_fastvi.KLCorrected._step_rule`).
"""

import math
from typing import Callable, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from ..numerical_checks import checked_finite, checked_positive
from ..types import Sites
from .taylor import LogDensity, log_density_derivatives

LogNormaliser = Callable[[tf.Tensor], tf.Tensor]
"""μ [N, L] ↦ log Zₙₗ(μₙₗ) [N, L]: the log normalisers of the tilted distributions at cavity means
μ, one per point and output (the outputs are independent given their latent functions)."""


@check_shapes(
    "f_mean: [N, L]",
    "f_var: [N, L]",
    "evidence: [N, L]",
    "beta: []",
    "return.a: [N, L]",
    "return.b: [N, L]",
    "return.w: [N, L]",
)
def ppa_sites(f_mean: tf.Tensor, f_var: tf.Tensor, evidence: tf.Tensor, beta: tf.Tensor) -> Sites:
    """
    The sites on f̄ of points whose q(fₙ) has mean ``f_mean``, variance ``f_var`` and
    E_q[log p(yₙ | fₙ)] + H[q(fₙ)] = ``evidence`` (see the module docstring):
    a + b f̄ − w f̄²/2 = log N(⟨fₙ⟩ | f̄ₙ, β⁻¹) + evidence − β Var[fₙ]/2.
    """
    w = beta * tf.ones_like(f_mean)
    b = beta * f_mean
    log_normal = 0.5 * tf.math.log(beta / (2.0 * math.pi)) - 0.5 * beta * tf.square(f_mean)
    return Sites(a=log_normal + evidence - 0.5 * beta * f_var, b=b, w=w)


TILTED_POINTS = 32
"""Gauss–Hermite points of :func:`tilted_log_normaliser`: on Poisson counts of 0 to 100 at cavity
means of −2 to 3 and β of 0.2 to 5, log Z and the tilted moments to a median relative error of
10⁻¹², and 10⁻⁴ at worst (a zero count below a cavity of standard deviation 2.2, whose tilted
distribution is half a Gaussian); 20 points gave 10⁻⁸ and 6·10⁻⁴."""

MODE_STEPS = 20
"""Newton steps to the tilted distribution's mode in :func:`tilted_log_normaliser`."""


def tilted_log_normaliser(log_density: LogDensity, beta: tf.Tensor) -> LogNormaliser:
    r"""
    μ ↦ log Zₙ(μₙ) = log ∫ p(yₙ | f) N(f | μₙ, β⁻¹) df by Gauss–Hermite quadrature centred on
    the tilted distribution rather than on the cavity N(μₙ, β⁻¹). ``log_density`` maps F [N, L]
    to log p(yₙₗ | Fₙₗ) [N, L] elementwise, and F [K, N, L] to [K, N, L] by broadcasting, as
    GPflow's quadrature calls a scalar likelihood.

    Quadrature against the cavity, as GPflow's ``predict_log_density`` does it, places its points
    where the cavity has its mass; a count of 14 under a Poisson likelihood has its mass in a
    window of width 0.3 about log 14, between two of the 20 points of a unit cavity at 0, and the
    tilted variance read off that rule came out negative. Here the points are those of the
    Gaussian N(f*, s²) fitted to the tilted density at its mode f* (Laplace's), and the rule
    integrates the ratio of the tilted density to that Gaussian, which is exactly constant where
    the tilted distribution is Gaussian:

        Zₙ = E_N(f*, s²)[p(yₙ | f) N(f | μₙ, β⁻¹) / N(f | f*, s²)].

    The mode is found by Newton's method on log p(yₙ | f) − β (f − μₙ)²/2, concave for the
    log-concave likelihoods the model takes, with each step kept within two cavity standard
    deviations (a count far from μ, whose first step would overshoot the mode by exp-many
    units). f* and s are held fixed in the derivatives of log Zₙ in μₙ: any centre gives a valid
    rule, and μ then enters through the Gaussian density alone.
    """
    points, weights = np.polynomial.hermite_e.hermegauss(TILTED_POINTS)  # weight e^(−z²/2)
    log_weights = np.log(weights / math.sqrt(2.0 * math.pi))  # E_N(0, 1)[·] = Σ_k w_k ·(z_k)
    cavity_sd = tf.math.rsqrt(beta)

    def curvature_and_slope(F: tf.Tensor, mu: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        _, g, h = log_density_derivatives(log_density, F)
        return beta - h, g - beta * (F - mu)  # −φ''(F) > 0 and φ'(F)

    def log_Z(cavity_mean: tf.Tensor) -> tf.Tensor:
        mu = tf.stop_gradient(cavity_mean)
        reach = 2.0 * cavity_sd

        def newton_step(step: tf.Tensor, F: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
            precision, slope = curvature_and_slope(F, mu)
            return step + 1, F + tf.clip_by_value(slope / precision, -reach, reach)

        _, mode = tf.while_loop(
            lambda step, F: step < MODE_STEPS, newton_step, (tf.constant(0), mu)
        )
        precision, _ = curvature_and_slope(mode, mu)
        scale = tf.math.rsqrt(precision)  # s = (−φ''(f*))^(−1/2)
        mode, scale = tf.stop_gradient(mode), tf.stop_gradient(scale)
        z = tf.constant(points, dtype=mu.dtype)[:, None, None]  # [K, 1, 1]
        F = mode + scale * z  # [K, N, L], broadcast against X and Y as GPflow's quadrature does
        log_cavity = -0.5 * tf.square((F - cavity_mean) / cavity_sd) - tf.math.log(cavity_sd)
        log_fitted = -0.5 * tf.square(z) - tf.math.log(scale)  # the 1/√(2π) of both cancel
        log_w = tf.constant(log_weights, dtype=mu.dtype)[:, None, None]
        log_terms = log_w + log_density(F) + log_cavity - log_fitted  # [K, N, L]
        return tf.reduce_logsumexp(log_terms, axis=0)

    return log_Z


@check_shapes(
    "cavity_mean: [N, L]",
    "beta: []",
    "return[0]: [N, L]",
    "return[1]: [N, L]",
    "return[2]: [N, L]",
)
def tilted_moments(
    log_normaliser: LogNormaliser,
    cavity_mean: tf.Tensor,
    beta: tf.Tensor,
    *,
    name: str = "likelihood",
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """
    The E-step for q(fₙ): log Zₙ, ⟨fₙ⟩ and Var[fₙ] of q(fₙ) ∝ p(yₙ | fₙ) N(fₙ | μₙ, β⁻¹), from the
    first two derivatives of ``log_normaliser`` at ``cavity_mean`` = μ.

    :param name: the likelihood's name, for the error raised when a moment is not finite or a
        variance is not positive.
    """
    log_Z, g, h = log_density_derivatives(log_normaliser, cavity_mean)
    f_mean = cavity_mean + g / beta
    f_var = 1.0 / beta + h / tf.square(beta)
    checked = checked_finite(
        tf.stack([log_Z, f_mean, f_var]),
        f"log Z or the moments of the tilted distributions p(y | f) N(f | mu, 1/beta) / Z of {name} "
        "are not finite: the likelihood underflows at some of the current posterior means.",
    )
    log_Z, f_mean, f_var = tf.unstack(checked)
    f_var = checked_positive(
        f_var,
        f"A tilted distribution p(y | f) N(f | mu, 1/beta) / Z of {name} has a variance "
        "<= 0: the quadrature for Z is too coarse for the current beta (raise the "
        "likelihood's num_gauss_hermite_points) or beta is extreme.",
    )
    return log_Z, f_mean, f_var


@check_shapes(
    "log_Z: [N, L]",
    "cavity_mean: [N, L]",
    "f_mean: [N, L]",
    "f_var: [N, L]",
    "beta: []",
    "return: [N, L]",
)
def tilted_evidence(
    log_Z: tf.Tensor, cavity_mean: tf.Tensor, f_mean: tf.Tensor, f_var: tf.Tensor, beta: tf.Tensor
) -> tf.Tensor:
    """
    E_q(fₙ)[log p(yₙ | fₙ)] + H[q(fₙ)] for the tilted q(fₙ) with cavity N(μₙ, β⁻¹):

        log Zₙ − E_q(fₙ)[log N(fₙ | μₙ, β⁻¹)] = log Zₙ + ½ log(2π/β) + β ((⟨fₙ⟩ − μₙ)² + Var[fₙ]) / 2.
    """
    spread = tf.square(f_mean - cavity_mean) + f_var
    return log_Z + 0.5 * tf.math.log(2.0 * math.pi / beta) + 0.5 * beta * spread


@check_shapes("f_var: [N, L]", "evidence: [N, L]", "beta: []", "return: []")
def local_terms(f_var: tf.Tensor, evidence: tf.Tensor, beta: tf.Tensor) -> tf.Tensor:
    """
    Σₙ (E_q(fₙ)[log p(yₙ | fₙ)] + H[q(fₙ)] − β Var[fₙ] / 2): the part of the sites' constants
    :func:`ppa_sites` that the kernel does not touch; β enters through the last term only, as
    q(fₙ) is held fixed while the hyperparameters move.
    """
    return tf.reduce_sum(evidence) - 0.5 * beta * tf.reduce_sum(f_var)


@check_shapes(
    "f_mean: [N, L]",
    "f_var: [N, L]",
    "evidence: [N, L]",
    "cavity_mean: [N, L]",
    "beta: []",
    "return.a: [N, L]",
    "return.b: [N, L]",
    "return.w: [N, L]",
)
def newton_sites(
    f_mean: tf.Tensor,
    f_var: tf.Tensor,
    evidence: tf.Tensor,
    cavity_mean: tf.Tensor,
    beta: tf.Tensor,
) -> Sites:
    """
    The Taylor sites of log Zₙ at the cavity mean cₙ (those of
    :func:`~gpflow_fastvi.sites.taylor.taylor_sites`), read off the tilted q(fₙ) that
    :func:`tilted_moments` and :func:`tilted_evidence` made at cₙ, so no derivative is taken again:

        gₙ = β (⟨fₙ⟩ − cₙ),    −hₙ = β − β² Var[fₙ],

    and log Zₙ from the evidence, which :func:`tilted_evidence` makes log Zₙ plus terms free of
    it. Exact when ``beta`` is the β the moments were made with;
    where it is not (β trained since), the step they give is a quasi-Newton step. The curvature is
    clipped at 0 as in the Taylor sites (a likelihood that is not log-concave).
    """
    g = beta * (f_mean - cavity_mean)
    w = tf.maximum(beta - tf.square(beta) * f_var, 0.0)
    log_Z = evidence - tilted_evidence(tf.zeros_like(evidence), cavity_mean, f_mean, f_var, beta)
    a = log_Z - g * cavity_mean - 0.5 * w * tf.square(cavity_mean)
    return Sites(a=a, b=g + w * cavity_mean, w=w)
