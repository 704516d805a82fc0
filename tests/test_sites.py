"""Pointwise facts about the Jaakkola–Jordan site rule (paper 000, eqs. 12–15)."""

import numpy as np
import pytest
import tensorflow as tf
from scipy.special import roots_hermitenorm

from gpflow_fastvi.exceptions import InvalidDataError
from gpflow_fastvi.sites import jj_lambda, jj_log_sigmoid_bound, jj_optimal_xi, jj_sites
from gpflow_fastvi.validation import binary_labels_to_01

T_GRID = np.linspace(-12.0, 12.0, 481)[:, None]
XI_GRID = np.concatenate([np.linspace(-10.0, 10.0, 81), [1e-9, -1e-9, 0.0]])[None, :]


def misprinted_lambda(xi):
    """The coefficient as printed in paper 000: tanh(ξ)/(4ξ)."""
    return tf.where(tf.abs(xi) < 1e-6, 0.25 * tf.ones_like(xi), tf.tanh(xi) / (4.0 * xi))


def test_jj_bound_holds_pointwise_on_a_grid():
    gap = tf.math.log_sigmoid(T_GRID) - jj_log_sigmoid_bound(T_GRID, XI_GRID)
    assert np.min(gap) >= -1e-12


@pytest.mark.parametrize("xi", [0.0, 0.3, 1.0, 2.5, 7.0])
def test_jj_bound_is_tight_at_plus_and_minus_xi(xi):
    t = np.array([xi, -xi])
    gap = tf.math.log_sigmoid(t) - jj_log_sigmoid_bound(t, np.full(2, xi))
    np.testing.assert_allclose(gap, 0.0, atol=1e-12)


def test_the_misprinted_coefficient_is_not_a_bound():
    """The same grid test fails for λ(ξ) = tanh(ξ)/(4ξ): the check above could catch the slip."""
    gap = tf.math.log_sigmoid(T_GRID) - jj_log_sigmoid_bound(T_GRID, XI_GRID, misprinted_lambda)
    assert np.min(gap) < -1e-3


def test_lambda_is_stable_and_smooth_at_zero():
    xi = tf.constant([0.0, 1e-12, 1e-5, -1e-5, 1e-3], dtype=tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(xi)
        lam = jj_lambda(xi)
    grad = tape.gradient(lam, xi)
    np.testing.assert_allclose(lam[:2], 0.125, rtol=1e-15)
    exact = np.tanh(0.5e-3) / 4e-3  # far enough from 0 for the closed form to be exact
    np.testing.assert_allclose(lam[-1], exact, rtol=1e-13)
    np.testing.assert_allclose(grad, -xi.numpy() / 48.0, rtol=1e-5, atol=1e-15)  # −ξ/48 + O(ξ³)
    assert np.all(np.isfinite(grad))


def test_sites_are_the_bound_as_a_quadratic_in_f():
    rng = np.random.default_rng(1)
    Y = rng.choice([-1.0, 1.0], size=(50, 1))
    xi = rng.uniform(-6, 6, size=(50, 1))
    f = rng.normal(scale=4.0, size=(50, 1))
    a, b, w = jj_sites(Y, xi)
    np.testing.assert_allclose(
        a + b * f - 0.5 * w * f**2, jj_log_sigmoid_bound(Y * f, xi), atol=1e-12
    )
    assert np.all(w.numpy() > 0)


def test_sites_stay_finite_for_huge_xi():
    a, b, w = jj_sites(np.ones((2, 1)), np.array([[800.0], [-1e6]]))
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(w))


@pytest.mark.parametrize("mean, var", [(0.0, 1.0), (2.0, 0.5), (-3.0, 4.0), (0.1, 1e-4)])
def test_optimal_xi_maximises_the_expected_bound_and_stays_below_the_expectation(mean, var):
    """E_q[bound] at ξ² = E_q[f²] equals log σ(ξ) + (m − ξ)/2 ≤ E_q[log σ(f)] (y = +1)."""
    xi_star = jj_optimal_xi(np.array([[mean]]), np.array([[var]]))[0, 0].numpy()

    def expected_bound(xi):  # E_q[a + b f − w f²/2] in closed form
        a, b, w = (np.asarray(s)[0, 0] for s in jj_sites(np.ones((1, 1)), np.array([[xi]])))
        return a + b * mean - 0.5 * w * (mean**2 + var)

    best = expected_bound(xi_star)
    for xi in xi_star * np.array([0.5, 0.9, 1.1, 2.0]):
        assert expected_bound(xi) < best
    np.testing.assert_allclose(best, np.log(1 / (1 + np.exp(-xi_star))) + 0.5 * (mean - xi_star))
    nodes, weights = roots_hermitenorm(80)
    expectation = np.sum(weights * -np.logaddexp(0.0, -(mean + np.sqrt(var) * nodes))) / np.sqrt(
        2 * np.pi
    )
    assert best <= expectation


def test_labels_are_converted_once_and_checked():
    np.testing.assert_array_equal(binary_labels_to_01(np.array([[-1.0], [1.0]])), [[0.0], [1.0]])
    np.testing.assert_array_equal(binary_labels_to_01(np.array([[0.0], [1.0]])), [[0.0], [1.0]])
    with pytest.raises(InvalidDataError, match=r"\{0\.0, 2\.0\}"):
        binary_labels_to_01(np.array([[0.0], [2.0]]))
