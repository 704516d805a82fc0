"""
Pólya-Gamma sites for the logistic likelihood (:cite:t:`wenzel2019efficient`).

With ω ~ PG(1, 0), σ(t) = ½ ∫ exp(t/2 − t² ω/2) PG(ω | 1, 0) dω, so for t = y f (y ∈ {−1, +1})
the augmented likelihood is Gaussian in f. Under q(ωᵢ) = PG(1, cᵢ), whose density is
cosh(c/2) exp(−c² ω/2) PG(ω | 1, 0),

    E_q(ω)[log p(y | f, ω)] − KL[q(ω) ‖ p(ω)] = −log 2 + y f/2 − E[ω] f²/2 − KL(c),
    E[ω] = tanh(c/2) / (2c),        KL(c) = log cosh(c/2) − c² E[ω] / 2,

a Gaussian site a + b f − w f²/2 with

    a = −log 2 − KL(c),     b = y/2,     w = E[ω].

For every c this is the Jaakkola–Jordan site with ξ = c (E[ω] = 2λ(c)): the Pólya-Gamma ELBO *is*
the Jaakkola–Jordan bound, which the tests check number for number. The optimal q(ωᵢ) for
q(fᵢ) = N(μᵢ, σᵢ²) has cᵢ = √(μᵢ² + σᵢ²).
"""

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites
from .jaakkola_jordan import jj_lambda, log_2cosh


@check_shapes("c: [broadcast N...]", "return: [N...]")
def pg_mean(c: tf.Tensor) -> tf.Tensor:
    """E[ω] for ω ~ PG(1, c): tanh(c/2)/(2c), with its limit 1/4 at c = 0 (stable near 0)."""
    return 2.0 * jj_lambda(c)


@check_shapes("c: [broadcast N...]", "return: [N...]")
def pg_kl(c: tf.Tensor) -> tf.Tensor:
    """KL[PG(1, c) ‖ PG(1, 0)] = log cosh(c/2) − c² E[ω]/2, computed without overflow."""
    log_cosh = log_2cosh(0.5 * c) - np.log(2.0)
    return log_cosh - 0.5 * tf.square(c) * pg_mean(c)


@check_shapes(
    "Y: [N, L]", "c: [N, L]", "return[0]: [N, L]", "return[1]: [N, L]", "return[2]: [N, L]"
)
def pg_sites(Y: tf.Tensor, c: tf.Tensor) -> Sites:
    """Pólya-Gamma sites (a, b, w) for signed labels ``Y`` ∈ {−1, +1} and q(ω) = PG(1, c)."""
    return Sites(a=-np.log(2.0) - pg_kl(c), b=0.5 * Y, w=pg_mean(c))


@check_shapes("Fmu: [N, L]", "Fvar: [N, L]", "return: [N, L]")
def pg_optimal_c(Fmu: tf.Tensor, Fvar: tf.Tensor) -> tf.Tensor:
    """The c of the optimal q(ω) = PG(1, c) for q(f) = N(Fmu, Fvar): c = √(E_q[f²])."""
    return tf.sqrt(tf.square(Fmu) + Fvar)
