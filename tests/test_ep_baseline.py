"""The EP baseline of the binary comparison (references.ep): exact where EP is, and consistent."""

import itertools

import gpflow
import numpy as np
import pytest
from scipy.special import log_ndtr, roots_hermitenorm

from .conftest import make_binary_data
from .references.ep import (
    EPClassifier,
    _posterior,
    ep_log_marginal_gradient_weights,
    ep_predict,
    ep_probit,
)


def _kernel_matrix(X, variance=1.5, lengthscale=1.0):
    return variance * np.exp(-0.5 * ((X - X.T) / lengthscale) ** 2) + 1e-9 * np.eye(len(X))


def _exact_log_marginal(K, y, points=40):
    """log ∫ Π Φ(yᵢ fᵢ) N(f | 0, K) df by a tensor-product Gauss–Hermite rule (small N only)."""
    x, w = roots_hermitenorm(points)
    w = w / w.sum()
    L = np.linalg.cholesky(K)
    total = 0.0
    for index in itertools.product(range(points), repeat=len(y)):
        total += np.prod(w[list(index)]) * np.exp(np.sum(log_ndtr(y * (L @ x[list(index)]))))
    return np.log(total)


def _direct_log_marginal(K, y, sites):
    """log Z_EP from its definition: Π Z̃ᵢ · N(μ̃ | 0, K + Σ̃), Z̃ᵢ matching the tilted mass."""
    nu, tau = sites.nu, sites.tau
    Sigma, mu = _posterior(K, nu, tau)
    d = np.diag(Sigma)
    var_cavity = 1.0 / (1.0 / d - tau)
    mean_cavity = (mu / d - nu) * var_cavity
    mean_site, var_site = nu / tau, 1.0 / tau

    def log_normal(x, m, v):
        return -0.5 * np.log(2 * np.pi * v) - 0.5 * (x - m) ** 2 / v

    C = K + np.diag(var_site)
    log_Z_sites = log_ndtr(y * mean_cavity / np.sqrt(1 + var_cavity)) - log_normal(
        mean_cavity, mean_site, var_cavity + var_site
    )
    log_prior = (
        -0.5 * mean_site @ np.linalg.solve(C, mean_site)
        - 0.5 * np.linalg.slogdet(C)[1]
        - 0.5 * len(y) * np.log(2 * np.pi)
    )
    return np.sum(log_Z_sites) + log_prior


def test_one_point_is_exact(rng):
    """With one site EP matches the tilted distribution itself: its mean, variance and mass."""
    K = np.array([[2.3]])
    y = np.array([1.0])
    sites = ep_probit(K, y)
    Sigma, mu = _posterior(K, sites.nu, sites.tau)
    x, w = roots_hermitenorm(100)
    f = np.sqrt(2.3) * x
    tilted = w * np.exp(log_ndtr(f))
    mass = tilted.sum() / w.sum()
    np.testing.assert_allclose(sites.log_marginal, np.log(mass), rtol=1e-12)
    np.testing.assert_allclose(mu[0], (tilted @ f) / tilted.sum(), rtol=1e-10)
    np.testing.assert_allclose(Sigma[0, 0], (tilted @ f**2) / tilted.sum() - mu[0] ** 2, rtol=1e-10)


def test_log_marginal_stable_form_equals_its_definition_and_is_close_to_exact(rng):
    for N in (2, 3):
        X = rng.normal(size=(N, 1))
        K = _kernel_matrix(X)
        y = np.where(rng.uniform(size=N) < 0.5, -1.0, 1.0)
        sites = ep_probit(K, y)
        np.testing.assert_allclose(
            sites.log_marginal, _direct_log_marginal(K, y, sites), rtol=1e-12
        )
        # EP is not exact beyond one point, but for the probit it is close (here within 0.2 %).
        np.testing.assert_allclose(sites.log_marginal, _exact_log_marginal(K, y), rtol=2e-3)


def test_converged_sites_are_a_fixed_point_and_predict_their_own_marginals(rng):
    X, Y = make_binary_data(rng, N=40)
    K = _kernel_matrix(X[:, :1], lengthscale=0.7)
    y = 2.0 * Y.ravel() - 1.0
    sites = ep_probit(K, y)
    again = ep_probit(K, y, start=sites)
    assert again.sweeps == 1
    np.testing.assert_allclose(again.tau, sites.tau, rtol=1e-6)
    Sigma, mu = _posterior(K, sites.nu, sites.tau)
    mean, var = ep_predict(K, K, np.diag(K), sites)
    np.testing.assert_allclose(mean, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var, np.diag(Sigma), rtol=1e-8, atol=1e-10)


def test_gradient_in_the_kernel_parameters_matches_finite_differences(rng):
    X, Y = make_binary_data(rng, N=30)
    y = 2.0 * Y.ravel() - 1.0

    def log_marginal(lengthscale):
        return ep_probit(_kernel_matrix(X[:, :1], lengthscale=lengthscale), y, tol=1e-12)

    ell, h = 0.8, 1e-5
    sites = log_marginal(ell)
    R = ep_log_marginal_gradient_weights(_kernel_matrix(X[:, :1], lengthscale=ell), sites)
    r2 = ((X[:, :1] - X[:, :1].T) / ell) ** 2
    dK = 1.5 * np.exp(-0.5 * r2) * r2 / ell  # ∂K/∂ℓ
    numeric = (log_marginal(ell + h).log_marginal - log_marginal(ell - h).log_marginal) / (2 * h)
    np.testing.assert_allclose(0.5 * np.sum(R * dK), numeric, rtol=1e-5)


@pytest.mark.slow
def test_classifier_trains_on_log_marginal_and_predicts(rng):
    X, Y = make_binary_data(rng, N=80)
    model = EPClassifier((X, Y), gpflow.kernels.SquaredExponential(lengthscales=[2.0, 2.0]))
    before = model.log_marginal_likelihood()
    result = model.train()
    assert result.success
    assert model.log_marginal_likelihood() > before
    p, var = model.predict_y(X)
    np.testing.assert_allclose(var, p * (1 - p))
    assert np.mean((p > 0.5) == (Y > 0.5)) > 0.75
    np.testing.assert_allclose(
        model.predict_log_density((X, Y)), np.log(np.where(Y > 0.5, p, 1 - p)).ravel(), rtol=1e-10
    )
    assert model.maximum_log_likelihood_objective() == model.log_marginal_likelihood()


def test_labels_other_than_plus_minus_one_are_refused():
    with pytest.raises(ValueError, match="−1 or \\+1"):
        ep_probit(np.eye(2), np.array([0.0, 1.0]))
