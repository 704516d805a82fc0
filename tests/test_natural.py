"""The core's natural-parameter algebra: marginals, KL, and the natural-gradient step on q(u)."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

from gpflow_fastvi.gaussian import (
    collapsed_factors,
    expected_sites,
    expected_sites_from_statistics,
    kl_to_prior,
    marginals,
    natural_gradient_parameters,
    natural_parameters,
    optimal_q,
    q_from_natural,
    robust_cholesky,
    shift_sites,
    statistics_from_projection,
    step_statistics,
    stored_q,
    whitened_projection,
    whitened_q,
)
from gpflow_fastvi.sites import jj_optimal_xi, jj_sites
from gpflow_fastvi.types import Sites


def random_q(rng, M, latent=1):
    """A random q(u) of ``latent`` latent functions as GPflow stores it: [M, L] and [L, M, M]."""
    q_mu = rng.standard_normal((M, latent))
    lower = np.tril(0.3 * rng.standard_normal((latent, M, M)), -1)
    q_sqrt = lower + np.stack([np.diag(rng.uniform(0.2, 1.0, M)) for _ in range(latent)])
    return tf.constant(q_mu), tf.constant(q_sqrt)


def problem(rng, N=40, M=7, mean=0.0):
    X = rng.uniform(-2.0, 2.0, size=(N, 2))
    Y = np.where(rng.uniform(size=(N, 1)) < 0.5, -1.0, 1.0)
    kernel = gpflow.kernels.SquaredExponential(variance=1.7, lengthscales=[0.8, 1.3])
    iv = gpflow.inducing_variables.InducingPoints(X[:M].copy())
    L = robust_cholesky(gpflow.covariances.Kuu(iv, kernel))
    projection = whitened_projection(kernel, iv, tf.constant(X), L)
    prior_mean = tf.fill([N, 1], tf.constant(mean, tf.float64))
    return X, Y, kernel, iv, L, projection, prior_mean


def stepped_q(projection, prior_mean, q_mu, q_sqrt, L, whiten, local_sites, scale, rho):
    """The step as (q_mu, q_sqrt) in the stored frame, as a model forms it."""
    q = whitened_q(q_mu, q_sqrt, L, whiten)
    stats = step_statistics(projection, prior_mean, q, local_sites)
    natural = natural_gradient_parameters(q, stats, scale, rho)
    return stored_q(q_from_natural(natural), L, whiten)


def jj_local_sites(Y):
    return lambda Fmu, Fvar: jj_sites(tf.constant(Y), jj_optimal_xi(Fmu, Fvar))


@pytest.mark.parametrize("latent", [1, 3])
@pytest.mark.parametrize("whiten", [True, False])
def test_marginals_and_kl_match_gpflow(rng, whiten, latent):
    """The batched marginals and KL of one or several latent functions are GPflow's."""
    X, _, kernel, iv, L, projection, _ = problem(rng)
    q_mu, q_sqrt = random_q(rng, 7, latent)
    q = whitened_q(q_mu, q_sqrt, L, whiten)
    Gmu, Gvar = marginals(projection.A, projection.Ktilde_diag, q)
    Fmu, Fvar = gpflow.conditionals.conditional(
        tf.constant(X), iv, kernel, q_mu, q_sqrt=q_sqrt, white=whiten
    )
    np.testing.assert_allclose(Gmu, Fmu, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Gvar, Fvar, rtol=1e-8, atol=1e-10)
    kl = gpflow.kullback_leiblers.prior_kl(iv, kernel, q_mu, q_sqrt, whiten=whiten)
    np.testing.assert_allclose(kl_to_prior(q), kl, rtol=1e-9)


@pytest.mark.parametrize("latent", [1, 3])
def test_expected_sites_from_statistics_match_the_marginals_in_value_and_gradient(rng, latent):
    """
    Σᵢ Σ_l E_q[sites] read off the statistics (mean shift included) is the sum at the marginals,
    and its gradient in the kernel and Z, through the statistics' hand-written gradient, is the
    one autodiff takes through A = L⁻¹ Kmn and the marginals.
    """
    X, _, kernel, iv, _, _, _ = problem(rng)
    N = X.shape[0]
    q_mu, q_sqrt = random_q(rng, 7, latent)
    a, b = (tf.constant(rng.standard_normal((N, latent))) for _ in range(2))
    w = tf.constant(rng.uniform(-0.2, 1.5, (N, latent)))  # any sign: a sum of quadratics
    prior_mean = tf.constant(rng.standard_normal((N, 1)))
    variables = kernel.trainable_variables + iv.trainable_variables

    def both():
        L = robust_cholesky(gpflow.covariances.Kuu(iv, kernel))
        projection = whitened_projection(kernel, iv, tf.constant(X), L)
        q = whitened_q(q_mu, q_sqrt, L, True)
        Gmu, Gvar = marginals(projection.A, projection.Ktilde_diag, q)
        at_marginals = tf.reduce_sum(expected_sites(Sites(a, b, w), Gmu + prior_mean, Gvar))
        stats = statistics_from_projection(projection, shift_sites(Sites(a, b, w), prior_mean))
        return at_marginals, expected_sites_from_statistics(stats, q)

    with tf.GradientTape(persistent=True) as tape:
        at_marginals, from_statistics = both()
    np.testing.assert_allclose(from_statistics, at_marginals, rtol=1e-10)
    for by_hand, autodiff in zip(
        tape.gradient(from_statistics, variables), tape.gradient(at_marginals, variables)
    ):
        np.testing.assert_allclose(by_hand, autodiff, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("latent", [1, 3])
def test_natural_parameters_round_trip(rng, latent):
    q_mu, q_sqrt = random_q(rng, 5, latent)
    back = q_from_natural(natural_parameters(whitened_q(q_mu, q_sqrt, None, whiten=True)))
    np.testing.assert_allclose(back.m, q_mu, rtol=1e-9)
    np.testing.assert_allclose(back.R, q_sqrt, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("mean", [0.0, 0.7])
def test_full_batch_step_with_rho_one_lands_on_the_closed_form_optimum(rng, whiten, mean):
    """From any q: one ρ = 1 step on all the data = the optimal q(u) for the sites at that q."""
    X, Y, kernel, iv, L, projection, prior_mean = problem(rng, mean=mean)
    q_mu, q_sqrt = random_q(rng, 7)
    new_mu, new_sqrt = stepped_q(
        projection, prior_mean, q_mu, q_sqrt, L, whiten, jj_local_sites(Y),
        tf.constant(1.0, tf.float64), tf.constant(1.0, tf.float64),
    )  # fmt: skip
    # The same sites by hand: ξ from the starting q, then the closed-form optimum.
    Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, whitened_q(q_mu, q_sqrt, L, whiten))
    sites = shift_sites(jj_local_sites(Y)(Gmu + prior_mean, Fvar), prior_mean)
    stats = statistics_from_projection(whitened_projection(kernel, iv, tf.constant(X), L), sites)
    opt_mu, opt_sqrt = optimal_q(collapsed_factors(stats), L, whiten)
    np.testing.assert_allclose(new_mu, opt_mu, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(new_sqrt, opt_sqrt, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("whiten", [True, False])
def test_step_is_a_convex_combination_of_natural_parameters(rng, whiten):
    X, Y, kernel, iv, L, projection, prior_mean = problem(rng)
    q_mu, q_sqrt = random_q(rng, 7)
    one = tf.constant(1.0, tf.float64)
    args = (projection, prior_mean, q_mu, q_sqrt, L, whiten, jj_local_sites(Y), one)
    full_mu, full_sqrt = stepped_q(*args, one)
    part_mu, part_sqrt = stepped_q(*args, tf.constant(0.3, tf.float64))
    start, full, part = (
        natural_parameters(whitened_q(mu, sqrt, L, whiten))
        for mu, sqrt in ((q_mu, q_sqrt), (full_mu, full_sqrt), (part_mu, part_sqrt))
    )
    for field in ("eta1", "precision"):
        expected = 0.7 * getattr(start, field) + 0.3 * getattr(full, field)
        np.testing.assert_allclose(getattr(part, field), expected, rtol=1e-8, atol=1e-10)
