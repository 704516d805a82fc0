"""The per-class sites of the augmented logistic-softmax likelihood, against quadrature and SciPy."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.special import digamma, logsumexp, roots_hermitenorm

from gpflow_fastvi.likelihoods import one_hot_classes
from gpflow_fastvi.sites.logistic_softmax import (
    LogisticSoftmaxLocals,
    ls_alpha,
    ls_optimal_locals,
    ls_sites,
)


def expected_sites(sites, mu, var):
    """Σ_c E_q[a_c + b_c f_c − w_c f_c²/2] per point, for q(f_c) = N(mu_c, var_c)."""
    a, b, w = (np.asarray(t) for t in sites)
    return np.sum(a + b * mu - 0.5 * w * (mu**2 + var), axis=1)


def expected_log_density(label, mu, var, nodes=32):
    """E_q[log σ(f_k) − log Σ_c σ(f_c)] for independent q(f_c) = N(mu_c, var_c), by a product
    Gauss–Hermite rule over the C dimensions."""
    x, weights = roots_hermitenorm(nodes)
    grid = np.stack(np.meshgrid(*[x] * len(mu), indexing="ij"), axis=-1).reshape(-1, len(mu))
    mass = np.prod(
        np.stack(np.meshgrid(*[weights / weights.sum()] * len(mu), indexing="ij"), -1), -1
    ).ravel()
    log_sigmoid = -np.logaddexp(0.0, -(mu + np.sqrt(var) * grid))
    return np.sum(mass * (log_sigmoid[:, label] - logsumexp(log_sigmoid, axis=1)))


def sites_at_optimum(labels, mu, var):
    locals_ = ls_optimal_locals(tf.constant(mu), tf.constant(var))
    Y = one_hot_classes(tf.constant(labels[:, None]), mu.shape[1], "test", tf.float64)
    return ls_sites(Y, locals_), locals_, Y


@settings(max_examples=15, deadline=None)
@given(
    num_classes=st.sampled_from([2, 3]),
    label=st.integers(0, 2),
    mu=st.lists(st.floats(-6.0, 6.0), min_size=3, max_size=3),
    log_var=st.lists(st.floats(-4.0, 2.0), min_size=3, max_size=3),
)
def test_the_augmented_bound_is_below_the_expected_log_density(num_classes, label, mu, log_var):
    """For any q(f), the sites at the optimal locals sum to at most E_q[log p(y | f)]: the
    augmented ELBO is a lower bound, checked against quadrature over the C dimensions."""
    label = label % num_classes
    mu = np.array(mu[:num_classes])[None]
    var = np.exp(np.array(log_var[:num_classes]))[None]
    sites, _, _ = sites_at_optimum(np.array([label]), mu, var)
    bound = expected_sites(sites, mu, var)[0]
    exact = expected_log_density(label, mu[0], var[0])
    assert bound <= exact + 1e-9
    # A loose bound, not a meaningless one: over this range of q(f) its gap reaches 4.6 nats on a
    # grid (two classes, the label's mean at −6, a variance of e²), not 3 as once assumed.
    assert bound > exact - 8.0


def test_the_optimal_locals_are_a_stationary_maximum():
    """The gradient of the summed bound in (α, γ, c) vanishes at :func:`ls_optimal_locals`, and
    moving any of them lowers it."""
    rng = np.random.default_rng(3)
    mu, var = rng.normal(0.0, 2.0, (6, 4)), rng.uniform(0.05, 3.0, (6, 4))
    labels = rng.integers(0, 4, 6)
    sites, locals_, Y = sites_at_optimum(labels, mu, var)
    best = expected_sites(sites, mu, var)
    variables = [tf.Variable(t) for t in locals_]
    with tf.GradientTape() as tape:
        moved = ls_sites(Y, LogisticSoftmaxLocals(*variables))
        total = tf.reduce_sum(moved.a + moved.b * mu - 0.5 * moved.w * (tf.square(mu) + var))
    for gradient in tape.gradient(total, variables):
        np.testing.assert_allclose(gradient.numpy(), 0.0, atol=1e-8)
    for which in range(3):
        for factor in (0.9, 1.1):
            changed = list(locals_)
            changed[which] = changed[which] * factor
            lower = expected_sites(ls_sites(Y, LogisticSoftmaxLocals(*changed)), mu, var)
            assert np.all(lower < best)


@pytest.mark.parametrize("kappa_bar", [1e-8, 1e-3, 0.1, 0.443, 0.9, 0.99, 0.9999])
def test_alpha_is_the_root_scipy_finds(kappa_bar):
    root = brentq(lambda a: 1.0 + np.exp(digamma(a)) * kappa_bar - a, 1.0, 1e9, xtol=1e-13)
    alpha = ls_alpha(tf.constant([[kappa_bar]], tf.float64)).numpy()[0, 0]
    np.testing.assert_allclose(alpha, root, rtol=1e-10)


@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
def test_sites_stay_finite_far_from_the_boundary(dtype):
    """Latent means of ±1000 (a class's γ underflows to 0, another's κ nears 1) give finite
    sites, in float32 too."""
    mu = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, -1000.0]])
    var = np.array([[1e-6, 1e-6, 1.0], [1.0, 1.0, 1.0]])
    locals_ = ls_optimal_locals(tf.constant(mu, dtype), tf.constant(var, dtype))
    Y = one_hot_classes(tf.constant([[0], [2]]), 3, "test", dtype)
    for t in (*locals_, *ls_sites(Y, locals_)):
        assert t.dtype == dtype
        assert np.all(np.isfinite(t.numpy()))
    assert np.all(locals_.gamma.numpy() >= 0.0)
    assert np.all(locals_.alpha.numpy() >= 1.0)


def test_the_curvature_and_the_pseudo_target_follow_the_counts():
    """b_c = (y_c − γ_c)/2 and w_c = (y_c + γ_c) E[PG(1, c_c)]: the label's class is pulled up,
    every class is pushed down by its expected Poisson count."""
    mu, var = np.array([[0.5, -0.2, 1.5]]), np.array([[0.3, 0.7, 1.1]])
    sites, locals_, Y = sites_at_optimum(np.array([1]), mu, var)
    gamma, c = locals_.gamma.numpy(), locals_.c.numpy()
    np.testing.assert_allclose(sites.b.numpy(), 0.5 * (Y.numpy() - gamma))
    np.testing.assert_allclose(
        sites.w.numpy(), (Y.numpy() + gamma) * np.tanh(c / 2) / (2 * c), rtol=1e-12
    )
    np.testing.assert_allclose(locals_.alpha.numpy()[:, 0], 1.0 + gamma.sum(axis=1))
