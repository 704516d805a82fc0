"""
Expectation propagation (EP) for full-GP binary classification with the probit link: the method
the paper's binary comparison sets VIConcave beside, which GPflow does not provide.

EP replaces each likelihood Φ(yᵢ fᵢ) by an unnormalised Gaussian site in fᵢ with natural
parameters (ν̃ᵢ, τ̃ᵢ) (precision τ̃ᵢ, precision times mean ν̃ᵢ), chosen so that the posterior
marginal of fᵢ under the approximation and under the "tilted" distribution (the cavity, the
approximation without site i, times the true Φ(yᵢ fᵢ)) have the same mean and variance. The
sequential scheme, the stable form of the log marginal likelihood log Z_EP, its gradient in the
kernel's parameters and the predictive follow Rasmussen & Williams, *Gaussian Processes for Machine
Learning* (2006), algorithms 3.5, 3.6 and 5.2, with B = I + S̃^½ K S̃^½ = L Lᵀ and S̃ = diag τ̃.

The hyperparameters maximise log Z_EP by GPflow's :class:`~gpflow.optimizers.Scipy` on the
kernel's own parameters: at each evaluation the sites are run to convergence (from the last
evaluation's, a warm start) in NumPy, and the loss handed to TensorFlow is
−log Z_EP − ½ tr(R (K − K̄)), K̄ the kernel matrix held constant, whose gradient is −½ tr(R ∂K),
algorithm 5.2's gradient, and whose value is −log Z_EP.
"""

from typing import NamedTuple, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.special import log_ndtr, ndtr

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class EPSites(NamedTuple):
    """EP's sites and what they give, for a kernel matrix K and labels y ∈ {−1, +1}."""

    nu: np.ndarray
    """ν̃ [N]: each site's precision times its mean."""
    tau: np.ndarray
    """τ̃ [N]: each site's precision."""
    log_marginal: float
    """log Z_EP, EP's approximation of log p(y | θ)."""
    sweeps: int
    """Sweeps over the sites, the last one moving them by at most the tolerance."""


def inverse_mills_ratio(z: np.ndarray) -> np.ndarray:
    """φ(z) / Φ(z), through log Φ so that it stays finite far in the lower tail."""
    return np.exp(-0.5 * z * z - LOG_SQRT_2PI - log_ndtr(z))


def _factor(K: np.ndarray, tau: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """S̃^½ and the lower Cholesky factor L of B = I + S̃^½ K S̃^½."""
    s = np.sqrt(tau)
    L = cholesky(np.eye(len(tau)) + s[:, None] * K * s[None, :], lower=True)
    return s, L


def _posterior(K: np.ndarray, nu: np.ndarray, tau: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The approximation's Σ = K − K S̃^½ B⁻¹ S̃^½ K and μ = Σ ν̃, from a fresh factorisation."""
    s, L = _factor(K, tau)
    V = solve_triangular(L, s[:, None] * K, lower=True)
    Sigma = K - V.T @ V
    return Sigma, Sigma @ nu


def _log_marginal(
    K: np.ndarray, y: np.ndarray, nu: np.ndarray, tau: np.ndarray, Sigma: np.ndarray
) -> float:
    """log Z_EP in the stable form of GPML (3.65) and algorithm 3.5, at the cavities of Σ."""
    mu = Sigma @ nu
    diag = np.diag(Sigma)
    tau_cavity = 1.0 / diag - tau
    nu_cavity = mu / diag - nu
    mean_cavity = nu_cavity / tau_cavity
    _, L = _factor(K, tau)  # for log |B|
    z = y * mean_cavity / np.sqrt(1.0 + 1.0 / tau_cavity)
    # ν̃ᵀ (K − K S̃^½ B⁻¹ S̃^½ K − (T̃ + T₋)⁻¹) ν̃ = ν̃ᵀ (Σ − (T̃ + T₋)⁻¹) ν̃, T₋ the cavities' precisions.
    quadratic = nu @ mu - np.sum(nu**2 / (tau + tau_cavity))
    cavity_terms = mean_cavity @ (tau_cavity / (tau + tau_cavity) * (tau * mean_cavity - 2.0 * nu))
    return float(
        np.sum(log_ndtr(z))
        + 0.5 * np.sum(np.log1p(tau / tau_cavity))
        - np.sum(np.log(np.diag(L)))
        + 0.5 * quadratic
        + 0.5 * cavity_terms
    )


def ep_probit(
    K: np.ndarray,
    y: np.ndarray,
    *,
    start: Optional[EPSites] = None,
    tol: float = 1e-8,
    max_sweeps: int = 500,
) -> EPSites:
    """
    Sequential EP for the prior N(0, K) and the likelihood Π Φ(yᵢ fᵢ), yᵢ ∈ {−1, +1}, from the
    sites of ``start`` (all zero by default), sweeping over the sites in order until a sweep moves
    no site parameter by more than ``tol`` relative to the largest of them. (Not a test on log
    Z_EP: it is stationary at EP's fixed point, so it settles long before the sites do.)

    :raises RuntimeError: if it has not converged after ``max_sweeps`` sweeps.
    """
    y = np.asarray(y, dtype=float).ravel()
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("EP's labels must be −1 or +1.")
    N = len(y)
    nu, tau = (np.zeros(N), np.zeros(N)) if start is None else (start.nu.copy(), start.tau.copy())
    Sigma, mu = _posterior(K, nu, tau)
    for sweep in range(1, max_sweeps + 1):
        before = np.concatenate([nu, tau])
        for i in range(N):
            tau_cavity = 1.0 / Sigma[i, i] - tau[i]
            nu_cavity = mu[i] / Sigma[i, i] - nu[i]
            var_cavity = 1.0 / tau_cavity
            mean_cavity = nu_cavity * var_cavity
            scale = np.sqrt(1.0 + var_cavity)
            z = y[i] * mean_cavity / scale
            ratio = inverse_mills_ratio(z)
            # The tilted distribution's mean and variance.
            mean_hat = mean_cavity + y[i] * var_cavity * ratio / scale
            var_hat = var_cavity - var_cavity**2 * ratio * (z + ratio) / (1.0 + var_cavity)
            delta = 1.0 / var_hat - tau_cavity - tau[i]
            tau[i] += delta
            nu[i] = mean_hat / var_hat - nu_cavity
            column = Sigma[:, i].copy()  # a rank-one update of Σ for the new τ̃ᵢ
            Sigma -= (delta / (1.0 + delta * column[i])) * np.outer(column, column)
            mu = Sigma @ nu
        Sigma, mu = _posterior(K, nu, tau)  # refactorised, so rounding does not build up
        after = np.concatenate([nu, tau])
        if np.max(np.abs(after - before)) <= tol * max(1.0, np.max(np.abs(after))):
            return EPSites(nu, tau, _log_marginal(K, y, nu, tau, Sigma), sweep)
    raise RuntimeError(f"EP did not converge in {max_sweeps} sweeps.")


def _site_weights(K: np.ndarray, sites: EPSites) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """S̃^½, L and b = ν̃ − S̃^½ B⁻¹ S̃^½ K ν̃ = (K + S̃⁻¹)⁻¹ μ̃: the predictive mean is K(x*, X) b."""
    s, L = _factor(K, sites.tau)
    return s, L, sites.nu - s * cho_solve((L, True), s * (K @ sites.nu))


def ep_log_marginal_gradient_weights(K: np.ndarray, sites: EPSites) -> np.ndarray:
    """
    R = b bᵀ − S̃^½ B⁻¹ S̃^½ with b = ν̃ − S̃^½ B⁻¹ S̃^½ K ν̃ (algorithm 5.2): the derivative of
    log Z_EP in any kernel parameter θⱼ is ½ tr(R ∂K/∂θⱼ).
    """
    s, L, b = _site_weights(K, sites)
    return np.outer(b, b) - s[:, None] * cho_solve((L, True), np.diag(s))


def ep_predict(
    K: np.ndarray, K_cross: np.ndarray, K_test_diag: np.ndarray, sites: EPSites
) -> Tuple[np.ndarray, np.ndarray]:
    """
    The predictive latent mean and variance at test points (algorithm 3.6), from
    ``K_cross`` = K(X, X*) [N, T] and the test points' prior variances [T].
    """
    s, L, b = _site_weights(K, sites)
    mean = K_cross.T @ b
    V = solve_triangular(L, s[:, None] * K_cross, lower=True)
    return mean, K_test_diag - np.sum(V**2, axis=0)


class EPClassifier:
    """
    A full GP with the probit link by EP, its kernel's parameters trained on log Z_EP: the EP
    baseline of :func:`experiments.concave.raetsch_errors`.

    :param Y: labels in {0, 1}, as the package's data loaders give them.
    """

    def __init__(self, data: Tuple[np.ndarray, np.ndarray], kernel: gpflow.kernels.Kernel):
        X, Y = data
        self.X = tf.constant(X)
        self.y = 2.0 * np.asarray(Y, dtype=float).ravel() - 1.0
        self.kernel = kernel
        self.sites: Optional[EPSites] = None
        self._sites_K: Optional[np.ndarray] = None  # the kernel matrix ``sites`` converged at

    def _K(self) -> tf.Tensor:
        return self.kernel(self.X)

    def _converge(self, K: np.ndarray) -> EPSites:
        """The sites at kernel matrix K, from the last ones (as they are, if K has not changed)."""
        if self.sites is None or self._sites_K is None or not np.array_equal(K, self._sites_K):
            self.sites = ep_probit(K, self.y, start=self.sites)
            self._sites_K = K
        return self.sites

    def log_marginal_likelihood(self) -> float:
        """log Z_EP at the kernel's current parameters (the sites run to convergence)."""
        return self._converge(self._K().numpy()).log_marginal

    def train(self, maxiter: int = 1_000) -> gpflow.optimizers.Scipy:
        """L-BFGS-B on −log Z_EP over the kernel's trainable parameters (module docstring)."""

        def loss() -> tf.Tensor:
            K = self._K()
            K_held = K.numpy()
            sites = self._converge(K_held)
            R = ep_log_marginal_gradient_weights(K_held, sites)
            surrogate = 0.5 * tf.reduce_sum(R * (K - K_held))  # 0, with gradient ½ tr(R ∂K)
            return -(sites.log_marginal + surrogate)

        return gpflow.optimizers.Scipy().minimize(
            loss, self.kernel.trainable_variables, compile=False, options=dict(maxiter=maxiter)
        )

    def predict_latent(self, X_test: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The predictive mean and variance of f at ``X_test``."""
        K = self._K().numpy()
        sites = self._converge(K)
        X_test = tf.constant(X_test)
        return ep_predict(
            K,
            self.kernel(self.X, X_test).numpy(),
            self.kernel(X_test, full_cov=False).numpy(),
            sites,
        )

    def maximum_log_likelihood_objective(self) -> float:
        """What training maximises, GPflow's name for it: log Z_EP."""
        return self.log_marginal_likelihood()

    def predict_y(self, X_test: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The mean and variance of y* ∈ {0, 1}, [T, 1] each, as GPflow's ``predict_y``: the mean
        is p(y* = 1 | x*, data) = Φ(m* / √(1 + v*))."""
        mean, var = self.predict_latent(X_test)
        p = ndtr(mean / np.sqrt(1.0 + var))[:, None]
        return p, p * (1.0 - p)

    def predict_log_density(self, data: Tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """log p(y* | x*, data) [T] for labels in {0, 1}, as GPflow's ``predict_log_density``."""
        X_test, Y_test = data
        mean, var = self.predict_latent(X_test)
        sign = 2.0 * np.asarray(Y_test, dtype=float).ravel() - 1.0
        return log_ndtr(sign * mean / np.sqrt(1.0 + var))
