"""
The optimal q(u) for given sites, in closed form, and its marginals at the training points.

In the frame whitened by L = chol(Kmm) (u = L v), the sites make q(v) Gaussian with precision
B = I + A W Aᵀ and mean B⁻¹ A b = LB⁻ᵀ c:

    q(v) = N(LB⁻ᵀ c, B⁻¹),        q(u) = N(L LB⁻ᵀ c, L B⁻¹ Lᵀ),

which is S⁻¹ = Kmm⁻¹ + Kmm⁻¹ Kmn W Knm Kmm⁻¹, μ = S Kmm⁻¹ Kmn b of the design notes.
GPflow stores a covariance as a *lower* triangular square root (``q_sqrt``), while B⁻¹ = LB⁻ᵀ LB⁻¹ comes
with an upper one. With J the exchange matrix (ones on the anti-diagonal), chol(J B J) = P gives the
lower-triangular R = J P⁻ᵀ J with R Rᵀ = J (J B J)⁻¹ J = B⁻¹, using one more Cholesky factor and a
triangular solve, and no inverse of B.
"""

from typing import Tuple

import tensorflow as tf
from check_shapes import check_shapes

from .cholesky import checked_cholesky
from .collapsed import CollapsedFactors
from .statistics import projected_marginals, triangular_inverse


@check_shapes(
    "factors.LB: [M, M]",
    "factors.c: [M, 1]",
    "L: [M, M]",
    "return[0]: [M, 1]",
    "return[1]: [1, M, M]",
)
def optimal_q(factors: CollapsedFactors, L: tf.Tensor, whiten: bool) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    The optimal q(u) as GPflow's ``(q_mu, q_sqrt)`` for a single latent GP.

    :param whiten: return q(v) for u = L v, as :class:`gpflow.models.SVGP` stores it when
        ``whiten=True``; otherwise q(u) itself.
    """
    LB, c = factors
    M = tf.shape(LB)[0]
    q_mu = tf.linalg.triangular_solve(LB, c, lower=True, adjoint=True)  # LB⁻ᵀ c = B⁻¹ A b   [M, 1]
    B = tf.linalg.matmul(LB, LB, transpose_b=True)  # B = LB LBᵀ
    P = checked_cholesky(tf.reverse(B, axis=[0, 1]), what="J B J")  # J B J = P Pᵀ
    P_inv = tf.linalg.triangular_solve(P, tf.eye(M, dtype=B.dtype), lower=True)  # P⁻¹
    q_sqrt = tf.reverse(tf.transpose(P_inv), axis=[0, 1])  # R = J P⁻ᵀ J, lower, R Rᵀ = B⁻¹
    if not whiten:
        q_mu = tf.linalg.matmul(L, q_mu)  # μ = L μᵥ
        q_sqrt = tf.linalg.matmul(L, q_sqrt)  # L R, lower triangular
    return q_mu, q_sqrt[None]


@check_shapes(
    "A: [M, N]",
    "Ktilde_diag: [N]",
    "factors.LB: [M, M]",
    "factors.c: [M, 1]",
    "return[0]: [N, 1]",
    "return[1]: [N, 1]",
)
def optimal_marginals(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, factors: CollapsedFactors
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    Mean and variance of gᵢ under the optimal q(u), at the points whose projection is A = L⁻¹ Kmn
    (:func:`~gpflow_fastvi.gaussian.statistics.projected_marginals` with S = LB⁻¹):

        E[gᵢ] = aᵢᵀ LB⁻ᵀ c,      Var[gᵢ] = K̃ᵢᵢ + ‖LB⁻¹ aᵢ‖²,      K̃ᵢᵢ = Knn,ᵢᵢ − ‖aᵢ‖².
    """
    LB, c = factors
    mean_v = tf.linalg.triangular_solve(LB, c, lower=True, adjoint=True)  # LB⁻ᵀ c
    LB_inv_A = tf.linalg.matmul(triangular_inverse(LB), A)  # LB⁻¹ A, as a product   [M, N]
    return projected_marginals(A, Ktilde_diag, mean_v, LB_inv_A)
