"""
The paper's own algorithm for the full GP (:cite:t:`khan2012fast`), in NumPy: the reference that
:class:`~gpflow_fastvi.VIConcave`'s full form is measured against
(:func:`~experiments.concave.full_form_at_fixed_theta`).

q(f) = N(m, V) with V = (K⁻¹ + diag λ)⁻¹: N site precisions λ instead of N² covariance entries.
At the optimum of the standard ELBO, λᵢ = −2 ∂fᵦ/∂vᵢ at the marginal (mᵢ, Vᵢᵢ), where
fᵦ(yᵢ, mᵢ, vᵢ) = E_{N(mᵢ, vᵢ)}[log p(yᵢ | fᵢ)]. The algorithm alternates

- **a sweep over the marginal variances**: for each i in turn, with every other λⱼ and m held,
  the cavity precision c = 1/Vᵢᵢ − λᵢ (the poster's Ω₂₂ − k̃₂₂) is fixed, and the new variance
  solves vᵢ = 1/(c + λ(mᵢ, vᵢ)), λ(m, v) = −2 ∂fᵦ/∂v (a one-dimensional fixed point); V then
  takes the rank-one update for the change in λᵢ, as EP's sequential sweep does;
- **the mean**, by Newton's method on the ELBO in m at fixed V (concave: the "non-linear least
  squares" of the poster), in the stable form of Rasmussen & Williams's algorithm 3.1 with the
  Hessian −(K⁻¹ + diag λ(m, V)), each step halved until the ELBO does not fall.

(The poster prints the fixed point as k₂₂ = Ω₂₂ + 2 ∂fᵦ/∂v₂₂; setting the ELBO's derivative in V
to zero, ½ V⁻¹ − ½ K⁻¹ + diag ∂fᵦ/∂v = 0, gives k₂₂ = Ω₂₂ − 2 ∂fᵦ/∂v₂₂, which is used here.)
The sweep enforces each point's own condition with the others' λ held, not the exact coordinate
maximum of the ELBO (which would weigh every point's condition by the change in its variance),
so a sweep is not guaranteed to raise the ELBO; the sweeps are recorded as they come.

The likelihood is the logit Bernoulli of the comparison; fᵦ and its derivatives are 20-point
Gauss–Hermite sums, as GPflow's Bernoulli computes them. (GPflow's probit link squashes Φ into
[10⁻³, 1 − 10⁻³], so an exact probit here would not be GPflow's model.)
"""

from typing import Callable, List, NamedTuple, Optional, Tuple

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.special import expit, log_expit

GAUSS_HERMITE_POINTS = 20
"""As GPflow's quadrature of a likelihood's variational expectations."""

_NODES, _WEIGHTS = hermegauss(GAUSS_HERMITE_POINTS)
_WEIGHTS = _WEIGHTS / np.sqrt(2.0 * np.pi)  # E over N(0, 1)


class CoordinateAscent(NamedTuple):
    """Where the paper's algorithm ended, and how it got there."""

    m: np.ndarray
    """The posterior mean [N]."""
    V: np.ndarray
    """The posterior covariance (K⁻¹ + diag λ)⁻¹ [N, N]."""
    lam: np.ndarray
    """The site precisions λ [N]."""
    elbos: List[float]
    """The ELBO after each sweep (the variances, then the mean)."""


def expected_log_density(
    y: np.ndarray, m: np.ndarray, v: np.ndarray
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    fᵦ(yᵢ, mᵢ, vᵢ) = E[log σ(yᵢ fᵢ)] under N(mᵢ, vᵢ) and its derivatives in mᵢ and vᵢ,
    E[∂ log p] and E[∂² log p]/2 (Bonnet's and Price's theorems), by Gauss–Hermite quadrature;
    y ∈ {−1, +1}.
    """
    F = np.asarray(m)[..., None] + np.sqrt(np.asarray(v))[..., None] * _NODES
    y = np.asarray(y)[..., None]
    log_p, first, second = log_expit(y * F), y * expit(-y * F), -expit(F) * expit(-F)
    return log_p @ _WEIGHTS, first @ _WEIGHTS, 0.5 * (second @ _WEIGHTS)


def _site_factor(K: np.ndarray, lam: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """√λ and LB = chol(I + √λ K √λ), through which V, its log-determinant and trace are formed."""
    root = np.sqrt(lam)
    return root, cholesky(np.eye(len(lam)) + root[:, None] * K * root[None, :], lower=True)


def _reduction(K: np.ndarray, lam: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """LB and C = LB⁻¹ √λ K, so that V = (K⁻¹ + diag λ)⁻¹ = K − Cᵀ C, without inverting K."""
    root, LB = _site_factor(K, lam)
    return LB, solve_triangular(LB, root[:, None] * K, lower=True)


def _covariance(K: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """V = (K⁻¹ + diag λ)⁻¹."""
    C = _reduction(K, lam)[1]
    return K - C.T @ C


def elbo(K: np.ndarray, y: np.ndarray, alpha: np.ndarray, lam: np.ndarray) -> float:
    """
    The standard ELBO of q(f) = N(K α, (K⁻¹ + diag λ)⁻¹): Σ fᵦ − KL[q ‖ N(0, K)], with
    KL = ½ [tr B⁻¹ + αᵀ K α − N + log det B], B = I + √λ K √λ (log det K − log det V =
    log det B).
    """
    LB, C = _reduction(K, lam)
    m = K @ alpha
    v = np.diag(K) - np.sum(C**2, axis=0)  # diag V
    f_b = expected_log_density(y, m, v)[0]
    trace = np.sum(solve_triangular(LB, np.eye(len(y)), lower=True) ** 2)  # tr B⁻¹
    kl = 0.5 * (trace + alpha @ m - len(y) + 2.0 * np.sum(np.log(np.diag(LB))))
    return float(np.sum(f_b) - kl)


def _variance_sweep(
    V: np.ndarray,
    lam: np.ndarray,
    m: np.ndarray,
    y: np.ndarray,
    tol: float,
    max_inner: int,
) -> None:
    """One pass over the marginal variances, updating ``V`` and ``lam`` in place (module docstring)."""
    for i in range(len(y)):
        cavity = 1.0 / V[i, i] - lam[i]
        v, lam_i = V[i, i], lam[i]
        for _ in range(max_inner):
            lam_i = max(-2.0 * expected_log_density(y[i], m[i], v)[2], 0.0)
            v_next = 1.0 / (cavity + lam_i)
            converged = abs(v_next - v) <= tol * v
            v = v_next
            if converged:
                break
        delta = lam_i - lam[i]
        lam[i] = lam_i
        column = V[:, i].copy()
        V -= (delta / (1.0 + delta * column[i])) * np.outer(column, column)


def _mean_newton(
    K: np.ndarray,
    y: np.ndarray,
    alpha: np.ndarray,
    v: np.ndarray,
    tol: float,
    max_steps: int,
) -> np.ndarray:
    """
    The mean at fixed marginal variances ``v``: Newton on ψ(α) = −½ αᵀ K α + Σ fᵦ(yᵢ, (K α)ᵢ, vᵢ),
    concave, each step halved (at most 30 times) until ψ does not fall; returns the new α.
    """

    def psi(alpha: np.ndarray) -> float:
        m = K @ alpha
        return float(np.sum(expected_log_density(y, m, v)[0]) - 0.5 * alpha @ m)

    value = psi(alpha)
    for _ in range(max_steps):
        m = K @ alpha
        _, dm, dv = expected_log_density(y, m, v)
        W = np.maximum(-2.0 * dv, 0.0)  # −∂²fᵦ/∂m² = −2 ∂fᵦ/∂v (Price)
        b = W * m + dm
        root, LB = _site_factor(K, W)
        newton = b - root * cho_solve((LB, True), root * (K @ b))
        step = newton - alpha
        for _ in range(30):
            trial = alpha + step
            trial_value = psi(trial)
            if trial_value >= value:
                break
            step = 0.5 * step
        else:
            return alpha
        gain = trial_value - value
        alpha, value = trial, trial_value
        if gain <= tol * max(1.0, abs(value)):
            break
    return alpha


def coordinate_ascent(
    K: np.ndarray,
    y: np.ndarray,
    *,
    sweeps: int = 100,
    tol: float = 1e-12,
    callback: Optional[Callable[[int, float], None]] = None,
) -> CoordinateAscent:
    """
    The paper's algorithm (module docstring) from the prior (λ = 0, m = 0) for the kernel matrix
    ``K`` [N, N] and labels ``y`` ∈ {−1, +1} [N], for ``sweeps`` sweeps or until one changes the
    ELBO by at most ``tol`` relative. ``callback(sweep, elbo)`` is called after each sweep.
    """
    y = np.asarray(y, dtype=float).ravel()
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("The labels must be −1 or +1.")
    N = len(y)
    lam, alpha, V = np.zeros(N), np.zeros(N), np.array(K, dtype=float)
    elbos: List[float] = []
    for sweep in range(1, sweeps + 1):
        _variance_sweep(V, lam, K @ alpha, y, tol, max_inner=50)
        V = _covariance(K, lam)  # refactorised, so that rounding does not build up
        alpha = _mean_newton(K, y, alpha, np.diag(V), tol, max_steps=50)
        elbos.append(elbo(K, y, alpha, lam))
        if callback is not None:
            callback(sweep, elbos[-1])
        if sweep > 1 and abs(elbos[-1] - elbos[-2]) <= tol * max(1.0, abs(elbos[-1])):
            break
    return CoordinateAscent(m=K @ alpha, V=V, lam=lam, elbos=elbos)
