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
from .statistics import (
    latent_batch,
    latent_columns,
    projected_marginals,
    times_shared,
    triangular_inverse,
)


@check_shapes(
    "factors.LB: [L, M, M]",
    "factors.c: [M, L]",
    "return[0]: [M, L]",
    "return[1]: [L, M, M]",
)
def optimal_whitened_q(factors: CollapsedFactors) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    The Gaussians q(v_l) = N(m_l, R_l R_lᵀ) with precisions LB_l LB_lᵀ and means LB_l⁻ᵀ c_l, as
    ``(m [M, L], R [L, M, M])`` with R lower triangular (module docstring).
    """
    LB, c = factors
    M = tf.shape(LB)[-1]
    mean = tf.linalg.triangular_solve(LB, latent_batch(c), lower=True, adjoint=True)  # LB⁻ᵀ c
    B = tf.linalg.matmul(LB, LB, transpose_b=True)  # B = LB LBᵀ
    P = checked_cholesky(tf.reverse(B, axis=[-2, -1]), what="J B J")  # J B J = P Pᵀ
    P_inv = tf.linalg.triangular_solve(P, tf.eye(M, dtype=B.dtype), lower=True)  # P⁻¹
    R = tf.reverse(tf.linalg.matrix_transpose(P_inv), axis=[-2, -1])  # J P⁻ᵀ J, lower
    return latent_columns(mean), R


@check_shapes(
    "factors.LB: [L, M, M]",
    "factors.c: [M, L]",
    "L: [outputs..., M, M]",
    "return[0]: [M, L]",
    "return[1]: [L, M, M]",
)
def optimal_q(factors: CollapsedFactors, L: tf.Tensor, whiten: bool) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    The optimal q(u) of each latent function as GPflow's ``(q_mu [M, L], q_sqrt [L, M, M])``.

    :param whiten: return q(v) for u = L v, as :class:`gpflow.models.SVGP` stores it when
        ``whiten=True``; otherwise q(u) itself.
    """
    q_mu, q_sqrt = optimal_whitened_q(factors)  # B⁻¹ A b and a square root of B⁻¹
    if not whiten:
        q_mu = latent_columns(tf.linalg.matmul(L, latent_batch(q_mu)))  # μ = L μᵥ
        q_sqrt = tf.linalg.matmul(L, q_sqrt)  # L R, lower triangular
    return q_mu, q_sqrt


@check_shapes(
    "A: [outputs..., M, N]",
    "Ktilde_diag: [N, outputs...]",
    "factors.LB: [L, M, M]",
    "factors.c: [M, L]",
    "return[0]: [N, L]",
    "return[1]: [N, L]",
)
def optimal_marginals(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, factors: CollapsedFactors
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    Mean and variance of g_il under the optimal q(u), at the points whose projection is
    A = L⁻¹ Kmn (:func:`~gpflow_fastvi.gaussian.statistics.projected_marginals` with S = LB⁻¹):

        E[g_il] = aᵢᵀ LB_l⁻ᵀ c_l,      Var[g_il] = K̃ᵢᵢ + ‖LB_l⁻¹ aᵢ‖²,      K̃ᵢᵢ = Knn,ᵢᵢ − ‖aᵢ‖².
    """
    LB, c = factors
    mean_v = tf.linalg.triangular_solve(LB, latent_batch(c), lower=True, adjoint=True)  # LB⁻ᵀ c
    LB_inv_A = times_shared(triangular_inverse(LB), A)  # LB⁻¹ A, as a product       [L, M, N]
    return projected_marginals(A, Ktilde_diag, latent_columns(mean_v), LB_inv_A)
