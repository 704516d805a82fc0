"""
log p(y) and other Gaussian integrals over a handful of points by tensor-product Gauss–Hermite
quadrature: the exact values that the bounds of the models are tested against.
"""

import numpy as np
from scipy.special import logsumexp, roots_hermitenorm


def log_marginal_likelihood_by_quadrature(
    K: np.ndarray, Y_signed: np.ndarray, order: int = 40
) -> float:
    """
    log p(y) = log ∫ Πᵢ σ(yᵢ fᵢ) N(f | 0, K) df for a handful of points, by a tensor-product
    Gauss–Hermite rule in the whitened coordinates f = chol(K) z.
    """
    return log_integral_by_quadrature(
        K, lambda F: -np.sum(np.logaddexp(0.0, -Y_signed[:, 0] * F), axis=1), order
    )


def log_integral_by_quadrature(K: np.ndarray, log_lik, order: int = 40) -> float:
    """
    log ∫ exp(log_lik(f)) N(f | 0, K) df for a handful of points, by a tensor-product Gauss–Hermite
    rule in the whitened coordinates f = chol(K) z. ``log_lik`` maps F [P, N] to [P].
    """
    N = K.shape[0]
    L = np.linalg.cholesky(K + 1e-12 * np.eye(N))
    nodes, weights = roots_hermitenorm(order)
    log_weights = np.log(weights / np.sqrt(2 * np.pi))
    grids = np.meshgrid(*([np.arange(order)] * N), indexing="ij")
    index = np.stack([g.ravel() for g in grids], axis=1)  # [order^N, N]
    F = nodes[index] @ L.T  # f = L z, one row per node
    return float(logsumexp(log_lik(F) + np.sum(log_weights[index], axis=1)))
