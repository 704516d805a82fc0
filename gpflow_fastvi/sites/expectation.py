"""
Sites of the expected log-likelihood (:cite:t:`khan2012fast`): the Gaussian site that touches
fᵦ(yᵢ, mᵢ, vᵢ) = E_{N(fᵢ | mᵢ, vᵢ)}[log p(yᵢ | fᵢ)] to first order in the marginal (mᵢ, vᵢ).

The paper's concave bound is the standard variational bound with V = (K⁻¹ + diag λ)⁻¹; at its
optimum λᵢ = −2 ∂fᵦ/∂vᵢ. In the language of sites that is the site precision, and the whole site
is

    w = −2 ∂fᵦ/∂v,     b = ∂fᵦ/∂m + w m,     a = fᵦ − b m + w (m² + v)/2,

so that E_q[a + b f − w f²/2] = a + b m − w (m² + v)/2 equals fᵦ at (m, v) with the same first
derivatives in m and v. The optimal q for these sites is the conjugate-computation step of
Khan & Lin (a natural-gradient step of size one on the standard ELBO); at its fixed point q is the
optimum of the ELBO itself. By Bonnet's and Price's theorems w = −E_q[∂² log p] and
∂fᵦ/∂m = E_q[∂ log p]: the Taylor site of :mod:`~gpflow_fastvi.sites.taylor`, averaged over q(f)
instead of taken at its mean.

fᵦ is the likelihood's own ``variational_expectations`` (closed form for Poisson with the
exponential link and for the Gaussian, Gauss–Hermite quadrature otherwise), differentiated
automatically. For a log-concave likelihood fᵦ is jointly concave in (m, v) and w ≥ 0; where
quadrature rounding makes w slightly negative it is set to 0, as for Taylor sites.
"""

from typing import Callable, Tuple

import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites

ExpectedLogDensity = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
"""(m [N, 1], v [N, 1]) ↦ fᵦ(yᵢ, mᵢ, vᵢ) = E_{N(mᵢ, vᵢ)}[log p(yᵢ | fᵢ)] [N], at fixed targets."""


@check_shapes(
    "m: [N, 1]",
    "v: [N, 1]",
    "return[0]: [N, 1]",
    "return[1]: [N, 1]",
    "return[2]: [N, 1]",
)
def expected_log_density_gradient(
    expected: ExpectedLogDensity, m: tf.Tensor, v: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """
    fᵦ at (m, v) and its derivatives in mᵢ and vᵢ. fᵦ factorises over points, so one gradient of
    the sum gives every point's own derivatives.
    """
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([m, v])
        f_b = expected(m, v)  # [N]
        total = tf.reduce_sum(f_b)
    dm, dv = tape.gradient(total, [m, v])
    return f_b[:, None], dm, dv


@check_shapes("m: [N, 1]", "v: [N, 1]", "return.a: [N, 1]", "return.b: [N, 1]", "return.w: [N, 1]")
def expectation_sites(
    expected: ExpectedLogDensity, m: tf.Tensor, v: tf.Tensor, *, name: str = "likelihood"
) -> Sites:
    """
    The sites (a, b, w) of the module docstring at the marginals q(fᵢ) = N(mᵢ, vᵢ).

    :param name: the likelihood's name, for the error raised where fᵦ or its gradient is not
        finite.
    """
    f_b, dm, dv = expected_log_density_gradient(expected, m, v)
    coefficients = tf.debugging.assert_all_finite(
        tf.concat([f_b, dm, dv], axis=1),
        f"The expected log-density of {name} or its gradient is not finite at some marginal "
        "q(f) of the current posterior (the likelihood underflows there); check the data or the "
        "kernel variance.",
    )
    f_b, dm, dv = tf.split(coefficients, 3, axis=1)
    w = tf.maximum(-2.0 * dv, 0.0)
    b = dm + w * m
    a = f_b - b * m + 0.5 * w * (tf.square(m) + v)
    return Sites(a=a, b=b, w=w)
