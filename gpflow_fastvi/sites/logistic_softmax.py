"""
Per-class sites for the logistic-softmax likelihood of C classes (:cite:t:`galyfajou2020multiclass`),

    p(y = k | f) = σ(f_k) / Σ_c σ(f_c),

made conditionally Gaussian in each f_c by three augmentations of each point:

1. 1/S = ∫₀^∞ exp(−λ S) dλ with S = Σ_c σ(f_c): p(y = k, λ | f) = σ(f_k) exp(−λ S), λ > 0 under
   Lebesgue measure;
2. exp(−λ σ(f)) = exp(−λ) exp(λ σ(−f)) = Σ_n Po(n | λ) σ(−f)ⁿ: a Poisson count n_c per class;
3. σ(f)^y σ(−f)ⁿ = 2^−(y+n) exp((y − n) f/2) cosh(f/2)^−(y+n), and
   cosh(f/2)^−b = ∫ exp(−ω f²/2) PG(ω | b, 0) dω: a Pólya-Gamma ω_c ~ PG(y_c + n_c, 0) per class,

with y_c = 1 if y = c, else 0. Under the mean-field family q(λ) = Ga(α, C) (shape, rate),
q(n_c) = Po(γ_c) and q(ω_c | n_c) = PG(y_c + n_c, c_c), the ELBO of a point is, for each class, a
Gaussian site in f_c,

    a_c + b_c f_c − w_c f_c²/2,     b_c = (y_c − γ_c)/2,     w_c = (y_c + γ_c) tanh(c_c/2)/(2 c_c),
    a_c = −(y_c + γ_c) log(2 cosh(c_c/2)) + w_c c_c²/2  (+ the point's own term below, shared out),

which is (y_c + γ_c) times the Pólya-Gamma site of :mod:`~gpflow_fastvi.sites.polya_gamma`, plus
terms of λ and n that do not involve f:

    H[Ga(α, C)] + Σ_c γ_c (ψ(α) − log C) − α − Σ_c (γ_c log γ_c − γ_c),

the expected log-Poisson masses (the log n! of the Poisson prior and of q(n) cancel), the entropy
of q(λ) and its expected rate. Each is split evenly over the point's C sites, so that Σ_c a_c
carries it.

The optimal local parameters for q(f_c) = N(μ_c, σ_c²) (each update is closed form, as in the
paper's coordinate ascent) are

    c_c = √(μ_c² + σ_c²),      γ_c = exp(ψ(α) − log C) κ_c,  κ_c = e^(−μ_c/2) / (2 cosh(c_c/2)),
    α = 1 + Σ_c γ_c.

γ and α depend on each other: α solves α = 1 + e^ψ(α) κ̄ with κ̄ = Σ_c κ_c / C. Since c_c² ≥ μ_c²,
κ_c < 1; and the slope of e^ψ(α) lies in [0.92, 1) for α ≥ 1 (it tends to 1 as e^ψ(α) tends to
α − ½), so h(α) = 1 + e^ψ(α) κ̄ − α is positive at α = 1 and decreasing: the root is unique; :func:`ls_optimal_locals` finds it by Newton's method per point, where the
paper's sweeps of coordinate ascent carry α from one pass to the next. The sites are then those
of the joint optimum of the point's local parameters for q(f), as the binary models' are.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites
from .jaakkola_jordan import log_2cosh
from .polya_gamma import pg_kl, pg_mean

NEWTON_STEPS = 6
"""Newton steps on α = 1 + e^ψ(α) κ̄ from the start of :func:`_alpha_start`, a few per cent off at
worst; six agree with SciPy's root to 3·10⁻¹² (relative) for κ̄ from 10⁻⁸ to 1 − 10⁻⁴, which the
tests check."""


class LogisticSoftmaxLocals(NamedTuple):
    """The local variational parameters of the logistic-softmax augmentation, per point."""

    alpha: tf.Tensor
    """Shape α of q(λᵢ) = Ga(α, C), [N, 1]; its rate is C."""
    gamma: tf.Tensor
    """Rates γ of q(n_ic) = Po(γ_ic), [N, C]."""
    c: tf.Tensor
    """Tilts c of q(ω_ic | n_ic) = PG(y_ic + n_ic, c_ic), [N, C]."""


@check_shapes("kappa_bar: [N, 1]", "return: [N, 1]")
def _alpha_start(kappa_bar: tf.Tensor) -> tf.Tensor:
    """The root of α = 1 + (α − ½) κ̄, where e^ψ(α) ≈ α − ½ as for large α: (1 − κ̄/2)/(1 − κ̄)."""
    return (1.0 - 0.5 * kappa_bar) / (1.0 - kappa_bar)


@check_shapes("kappa_bar: [N, 1]", "return: [N, 1]")
def ls_alpha(kappa_bar: tf.Tensor) -> tf.Tensor:
    """
    The shape α of the optimal q(λ) = Ga(α, C), the root of h(α) = 1 + e^ψ(α) κ̄ − α for
    κ̄ = Σ_c κ_c / C in (0, 1) (module docstring), by :data:`NEWTON_STEPS` Newton steps; h is
    positive at α = 1 and decreasing, so the root is above 1 and unique. No gradient flows
    through the steps: the bound is stationary in α at its root.
    """
    kappa_bar = tf.stop_gradient(kappa_bar)
    alpha = _alpha_start(kappa_bar)
    for _ in range(NEWTON_STEPS):
        e_psi = tf.exp(tf.math.digamma(alpha))
        h = 1.0 + e_psi * kappa_bar - alpha
        slope = e_psi * tf.math.polygamma(tf.ones_like(alpha), alpha) * kappa_bar - 1.0
        alpha = tf.maximum(alpha - h / slope, 1.0)
    return alpha


@check_shapes(
    "Fmu: [N, C]",
    "Fvar: [N, C]",
    "return.alpha: [N, 1]",
    "return.gamma: [N, C]",
    "return.c: [N, C]",
)
def ls_optimal_locals(Fmu: tf.Tensor, Fvar: tf.Tensor) -> LogisticSoftmaxLocals:
    """
    The local parameters (α, γ, c) that maximise the augmented ELBO of each point for
    q(f_ic) = N(Fmu_ic, Fvar_ic) (module docstring); they do not depend on the label, which
    enters the sites only.
    """
    C = tf.cast(tf.shape(Fmu)[-1], Fmu.dtype)
    c = tf.sqrt(tf.square(Fmu) + Fvar)
    log_kappa = -0.5 * Fmu - log_2cosh(0.5 * c)  # < 0, as c ≥ |μ|: no overflow for any μ
    kappa_bar = tf.reduce_mean(tf.exp(log_kappa), axis=-1, keepdims=True)
    alpha = ls_alpha(kappa_bar)
    gamma = tf.exp(tf.math.digamma(alpha) - tf.math.log(C) + log_kappa)
    return LogisticSoftmaxLocals(alpha=alpha, gamma=gamma, c=c)


@check_shapes(
    "Y: [N, C]",
    "locals.alpha: [N, 1]",
    "locals.gamma: [N, C]",
    "locals.c: [N, C]",
    "return.a: [N, C]",
    "return.b: [N, C]",
    "return.w: [N, C]",
)
def ls_sites(Y: tf.Tensor, locals: LogisticSoftmaxLocals) -> Sites:
    """
    The per-class Gaussian sites (a, b, w) of the augmented logistic-softmax ELBO for one-hot
    labels ``Y`` [N, C] and the local parameters ``locals``; for every q(f) and every locals,
    Σ_c E_q[a_c + b_c f_c − w_c f_c²/2] ≤ E_q[log p(y | f)], with equality in the augmented
    sense at :func:`ls_optimal_locals`.
    """
    alpha, gamma, c = locals
    C = tf.cast(tf.shape(Y)[-1], Y.dtype)
    count = Y + gamma  # y_c + E[n_c], the Pólya-Gamma shape in expectation
    w = count * pg_mean(c)
    # Per unit of count, the binary Pólya-Gamma site's constant: −log 2 − KL[PG(1, c) ‖ PG(1, 0)].
    a_class = -count * (np.log(2.0) + pg_kl(c))
    log_rate = tf.math.log(C)
    expected_log_lambda = tf.math.digamma(alpha) - log_rate
    gamma_entropy = (
        alpha - log_rate + tf.math.lgamma(alpha) + (1.0 - alpha) * tf.math.digamma(alpha)
    )
    point = (
        gamma_entropy
        + tf.reduce_sum(gamma, axis=-1, keepdims=True) * expected_log_lambda
        - alpha  # C classes × E[λ] = α / C
        - tf.reduce_sum(tf.math.xlogy(gamma, gamma) - gamma, axis=-1, keepdims=True)
    )
    return Sites(a=a_class + point / C, b=0.5 * (Y - gamma), w=w)


__all__ = [
    "LogisticSoftmaxLocals",
    "ls_alpha",
    "ls_optimal_locals",
    "ls_sites",
]
