"""
Sufficient statistics of Gaussian sites: the only place where the data enter the shared algebra.

With L = chol(Kmm) and A = L⁻¹ Kmn, a set of sites (a, b, w) on the zero-mean process g is summarised by

    A W Aᵀ [M, M],   A b [M, 1],   Σ aᵢ,   Σ wᵢ (Knn,ᵢᵢ − Qnn,ᵢᵢ),    Qnn,ᵢᵢ = ‖A[:, i]‖²,

all sums over data points. They are the statistics Kmn W Knm and Kmn b of the design notes written in
the frame whitened by L, where Kmm becomes I: the collapsed bound and the optimal q(u) then need only
one more Cholesky factor, LB = chol(I + A W Aᵀ), and never the ill-conditioned Kmm + Kmn W Knm.
"""

from typing import Tuple

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites, SiteStatistics
from .cholesky import robust_cholesky


@check_shapes("return: [M, M]")
def kmm_cholesky(
    kernel: gpflow.kernels.Kernel,
    inducing_variable: gpflow.inducing_variables.InducingVariables,
) -> tf.Tensor:
    """L = chol(Kmm + jitter), with GPflow's jitter first and more only if that fails."""
    Kmm = gpflow.covariances.Kuu(inducing_variable, kernel)
    return robust_cholesky(Kmm, what="Kmm")


@check_shapes("L: [M, M]", "return: [M, M]")
def triangular_inverse(L: tf.Tensor) -> tf.Tensor:
    """
    L⁻¹ of a lower-triangular factor L, by one triangular solve against the identity (it is
    lower triangular, with exact zeros above the diagonal).

    It is there to be *applied* to the N columns of a batch as a matrix product, L⁻¹ Kmn, instead
    of solving L A = Kmn with N right-hand sides. On CPU TensorFlow's triangular solve with many
    right-hand sides runs far below the dense matrix-multiply rate (95 ms against 21 ms at
    N = 10⁵, M = 100, 2 cores), and its gradient costs a second solve where a product's costs two
    products. The inverse of a triangular factor does not square the condition number, as an
    inverse of Kmm would: the product agrees with the solve to about 10⁻¹² (relative) at
    cond(Kmm) = 5·10¹⁰, which the tests check. The O(M³) solve is cheap beside the O(N M²) product.
    """
    M = tf.shape(L)[0]
    return tf.linalg.triangular_solve(L, tf.eye(M, dtype=L.dtype), lower=True)


@check_shapes(
    "X: [N, D]",
    "L: [M, M]",
    "return[0]: [M, N]",
    "return[1]: [N]",
)
def whitened_projection(
    kernel: gpflow.kernels.Kernel,
    inducing_variable: gpflow.inducing_variables.InducingVariables,
    X: tf.Tensor,
    L: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    A = L⁻¹ Kmn and diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ of the points ``X``: everything the shared algebra
    needs from the kernel at the data. K̃'s diagonal is formed here once, so that the site steps
    and the objective of one evaluation do not each recompute ‖aᵢ‖² over the whole of A.
    """
    Kmn = gpflow.covariances.Kuf(inducing_variable, kernel, X)  # [M, N]
    A = tf.linalg.matmul(triangular_inverse(L), Kmn)  # A = L⁻¹ Kmn, as a product (see there)
    return A, unexplained_variance(A, kernel(X, full_cov=False))


@check_shapes("A: [M, N]", "Knn_diag: [N]", "return: [N]")
def unexplained_variance(A: tf.Tensor, Knn_diag: tf.Tensor) -> tf.Tensor:
    """
    diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ with Qnn,ᵢᵢ = ‖aᵢ‖²: the prior variance of fᵢ that u does not explain.

    It is ≥ 0 exactly. A negative value is rounding error (a kernel evaluated at a lengthscale
    near 0 is the usual cause), and is set to 0: left in, an optimiser would climb it to an
    arbitrarily large "bound".
    """
    return tf.maximum(Knn_diag - tf.reduce_sum(tf.square(A), axis=0), 0.0)


@check_shapes(
    "A: [M, N]",
    "Ktilde_diag: [N]",
    "mean: [M, 1]",
    "root_A: [M, N]",
    "return[0]: [N, 1]",
    "return[1]: [N, 1]",
)
def projected_marginals(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, mean: tf.Tensor, root_A: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    Mean and variance of gᵢ = aᵢᵀ v + (the part of gᵢ that u does not explain), for
    q(v) = N(mean, SᵀS), given the projection A = L⁻¹ Kmn, diag K̃ and ``root_A`` = S A:

        E[gᵢ] = aᵢᵀ mean,      Var[gᵢ] = K̃ᵢᵢ + ‖S aᵢ‖²,      K̃ᵢᵢ = Knn,ᵢᵢ − ‖aᵢ‖².

    The one formula for marginals; callers differ only in the square root S they have at hand
    (Rᵀ for a stored q(v) = N(m, R Rᵀ), LB⁻¹ for the optimal q(v) with precision LB LBᵀ).
    """
    Gmu = tf.linalg.matmul(A, mean, transpose_a=True)  # Aᵀ mean                            [N, 1]
    Gvar = Ktilde_diag + tf.reduce_sum(tf.square(root_A), axis=0)
    return Gmu, Gvar[:, None]


@check_shapes(
    "sites.a: [N, 1]",
    "sites.b: [N, 1]",
    "sites.w: [N, 1]",
    "prior_mean: [N, 1]",
    "return.a: [N, 1]",
)
def shift_sites(sites: Sites, prior_mean: tf.Tensor) -> Sites:
    """
    Re-express sites on f = μ(x) + g as sites on the zero-mean process g.

    a + b(μ + g) − w(μ + g)²/2 = (a + bμ − wμ²/2) + (b − wμ) g − w g²/2.
    """
    a = sites.a + sites.b * prior_mean - 0.5 * sites.w * tf.square(prior_mean)
    b = sites.b - sites.w * prior_mean
    return Sites(a=a, b=b, w=sites.w)


@check_shapes("A: [M, N]", "w: [N]", "return: [M, M]")
def weighted_gram(A: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """
    A W Aᵀ = Σᵢ wᵢ aᵢ aᵢᵀ, with a gradient that costs one product of A's size instead of two.

    Differentiated as a plain product (A W)·Aᵀ, A enters twice and each factor gets its own
    n·m² product. For the symmetrised upstream gradient S = (P̄ + P̄ᵀ)/2 of P = A W Aᵀ both
    gradients come from the one product S A:

        Ā = 2 (S A) W,        w̄ᵢ = aᵢᵀ S aᵢ = Σₖ Aₖᵢ (S A)ₖᵢ.
    """

    @tf.custom_gradient
    def gram(A: tf.Tensor, w: tf.Tensor):  # type: ignore[no-untyped-def]
        def gradient(P_bar: tf.Tensor):  # type: ignore[no-untyped-def]
            SA = tf.linalg.matmul(0.5 * (P_bar + tf.transpose(P_bar)), A)  # S A           [M, N]
            return 2.0 * SA * w, tf.reduce_sum(A * SA, axis=0)

        return tf.linalg.matmul(A * w, A, transpose_b=True), gradient

    return gram(A, w)


@check_shapes(
    "A: [M, N]",
    "Ktilde_diag: [N]",
    "sites.a: [N, 1]",
    "sites.b: [N, 1]",
    "sites.w: [N, 1]",
    "return.AWAt: [M, M]",
    "return.Ab: [M, 1]",
    "return.sum_a: []",
    "return.trace: []",
)
def statistics_from_projection(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, sites: Sites
) -> SiteStatistics:
    """The site statistics of one batch, given its projection A = L⁻¹ Kmn and diag K̃."""
    w = sites.w[:, 0]  # [N]
    AWAt = weighted_gram(A, w)  # A W Aᵀ                                             [M, M]
    Ab = tf.linalg.matmul(A, sites.b)  # A b                                         [M, 1]
    trace = tf.reduce_sum(w * Ktilde_diag)  # Σ wᵢ (Knn,ᵢᵢ − Qnn,ᵢᵢ)
    return SiteStatistics(AWAt=AWAt, Ab=Ab, sum_a=tf.reduce_sum(sites.a), trace=trace)
