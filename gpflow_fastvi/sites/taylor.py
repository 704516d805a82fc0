"""
Taylor sites: the log-likelihood expanded to second order at ξᵢ (:cite:t:`izmailov2017faster`,
eqs. 16–19), for any GPflow likelihood that factorises over points.

With gᵢ and hᵢ the first and second derivatives of log p(yᵢ | f) at f = ξᵢ,

    log p(yᵢ | fᵢ) ≈ log p(yᵢ | ξᵢ) + gᵢ (fᵢ − ξᵢ) + ½ hᵢ (fᵢ − ξᵢ)²,

a Gaussian site a + b f − w f²/2 with

    w = −h,     b = g + w ξ,     a = log p(y | ξ) − g ξ − w ξ²/2.

The paper writes the curvature as ψ(ξ) = −h/2 and B = Kmm + 2 Kmn Ψ Knm, so its 2Ψ is our W, and its
v(ξ) = φ(ξ) + 2 Ψ ξ is our b (φ = g). g and h come from automatic differentiation of
``likelihood.log_prob``; ξᵢ is set to the current mean of q(fᵢ). This is an approximation, not a
bound: the expansion is exact only for a Gaussian likelihood.

Curvature safeguards. The collapsed algebra needs w ≥ 0, i.e. a log-concave likelihood at ξ
(:class:`~gpflow_fastvi.VITaylor` refuses Student-t and Beta, which are not). Where h > 0 all the
same (GPflow's probit link 10⁻³ + (1 − 2·10⁻³) Φ(f), whose offset bends log p upwards for
y f ≲ −2.44), w is set to 0: the site keeps the slope g but no curvature.

Given a ceiling c on log p(yᵢ | f) over all f (0 for a likelihood of a discrete variable,
:func:`~gpflow_fastvi.likelihoods.log_density_ceiling`), the curvature is also raised to

    w ≥ g² / (2 (c − log p(y | ξ))),

the least curvature at which the quadratic, whose peak is log p(y | ξ) + g²/(2w), stays at or
below c. Without it, a point far on the wrong side of a logit boundary (y ξ → −∞) has a slope
g → 1, a curvature w = σ(ξ)σ(−ξ) → 0, and a quadratic that promises a log-likelihood of about
e^|yξ|/2 > 0 as its f is moved towards its label: summed into the collapsed objective, such
promises grow with the kernel variance without limit, and the objective is no longer
bounded by log p(y) ≤ 0 (on a nearly separable set it ran to +10¹³² while the hyperparameters
ran to 10¹²²). With every site at or below c, the collapsed objective is at most N c, the
ceiling of log p(y) itself. The floor matches the expansion's value and slope at ξ and changes
only points the current q(f) puts on the wrong side: the logit expansion peaks at
log σ(yξ) + σ(−yξ)/(2σ(yξ)), which is below 0 for y ξ > −0.92; only below that does the floor
bend the quadratic down, trading the expansion's curvature at ξ for a peak no higher than the
likelihood's own.

Non-finite values of log p, g or h (a log-density computed as log(1 − p) with p rounding to 1 far
from the data, for example) raise ``tf.errors.InvalidArgumentError`` naming the likelihood;
:class:`~gpflow_fastvi.VITaylor` passes the logit Bernoulli in the stable form log σ(y f), which
is finite everywhere.
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites

LogDensity = Callable[[tf.Tensor], tf.Tensor]
"""f [N, 1] ↦ log p(yᵢ | fᵢ) [N]: a factorising log-likelihood at fixed targets."""


@check_shapes("xi: [N, 1]", "return[0]: [N, 1]", "return[1]: [N, 1]", "return[2]: [N, 1]")
def log_density_derivatives(
    log_density: LogDensity, xi: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """
    log p(yᵢ | ξᵢ) and its first and second derivatives in ξᵢ, by nested automatic differentiation.
    As the log-likelihood factorises, ∂/∂ξᵢ Σⱼ log p(yⱼ | ξⱼ) is the i-th derivative and the Hessian
    is diagonal, so one gradient of the sum of first derivatives gives every second derivative.
    """
    with tf.GradientTape(watch_accessed_variables=False) as outer:
        outer.watch(xi)
        with tf.GradientTape(watch_accessed_variables=False) as inner:
            inner.watch(xi)
            log_p = log_density(xi)  # [N]
            total = tf.reduce_sum(log_p)  # summed on the tape, or the tape would not see it
        g = inner.gradient(total, xi)  # [N, 1]
        sum_g = tf.reduce_sum(g)
    h = outer.gradient(sum_g, xi)  # [N, 1]
    return log_p[:, None], g, h


@check_shapes("xi: [N, 1]", "return[0]: [N, 1]", "return[1]: [N, 1]", "return[2]: [N, 1]")
def taylor_sites(
    log_density: LogDensity,
    xi: tf.Tensor,
    *,
    ceiling: Optional[float] = None,
    name: str = "likelihood",
) -> Sites:
    """
    Taylor sites (a, b, w) of ``log_density`` expanded at ``xi``, with the curvature safeguards of
    the module docstring.

    :param ceiling: an upper bound c on ``log_density`` over all f, if one is known: the
        curvature is then raised where needed so that no site's peak exceeds c.
    :param name: the likelihood's name, for the error raised on non-finite derivatives.
    """
    log_p, g, h = log_density_derivatives(log_density, xi)
    coefficients = tf.debugging.assert_all_finite(
        tf.concat([log_p, g, h], axis=1),
        f"The log-density of {name} or its first two derivatives is not finite at some expansion "
        "point ξ (the current posterior mean of f). The likelihood underflows there (for example "
        "log(1 - p) with p rounding to 1); check the data or the kernel variance.",
    )
    log_p, g, h = tf.split(coefficients, 3, axis=1)  # works where N is unknown at trace time
    w = tf.maximum(-h, 0.0)  # w ≥ 0
    if ceiling is not None:  # peak log p + g²/(2w) ≤ c; no floor where log p is at c (then g = 0)
        headroom = tf.maximum(tf.cast(ceiling, log_p.dtype) - log_p, 0.0)
        w = tf.maximum(w, tf.math.divide_no_nan(tf.square(g), 2.0 * headroom))
    b = g + w * xi
    a = log_p - g * xi - 0.5 * w * tf.square(xi)
    return Sites(a=a, b=b, w=w)
