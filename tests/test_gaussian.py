"""The shared Gaussian algebra against GPflow's SGPR/GPR and against plain dense NumPy."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

from gpflow_fastvi.gaussian import (
    Projection,
    WhitenedQ,
    checked_cholesky,
    collapsed_bound,
    collapsed_factors,
    kl_between,
    kl_to_prior,
    map_over_batches,
    optimal_marginals,
    optimal_q,
    robust_cholesky,
    shift_sites,
    statistics_from_projection,
    sum_over_batches,
    unexplained_variance,
    whitened_projection,
)
from gpflow_fastvi.sites import jj_sites
from gpflow_fastvi.types import Sites, SiteStatistics


class FixedVariance(gpflow.functions.Function):
    """A heteroscedastic noise variance given point by point (only used on the training X)."""

    def __init__(self, variance: np.ndarray):
        super().__init__()
        self.variance = tf.constant(variance)

    def __call__(self, X):
        return self.variance


def random_problem(rng, N=40, M=12, D=2):
    X = rng.normal(size=(N, D))
    Z = X[rng.choice(N, M, replace=False)] + 0.05 * rng.normal(size=(M, D))
    kernel = gpflow.kernels.SquaredExponential(variance=1.7, lengthscales=[0.8, 1.3][:D])
    return X, Z, kernel


def bound_of(kernel, Z, X, sites):
    iv = gpflow.inducing_variables.InducingPoints(Z)
    L = robust_cholesky(gpflow.covariances.Kuu(iv, kernel), what="Kmm")
    stats = statistics_from_projection(whitened_projection(kernel, iv, X, L), sites)
    return collapsed_bound(stats, collapsed_factors(stats)), stats, L, iv


def test_collapsed_bound_is_sgpr_on_pseudo_targets_plus_site_constants(rng):
    """Ĵ = SGPR bound on targets b/w with noise 1/w, plus Σ [a + b²/(2w) + ½ log(2π/w)]."""
    X, Z, kernel = random_problem(rng)
    Y = rng.choice([-1.0, 1.0], size=(len(X), 1))
    a, b, w = jj_sites(Y, rng.uniform(0.1, 4.0, size=(len(X), 1)))
    bound, *_ = bound_of(kernel, Z, X, Sites(a, b, w))
    sgpr = gpflow.models.SGPR(
        (X, (b / w).numpy()),
        kernel,
        Z,
        likelihood=gpflow.likelihoods.Gaussian(variance=FixedVariance((1.0 / w).numpy())),
    )
    constant = np.sum(a + b**2 / (2 * w) + 0.5 * np.log(2 * np.pi / w))
    np.testing.assert_allclose(bound.total, sgpr.elbo() + constant, rtol=1e-10)


def test_mean_function_is_handled_by_shifting_the_sites(rng):
    X, Z, kernel = random_problem(rng)
    variance = 0.3
    Y = rng.normal(size=(len(X), 1))
    mean = gpflow.functions.Linear(A=[[0.4], [-1.1]], b=[0.7])
    sites = Sites(
        -0.5 * np.log(2 * np.pi * variance) - Y**2 / (2 * variance),
        Y / variance,
        np.full_like(Y, 1 / variance),
    )
    bound, *_ = bound_of(kernel, Z, X, shift_sites(sites, mean(X)))
    sgpr = gpflow.models.SGPR((X, Y), kernel, Z, mean_function=mean, noise_variance=variance)
    np.testing.assert_allclose(bound.total, sgpr.elbo(), rtol=1e-10)


def test_gaussian_sites_with_Z_equal_X_give_gpr_log_marginal_likelihood(rng):
    X, _, kernel = random_problem(rng, N=25)
    variance = 0.2
    Y = np.sin(X[:, :1]) + 0.3 * rng.normal(size=(25, 1))
    sites = Sites(
        -0.5 * np.log(2 * np.pi * variance) - Y**2 / (2 * variance),
        Y / variance,
        np.full_like(Y, 1 / variance),
    )
    with gpflow.config.as_context(gpflow.config.Config(jitter=1e-12)):  # GPR's K has no jitter
        bound, *_ = bound_of(kernel, X.copy(), X, sites)
    gpr = gpflow.models.GPR((X, Y), kernel, noise_variance=variance)
    np.testing.assert_allclose(bound.total, gpr.log_marginal_likelihood(), rtol=1e-9)


def uncollapsed_elbo(kernel, iv, X, sites, q_mu, q_sqrt, whiten):
    """Σ E_q[a + b f − w f²/2] − KL, with q(f) from GPflow's own conditional."""
    Fmu, Fvar = gpflow.conditionals.conditional(X, iv, kernel, q_mu, q_sqrt=q_sqrt, white=whiten)
    expected = sites.a + sites.b * Fmu - 0.5 * sites.w * (Fmu**2 + Fvar)
    kl = gpflow.kullback_leiblers.prior_kl(iv, kernel, q_mu, q_sqrt, whiten=whiten)
    return tf.reduce_sum(expected) - kl


@pytest.mark.parametrize("whiten", [True, False])
def test_closed_form_q_maximises_the_uncollapsed_jj_elbo(rng, whiten):
    X, Z, kernel = random_problem(rng)
    Y = rng.choice([-1.0, 1.0], size=(len(X), 1))
    sites = jj_sites(Y, rng.uniform(0.1, 3.0, size=(len(X), 1)))
    bound, stats, L, iv = bound_of(kernel, Z, X, sites)
    q_mu, q_sqrt = optimal_q(collapsed_factors(stats), L, whiten)
    assert np.allclose(np.triu(q_sqrt[0], 1), 0.0)  # a valid GPflow q_sqrt: lower triangular
    best = uncollapsed_elbo(kernel, iv, X, sites, q_mu, q_sqrt, whiten)
    np.testing.assert_allclose(best, bound.total, rtol=1e-9)  # the two bounds agree at the optimum
    for _ in range(5):
        d_mu = 0.05 * rng.normal(size=q_mu.shape)
        d_sqrt = 0.05 * np.tril(rng.normal(size=q_sqrt.shape))
        assert uncollapsed_elbo(kernel, iv, X, sites, q_mu + d_mu, q_sqrt, whiten) < best
        assert uncollapsed_elbo(kernel, iv, X, sites, q_mu, q_sqrt + d_sqrt, whiten) < best


def test_the_sites_elbo_is_their_collapsed_bound_less_the_kl_to_their_optimum(rng):
    """The identity a full-data loss's gradient in q(u) rests on: at any whitened q(v), the
    uncollapsed ELBO of sites is their collapsed bound − KL[q ‖ their optimal q]."""
    X, Z, kernel = random_problem(rng)
    Y = rng.choice([-1.0, 1.0], size=(len(X), 1))
    sites = jj_sites(Y, rng.uniform(0.1, 3.0, size=(len(X), 1)))
    bound, stats, L, iv = bound_of(kernel, Z, X, sites)
    q_mu, q_sqrt = optimal_q(collapsed_factors(stats), L, True)
    optimum = WhitenedQ(m=q_mu, R=q_sqrt)
    np.testing.assert_allclose(kl_between(optimum, optimum), 0.0, atol=1e-10)
    for _ in range(3):
        m = q_mu + 0.3 * rng.normal(size=q_mu.shape)
        R = q_sqrt + 0.1 * np.tril(rng.normal(size=q_sqrt.shape))
        elbo = uncollapsed_elbo(kernel, iv, X, sites, m, R, True)
        gap = kl_between(WhitenedQ(m=tf.constant(m), R=tf.constant(R)), optimum)
        assert gap > 0
        np.testing.assert_allclose(elbo, bound.total - gap, rtol=1e-9)
    prior = WhitenedQ(
        m=tf.zeros_like(q_mu), R=tf.eye(q_mu.shape[0], batch_shape=[1], dtype=q_mu.dtype)
    )
    np.testing.assert_allclose(kl_between(optimum, prior), kl_to_prior(optimum), rtol=1e-12)


def test_optimal_marginals_match_gpflow_conditional(rng):
    X, Z, kernel = random_problem(rng)
    sites = jj_sites(rng.choice([-1.0, 1.0], size=(len(X), 1)), np.ones((len(X), 1)))
    _, stats, L, iv = bound_of(kernel, Z, X, sites)
    factors = collapsed_factors(stats)
    q_mu, q_sqrt = optimal_q(factors, L, whiten=True)
    A, Ktilde_diag, *_ = whitened_projection(kernel, iv, X, L)
    Fmu, Fvar = optimal_marginals(A, Ktilde_diag, factors)
    ref_mu, ref_var = gpflow.conditionals.conditional(
        X, iv, kernel, q_mu, q_sqrt=q_sqrt, white=True
    )
    np.testing.assert_allclose(Fmu, ref_mu, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Fvar, ref_var, rtol=1e-7, atol=1e-12)


def test_statistics_add_up_over_batches_with_gradients(rng):
    """Batches of 7 rows (the last one short) give the same statistics and gradients as one pass."""
    X, Z, kernel = random_problem(rng, N=40)
    iv = gpflow.inducing_variables.InducingPoints(Z)
    sites = jj_sites(rng.choice([-1.0, 1.0], size=(40, 1)), rng.uniform(0.1, 3.0, size=(40, 1)))

    def bound(batch_size):
        L = robust_cholesky(gpflow.covariances.Kuu(iv, kernel), what="Kmm")

        def batch(X, a, b, w, L):
            return statistics_from_projection(whitened_projection(kernel, iv, X, L), Sites(a, b, w))

        stats = sum_over_batches(batch, (tf.constant(X), *sites), batch_size, (L,))
        return collapsed_bound(stats, collapsed_factors(stats)).total

    def value_and_grads(batch_size):
        with tf.GradientTape() as tape:
            value = tf.function(lambda: bound(batch_size), autograph=False)()
        return value, tape.gradient(value, kernel.trainable_variables)

    full, full_grads = value_and_grads(None)
    batched, batched_grads = value_and_grads(7)
    np.testing.assert_allclose(batched, full, rtol=1e-12)
    for g_batched, g_full in zip(batched_grads, full_grads):
        np.testing.assert_allclose(g_batched, g_full, rtol=1e-10)


def test_map_over_batches_concatenates_in_order():
    x = tf.range(23, dtype=tf.float64)[:, None]
    (out,) = tf.function(lambda: map_over_batches(lambda x: (2.0 * x,), (x,), 5))()
    np.testing.assert_array_equal(out, 2.0 * x)


@pytest.mark.slow
def test_robust_cholesky_escalates_jitter_for_duplicate_inducing_inputs():
    Z = np.zeros((4, 1))  # four copies of one point: Kmm has rank one
    K = gpflow.kernels.SquaredExponential()(Z)
    L = tf.function(lambda: robust_cholesky(K, jitter=0.0, what="Kmm"))()
    assert np.all(np.isfinite(L))
    np.testing.assert_allclose(L @ tf.transpose(L), K, atol=1e-6)


def _gradients_of_factor(cholesky, K, W):  # type: ignore[no-untyped-def]
    """First and second derivatives in K of a function that reads a factor L = cholesky(K)."""
    with tf.GradientTape() as outer:
        outer.watch(K)
        with tf.GradientTape() as inner:
            inner.watch(K)
            L = cholesky(K)
            value = tf.reduce_sum(W * L) + tf.reduce_sum(tf.linalg.triangular_solve(L, W))
        gradient = inner.gradient(value, K)
        directional = tf.reduce_sum(W * gradient)
    return gradient, outer.gradient(directional, K)


@pytest.mark.parametrize("escalated", [False, True])
def test_robust_cholesky_gradient_is_that_of_the_factorisation_that_succeeded(escalated):
    # The gradient is written out (Murray's formula) instead of differentiated through the
    # jitter's tf.cond, whose gradient was NaN after an escalation. It must equal TensorFlow's
    # gradient of tf.linalg.cholesky at the jitter used, on the first attempt (to second order)
    # and after escalation, eagerly and compiled.
    rng = np.random.default_rng(3)
    B = rng.normal(size=(5, 5))
    K = B @ B.T
    used = 1e-6
    if escalated:  # smallest eigenvalue −3·10⁻⁵ of the mean diagonal: the escalation adds 10⁻⁴
        K -= (np.linalg.eigvalsh(K)[0] + 3e-5 * np.mean(np.diag(K)) + 1e-6) * np.eye(5)
        used += 1e-4 * np.mean(np.diag(K))
    K, W = tf.constant(K), tf.constant(rng.normal(size=(5, 5)))
    plain = _gradients_of_factor(
        lambda K: tf.linalg.cholesky(K + used * tf.eye(5, dtype=K.dtype)), K, W
    )
    ours = lambda K: robust_cholesky(K, jitter=1e-6)  # noqa: E731
    for gradients in (
        _gradients_of_factor(ours, K, W),
        tf.function(_gradients_of_factor)(ours, K, W),
    ):
        orders = 1 if escalated else 2
        for a, b in list(zip(gradients, plain))[:orders]:
            np.testing.assert_allclose(
                a, b, rtol=1e-8, atol=1e-10 * float(tf.reduce_max(tf.abs(b)))
            )


def test_robust_cholesky_names_the_matrix_when_jitter_cannot_help():
    K = -tf.eye(3, dtype=tf.float64)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="Cholesky factorisation of Kmm failed"
    ):
        tf.function(lambda: robust_cholesky(K, what="Kmm"))()
    with pytest.raises(tf.errors.InvalidArgumentError, match="site precisions w are negative"):
        checked_cholesky(K, what="B")


def plain_statistics(A, Ktilde_diag, sites):  # type: ignore[no-untyped-def]
    """The site statistics written out, one latent function at a time, for autodiff to
    differentiate as it likes."""
    columns = range(sites.w.shape[1])
    return SiteStatistics(
        AWAt=tf.stack([tf.linalg.matmul(A * sites.w[:, k], A, transpose_b=True) for k in columns]),
        Ab=tf.linalg.matmul(A, sites.b),
        sum_a=tf.reduce_sum(sites.a),
        trace=tf.reduce_sum(sites.w * Ktilde_diag[:, None]),
    )


def test_rounding_cannot_make_the_unexplained_variance_negative():
    """Knn,ᵢᵢ − ‖aᵢ‖² ≥ 0 exactly; where rounding says otherwise the bound must not profit."""
    A = tf.constant([[1.0, 3.0], [0.0, 4.0]], dtype=tf.float64)  # ‖a‖² = 1 and 25
    Knn_diag = tf.constant([2.0, 24.0], dtype=tf.float64)  # the second is "explained" beyond 100 %
    Ktilde_diag = unexplained_variance(A, Knn_diag)
    np.testing.assert_array_equal(Ktilde_diag, [1.0, 0.0])
    sites = Sites(*(tf.ones((2, 1), dtype=tf.float64) for _ in range(3)))
    L = tf.eye(2, dtype=tf.float64)
    stats = statistics_from_projection(Projection(A, Ktilde_diag, A, L, Knn_diag), sites)
    np.testing.assert_allclose(stats.trace, 1.0)


@pytest.mark.parametrize("latent", [1, 3])
@pytest.mark.parametrize("clamped", [False, True])
def test_statistics_gradient_reaches_kmn_and_l_as_autodiff_through_a_does(clamped, latent):
    """
    The hand-written gradient of the site statistics, sent to Kmn, chol(Kmm) and diag Knn
    directly, equals autodiff through A = L⁻¹ Kmn, A W_l Aᵀ and the clamped K̃, for every input,
    an upstream that is not symmetric and one or several latent functions (batched); also when
    rounding clamped some K̃ᵢᵢ at 0.
    """
    rng = np.random.default_rng(3)
    M, N = 4, 9
    root = rng.normal(size=(M, M))
    Kmm = tf.constant(root @ root.T + M * np.eye(M))
    Kmn = tf.constant(rng.normal(size=(M, N)))
    Knn_diag = tf.constant(rng.uniform(3.0, 6.0, size=N))
    if clamped:  # two points "explained" beyond their prior variance
        A_plain = np.linalg.solve(np.linalg.cholesky(Kmm.numpy()), Kmn.numpy())
        Knn_diag = tf.constant(np.where(np.arange(N) < 2, 0.5, 1.5) * np.sum(A_plain**2, axis=0))
    a, b = (tf.constant(rng.normal(size=(N, latent))) for _ in range(2))
    w = tf.constant(rng.uniform(0.1, 2.0, size=(N, latent)))
    upstream = SiteStatistics(
        AWAt=tf.constant(rng.normal(size=(latent, M, M))),
        Ab=tf.constant(rng.normal(size=(M, latent))),
        sum_a=tf.constant(0.7, tf.float64),
        trace=tf.constant(-0.5, tf.float64),
    )
    inputs = [Kmm, Kmn, Knn_diag, a, b, w]

    def gradients(statistics):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            L = tf.linalg.cholesky(Kmm)
            A = tf.linalg.triangular_solve(L, Kmn, lower=True)
            projection = Projection(A, unexplained_variance(A, Knn_diag), Kmn, L, Knn_diag)
            stats = statistics(projection, Sites(a, b, w))
            value = tf.add_n([tf.reduce_sum(u * s) for u, s in zip(upstream, stats)])
        return projection.Ktilde_diag, stats, tape.gradient(value, inputs)

    Ktilde_diag, stats, ours = gradients(statistics_from_projection)
    _, expected_stats, expected = gradients(
        lambda p, sites: plain_statistics(p.A, p.Ktilde_diag, sites)
    )
    assert np.sum(Ktilde_diag.numpy() == 0.0) == (2 if clamped else 0)
    for got, want in zip(stats, expected_stats):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for got, want in zip(ours, expected):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_projection_by_product_matches_the_triangular_solve_when_kmm_is_ill_conditioned():
    """
    A = L⁻¹ Kmn is formed as a product with the triangular inverse (for speed); at cond(Kmm) ≈ 10¹⁰
    the bound, its θ-gradient and the optimal marginals still agree with the solve L A = Kmn.
    """
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    Z = X[:40].copy()
    kernel = gpflow.kernels.SquaredExponential(variance=500.0, lengthscales=[30.0, 50.0, 80.0])
    iv = gpflow.inducing_variables.InducingPoints(Z)
    Y = rng.choice([-1.0, 1.0], size=(len(X), 1))
    sites = jj_sites(Y, rng.uniform(0.1, 4.0, size=(len(X), 1)))
    Kmm = gpflow.covariances.Kuu(iv, kernel, jitter=gpflow.config.default_jitter())
    assert np.linalg.cond(Kmm.numpy()) > 1e9  # the regime the product must survive

    def by_product():  # type: ignore[no-untyped-def]
        L = robust_cholesky(gpflow.covariances.Kuu(iv, kernel), what="Kmm")
        projection = whitened_projection(kernel, iv, X, L)
        return projection, statistics_from_projection(projection, sites)

    def by_solve():  # type: ignore[no-untyped-def]
        L = robust_cholesky(gpflow.covariances.Kuu(iv, kernel), what="Kmm")
        A = tf.linalg.triangular_solve(L, gpflow.covariances.Kuf(iv, kernel, X), lower=True)
        Ktilde_diag = unexplained_variance(A, kernel(X, full_cov=False))
        return (A, Ktilde_diag), plain_statistics(A, Ktilde_diag, sites)

    results = []
    for compute in (by_product, by_solve):
        with tf.GradientTape() as tape:
            (A, Ktilde_diag, *_), stats = compute()
            factors = collapsed_factors(stats)
            bound = collapsed_bound(stats, factors).total
        gradient = tape.gradient(bound, kernel.trainable_variables)
        results.append((A, bound, gradient, optimal_marginals(A, Ktilde_diag, factors)))
    (A, bound, gradient, marginals), (A_ref, bound_ref, gradient_ref, marginals_ref) = results
    np.testing.assert_allclose(A, A_ref, rtol=1e-6, atol=1e-9 * np.abs(A_ref).max())
    np.testing.assert_allclose(bound, bound_ref, rtol=1e-11)
    for got, expected in zip(gradient, gradient_ref):
        np.testing.assert_allclose(got, expected, rtol=1e-7)
    for got, expected in zip(marginals, marginals_ref):
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)
