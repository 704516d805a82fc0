"""
Jaakkola–Jordan sites for the logistic likelihood, a lower bound for every ξ
(:cite:t:`jaakkola1997variational`; used for GP classification by :cite:t:`izmailov2017faster`, eqs. 12–15).

For t = y f with y ∈ {−1, +1},

    log σ(t) ≥ log σ(ξ) + (t − ξ)/2 − λ(ξ) (t² − ξ²),    λ(ξ) = tanh(ξ/2) / (4ξ),

with equality at t = ±ξ. As a Gaussian site a + b f − w f²/2 (y² = 1):

    a = log σ(ξ) − ξ/2 + λ(ξ) ξ² = −log(2 cosh(ξ/2)) + λ(ξ) ξ²,   b = y/2,   w = 2 λ(ξ).

The bound is even in ξ, and for a Gaussian q(f) its expectation is maximised by ξ² = E_q[f²].

Paper 000 prints λ(ξ) = tanh(ξ)/(4ξ); that is a slip, the bound needs tanh(ξ/2)/(4ξ).
"""

from typing import Callable

import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites

_SMALL_XI = 1e-4
"""Below this |ξ| the Taylor series λ(ξ) = 1/8 − ξ²/96 + O(ξ⁴) is exact to double precision."""


@check_shapes("xi: [broadcast N...]", "return: [N...]")
def jj_lambda(xi: tf.Tensor) -> tf.Tensor:
    """
    λ(ξ) = tanh(ξ/2) / (4ξ) = (σ(ξ) − ½) / (2ξ), with its limit λ(0) = 1/8.

    Uses the series 1/8 − ξ²/96 near 0, so that the value and its gradient stay finite there.
    """
    small = tf.abs(xi) < _SMALL_XI
    safe_xi = tf.where(small, tf.ones_like(xi), xi)  # keeps the unused branch free of 0/0
    series = 0.125 - tf.square(xi) / 96.0
    return tf.where(small, series, tf.tanh(0.5 * safe_xi) / (4.0 * safe_xi))


@check_shapes("x: [broadcast N...]", "return: [N...]")
def log_2cosh(x: tf.Tensor) -> tf.Tensor:
    """``log(2 cosh x) = |x| + log(1 + exp(−2|x|))``, without overflow for large ``|x|``."""
    abs_x = tf.abs(x)
    return abs_x + tf.math.softplus(-2.0 * abs_x)


@check_shapes(
    "t: [broadcast N...]",
    "xi: [broadcast N...]",
    "return: [N...]",
)
def jj_log_sigmoid_bound(
    t: tf.Tensor, xi: tf.Tensor, lambda_fn: Callable[[tf.Tensor], tf.Tensor] = jj_lambda
) -> tf.Tensor:
    """
    The Jaakkola–Jordan lower bound on log σ(t) with parameter ξ, pointwise.

    :param lambda_fn: the coefficient λ(ξ). The default is the correct one; the argument exists so
        that tests can show that the misprinted tanh(ξ)/(4ξ) does not give a bound.
    """
    return tf.math.log_sigmoid(xi) + 0.5 * (t - xi) - lambda_fn(xi) * (tf.square(t) - tf.square(xi))


@check_shapes(
    "Y: [N, L]", "xi: [N, L]", "return[0]: [N, L]", "return[1]: [N, L]", "return[2]: [N, L]"
)
def jj_sites(Y: tf.Tensor, xi: tf.Tensor) -> Sites:
    """
    Jaakkola–Jordan sites (a, b, w) for signed labels ``Y`` ∈ {−1, +1} and parameters ``xi``.

    Summed over points, a + b f − w f²/2 is a lower bound on Σ log σ(yᵢ fᵢ) for every f and ξ.
    """
    lam = jj_lambda(xi)
    a = -log_2cosh(0.5 * xi) + lam * tf.square(xi)  # log σ(ξ) − ξ/2 + λ(ξ) ξ²
    b = 0.5 * Y
    w = 2.0 * lam
    return Sites(a=a, b=b, w=w)


@check_shapes("Fmu: [N, L]", "Fvar: [N, L]", "return: [N, L]")
def jj_optimal_xi(Fmu: tf.Tensor, Fvar: tf.Tensor) -> tf.Tensor:
    """The ξ that maximises E_q[bound] for q(f) = N(Fmu, Fvar): ξ = √(E_q[f²]) = √(Fmu² + Fvar)."""
    return tf.sqrt(tf.square(Fmu) + Fvar)
