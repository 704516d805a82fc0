"""KLCorrected (paper 001): the E-step against quadrature, the two bounds, GPR/SGPR identities, fit."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from scipy import integrate, stats

from gpflow_fastvi import KLCorrected, fit
from gpflow_fastvi.exceptions import IncompatibleLikelihoodError, InvalidDataError
from gpflow_fastvi.sites.ppa import local_terms, newton_sites, tilted_evidence, tilted_moments
from gpflow_fastvi.sites.taylor import taylor_sites

from .conftest import make_binary_data
from .references.quadrature import log_integral_by_quadrature


def _kernel() -> gpflow.kernels.Kernel:
    return gpflow.kernels.SquaredExponential(variance=1.5, lengthscales=0.8)


def _tilted_by_quad(log_lik, mu: float, beta: float):
    """log Z, mean, variance and E[log p] + H of p(y | f) N(f | mu, 1/beta) / Z by adaptive quadrature."""
    sd = 1.0 / np.sqrt(beta)
    lo, hi = mu - 12 * sd, mu + 12 * sd

    def density(f):
        return np.exp(log_lik(f)) * stats.norm.pdf(f, mu, sd)

    def moment(k):
        return integrate.quad(
            lambda f: f**k * density(f), lo, hi, epsabs=0, epsrel=1e-12, limit=200
        )[0]

    Z = moment(0)
    mean = moment(1) / Z
    var = moment(2) / Z - mean**2
    log_Z = np.log(Z)
    # E_q[log p(y | f)] + H[q] = E_q[log p(y | f) − log q(f)] = E_q[log Z − log N(f | mu, 1/beta)]
    entropy_term = integrate.quad(
        lambda f: density(f) / Z * (log_Z - stats.norm.logpdf(f, mu, sd)),
        lo,
        hi,
        epsabs=0,
        epsrel=1e-12,
        limit=200,
    )[0]
    return log_Z, mean, var, entropy_term


def _gpflow_probit(y: float):
    floor = 1e-3  # GPflow's inv_probit keeps p in [1e-3, 1 - 1e-3]
    p1 = lambda f: floor + (1 - 2 * floor) * stats.norm.cdf(f)  # noqa: E731
    return lambda f: np.log(p1(f) if y == 1 else 1.0 - p1(f))


def _moments(likelihood, mu, beta, Y):
    mu = tf.constant(mu, dtype=tf.float64)[:, None]
    beta = tf.constant(beta, dtype=tf.float64)
    Y = tf.constant(Y, dtype=tf.float64)[:, None]
    X = tf.zeros_like(mu)
    log_Z, f_mean, f_var = tilted_moments(
        lambda m: likelihood.predict_log_density(X, m, tf.ones_like(m) / beta, Y), mu, beta
    )
    evidence = tilted_evidence(log_Z, mu, f_mean, f_var, beta)
    return [t.numpy()[:, 0] for t in (log_Z, f_mean, f_var, evidence)]


# --------------------------------------------------------------------------------------------------
# The E-step.


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.3, 1.0, 6.0])
def test_probit_e_step_moments_match_quadrature(beta):
    mu = np.array([-3.0, -0.4, 0.0, 0.9, 2.5, 0.9])
    Y = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    got = _moments(gpflow.likelihoods.Bernoulli(), mu, beta, Y)
    for i in range(len(mu)):
        want = _tilted_by_quad(_gpflow_probit(Y[i]), mu[i], beta)
        np.testing.assert_allclose([g[i] for g in got], want, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("beta", [0.3, 1.0, 6.0])
def test_local_terms_per_point_are_log_Z_plus_half_log_2pi_over_beta_plus_g2_over_2beta(beta):
    # The identity in the sites.ppa docstring: at the tilted q(f_n) the theta-free part of both
    # bounds is log Z_n + log(2 pi / beta)/2 + g_n^2 / (2 beta), with g_n = <f_n> - mu_n scaled by beta.
    mu = np.array([-3.0, -0.4, 0.0, 0.9, 2.5])
    Y = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    log_Z, f_mean, f_var, evidence = _moments(gpflow.likelihoods.Bernoulli(), mu, beta, Y)
    g = beta * (f_mean - mu)
    want = np.sum(log_Z + 0.5 * np.log(2 * np.pi / beta) + g**2 / (2 * beta))
    got = local_terms(
        tf.constant(f_var)[:, None], tf.constant(evidence)[:, None], tf.constant(beta, tf.float64)
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_logit_and_poisson_e_steps_by_gauss_hermite_match_quadrature():
    logit = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    mu, Y, beta = np.array([-1.0, 0.5, 2.0]), np.array([1.0, 0.0, 1.0]), 2.0
    got = _moments(logit, mu, beta, Y)
    for i in range(3):
        log_lik = lambda f, y=Y[i]: -np.logaddexp(0.0, -(2 * y - 1) * f)  # noqa: E731
        np.testing.assert_allclose(
            [g[i] for g in got], _tilted_by_quad(log_lik, mu[i], beta), rtol=1e-6
        )

    poisson = gpflow.likelihoods.Poisson()
    mu, Y, beta = np.array([0.0, 1.0, -0.5]), np.array([2.0, 0.0, 1.0]), 4.0
    got = _moments(poisson, mu, beta, Y)
    for i in range(3):
        log_lik = lambda f, y=Y[i]: stats.poisson.logpmf(y, np.exp(f))  # noqa: E731
        np.testing.assert_allclose(
            [g[i] for g in got], _tilted_by_quad(log_lik, mu[i], beta), rtol=1e-6
        )


@pytest.mark.parametrize(
    "likelihood, Y",
    [
        (gpflow.likelihoods.Bernoulli(), [1.0, 0.0, 1.0, 0.0]),
        (gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid), [1.0, 0.0, 1.0, 0.0]),
        (gpflow.likelihoods.Poisson(), [2.0, 0.0, 1.0, 5.0]),
    ],
)
def test_newton_sites_from_the_tilted_moments_are_the_taylor_sites_of_log_Z(likelihood, Y):
    # The Newton E-step reads log Z_n's slope and curvature off the moments instead of
    # differentiating log Z_n again: the two must be the same sites.
    mu = tf.constant([[-1.5], [0.3], [2.0], [0.8]], tf.float64)
    Y = tf.constant(Y, tf.float64)[:, None]
    beta = tf.constant(1.7, tf.float64)

    def log_Z(m):
        return likelihood.predict_log_density(tf.zeros_like(m), m, tf.ones_like(m) / beta, Y)

    log_Z_value, f_mean, f_var = tilted_moments(log_Z, mu, beta)
    evidence = tilted_evidence(log_Z_value, mu, f_mean, f_var, beta)
    got = newton_sites(f_mean, f_var, evidence, mu, beta)
    want = taylor_sites(log_Z, mu)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_logit_log_normaliser_is_finite_for_confident_points_and_matches_quadrature():
    # GPflow's Bernoulli takes log(1 - Z), which is log 0 once a cavity mean passes about 37.
    model = KLCorrected(
        _kernel(),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        beta=2.0,
        data=make_binary_data(np.random.default_rng(0), N=6),
    )
    mu, Y = np.array([-1.0, 0.5, 45.0, -60.0]), np.array([1.0, 0.0, 0.0, 1.0])
    log_Z = model._log_normaliser(None, tf.constant(Y[:, None]))(tf.constant(mu[:, None]))
    for i in range(len(mu)):
        log_lik = lambda f, y=Y[i]: -np.logaddexp(0.0, -(2 * y - 1) * f)  # noqa: E731
        want = _tilted_by_quad(log_lik, mu[i], 2.0)[0]
        np.testing.assert_allclose(log_Z[i], want, rtol=1e-6)


def _poisson_log_lik(y: float):
    return lambda f: stats.poisson.logpmf(y, np.exp(f))


def _exponential_log_lik(y: float):
    return lambda f: -y * np.exp(-f) - f  # GPflow's Exponential: scale exp(f)


@pytest.mark.parametrize(
    "likelihood, log_lik, Y, mu, beta",
    [
        # counts far above the cavity, a zero far below it, and a near one
        (
            gpflow.likelihoods.Poisson(),
            _poisson_log_lik,
            [14.0, 100.0, 0.0, 2.0],
            [0, 0, 3, 1],
            1.0,
        ),
        (gpflow.likelihoods.Poisson(), _poisson_log_lik, [14.0, 3.0], [-2.0, 1.0], 0.2),
        (gpflow.likelihoods.Exponential(), _exponential_log_lik, [40.0, 0.01], [0.0, 2.0], 1.0),
    ],
)
def test_tilted_quadrature_matches_quadrature_where_the_cavitys_rule_misses(
    likelihood, log_lik, Y, mu, beta
):
    # GPflow's rule, centred on the cavity, gave a negative tilted variance for the first case.
    mu = np.asarray(mu, dtype=float)
    model = KLCorrected(_kernel(), likelihood, np.zeros((2, 1)), beta=beta, num_data=len(mu))
    Yt, mut = tf.constant(np.asarray(Y)[:, None]), tf.constant(mu[:, None])
    log_normaliser = model._log_normaliser(tf.zeros_like(mut), Yt)
    log_Z, f_mean, f_var = tilted_moments(log_normaliser, mut, tf.constant(beta, tf.float64))
    evidence = tilted_evidence(log_Z, mut, f_mean, f_var, tf.constant(beta, tf.float64))
    got = np.hstack([log_Z, f_mean, f_var, evidence])
    for i in range(len(mu)):
        want = _tilted_by_quad(log_lik(Y[i]), mu[i], beta)
        np.testing.assert_allclose(got[i], want, rtol=1e-7, atol=1e-9)


def test_counts_far_from_the_prior_give_a_finite_loss_and_fit(rng):
    X = rng.uniform(-3, 3, (400, 2))
    Y = rng.poisson(np.exp(np.sin(1.5 * X[:, :1]) + 0.5 * X[:, 1:])).astype(float)
    assert Y.max() >= 12  # with a unit cavity at 0, between two points of GPflow's rule
    model = KLCorrected(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        gpflow.likelihoods.Poisson(),
        X[::20].copy(),
        num_data=len(X),
    )
    assert np.isfinite(float(model.training_loss((X, Y))))


def _fixed_point_run(model: KLCorrected, calls: int, passes: int = 1) -> list:
    """The bound after each of ``calls`` compiled ``update_sites(passes)`` at fixed hyperparameters."""
    step = tf.function(lambda: model.update_sites(passes), autograph=False)
    return [float(step()) for _ in range(calls)]


@pytest.mark.slow
@pytest.mark.parametrize("form", ["full", "sparse"])
def test_newton_e_step_reaches_the_papers_fixed_point_in_a_few_steps(rng, form):
    """
    The Newton E-step and the paper's coordinate ascent stop at the same q(fₙ) and bound; from
    there a coordinate step moves nothing (Newton's fixed point is the paper's), and Newton gets
    there in a handful of steps where coordinate ascent still climbs after fifty. (A call of
    ``update_sites(k)`` reads q(fₙ) off the stored q(f̄), which is a coordinate step, then takes
    k − 1 Newton steps.)
    """
    X, Y = make_binary_data(rng, N=40)
    Z = X[::4].copy() if form == "sparse" else None
    kernel = lambda: gpflow.kernels.SquaredExponential(variance=20.0, lengthscales=1.0)  # noqa
    newton = KLCorrected(kernel(), inducing_variable=Z, data=(X, Y))
    coordinate = KLCorrected(kernel(), inducing_variable=Z, e_step="coordinate", data=(X, Y))
    newton_run = _fixed_point_run(newton, 3, passes=4)
    coordinate_run = _fixed_point_run(coordinate, 50)
    fixed = newton_run[-1]
    assert abs(newton_run[-2] - fixed) < 1e-10 * abs(fixed)
    assert fixed - coordinate_run[-1] > 1e-6 * abs(fixed)  # still short after 50 steps
    coordinate_run += _fixed_point_run(coordinate, 3000)
    np.testing.assert_allclose(coordinate_run[-1], fixed, rtol=1e-9)
    f_mean = lambda model: model._site_parameters()[0].numpy()  # noqa: E731
    np.testing.assert_allclose(f_mean(coordinate), f_mean(newton), atol=1e-5)

    newton.e_step = "coordinate"
    np.testing.assert_allclose(float(newton.update_sites(1)), fixed, rtol=1e-12)


@pytest.mark.slow
def test_newton_e_step_is_exact_in_one_step_for_gaussian_noise(rng):
    # log Zₙ is quadratic in the cavity mean for a Gaussian likelihood: one Newton step is exact.
    X = rng.uniform(-2, 2, size=(25, 1))
    Y = np.sin(2 * X) + 0.2 * rng.normal(size=X.shape)
    model = KLCorrected(_kernel(), gpflow.likelihoods.Gaussian(variance=0.1), beta=3.0, data=(X, Y))
    (first,) = _fixed_point_run(model, 1, passes=2)  # a coordinate read, then one Newton step
    (second,) = _fixed_point_run(model, 1, passes=1)
    np.testing.assert_allclose(second, first, rtol=1e-12)
    coordinate = KLCorrected(
        _kernel(),
        gpflow.likelihoods.Gaussian(variance=0.1),
        beta=3.0,
        e_step="coordinate",
        data=(X, Y),
    )
    assert _fixed_point_run(coordinate, 1, passes=2)[0] < first - 1e-3 * abs(first)


# --------------------------------------------------------------------------------------------------
# The two bounds.


@pytest.fixture
def small_data(rng):
    return make_binary_data(rng, N=30)


@pytest.mark.parametrize("form", ["full", "sparse"])
def test_kl_corrected_bound_is_above_standard_and_equal_after_q_update(small_data, form):
    Z = small_data[0][::3].copy() if form == "sparse" else None
    model = KLCorrected(_kernel(), inducing_variable=Z, data=small_data)
    model.update_sites(3)
    q_f = model._site_parameters()  # q(fₙ), held fixed from here on
    model._update_q(site_parameters=q_f)
    corrected = lambda: model._kl_corrected_bound(site_parameters=q_f).numpy()  # noqa: E731
    standard = lambda: model._standard_bound(site_parameters=q_f).numpy()  # noqa: E731
    np.testing.assert_allclose(corrected(), standard(), rtol=1e-10)

    # Move θ and β with q held fixed: the correction KL[q(f̄) ‖ p(f̄ | ⟨f⟩)] becomes positive.
    model.kernel.lengthscales.assign(0.5)
    model.kernel.variance.assign(3.0)
    model.beta.assign(2.5)
    moved = corrected()
    assert moved > standard() + 1e-2

    model._update_q(site_parameters=q_f)  # the q(f̄) update closes the gap
    np.testing.assert_allclose(corrected(), standard(), rtol=1e-10)
    np.testing.assert_allclose(corrected(), moved, rtol=1e-10)


@pytest.mark.parametrize("bound", ["kl_corrected", "standard"])
@pytest.mark.slow
def test_bounds_and_yardstick_are_below_log_marginal_likelihood(rng, bound):
    X, Y = make_binary_data(rng, N=4)
    model = KLCorrected(_kernel(), bound=bound, beta=2.0, data=(X, Y))
    fit(model, method="em", max_iter=15)
    beta = model.beta.numpy()
    K = model.kernel(X).numpy() + (1e-6 + 1.0 / beta) * np.eye(4)  # f = f̄ + ε
    log_lik = lambda F: sum(_gpflow_probit(Y[i, 0])(F[:, i]) for i in range(4))  # noqa: E731
    log_p = log_integral_by_quadrature(K, log_lik, order=40)
    for value in (model._kl_corrected_bound(), model._standard_bound(), model.elbo()):
        assert value.numpy() < log_p


@pytest.mark.slow
def test_gaussian_noise_objective_is_gpr_and_sgpr_on_pseudo_targets(rng):
    X = rng.uniform(-2, 2, size=(25, 1))
    Y = np.sin(2 * X) + 0.2 * rng.normal(size=X.shape)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    Z = X[::4].copy()
    full = KLCorrected(_kernel(), likelihood, beta=3.0, data=(X, Y))
    sparse = KLCorrected(_kernel(), likelihood, inducing_variable=Z, beta=3.0, data=(X, Y))
    for model in (full, sparse):
        fit(model, max_iter=5)
        model.kernel.lengthscales.assign(0.6)  # anywhere, not only at the optimum
        noise = 1.0 / model.beta.numpy()
        q_f = model._site_parameters()
        pseudo = (X, q_f[0].numpy())
        # The full form is the sparse form with Z = X: SGPR's collapsed bound, to rounding.
        inducing = X if model is full else model.inducing_variable.Z.numpy()  # trained from Z
        reference = gpflow.models.SGPR(pseudo, model.kernel, inducing, noise_variance=noise)
        got = model._kl_corrected_bound(site_parameters=q_f) - model._local_bound_terms(
            site_parameters=q_f
        )
        np.testing.assert_allclose(got, reference.elbo(), rtol=1e-9)
        if model is full:  # ... which is GPR's marginal likelihood up to the jitter on Kmm
            exact = gpflow.models.GPR(pseudo, model.kernel, noise_variance=noise)
            np.testing.assert_allclose(got, exact.log_marginal_likelihood(), rtol=1e-5)

        # And with a Gaussian noise model log p(y) is exact: N(y | 0, K + (σ² + 1/β) I), σ² as
        # trained with the kernel.
        variance = float(model.likelihood.variance.numpy())
        K = model.kernel(X).numpy() + (variance + noise) * np.eye(len(X))
        log_p = stats.multivariate_normal(np.zeros(len(X)), K).logpdf(Y[:, 0])
        assert model._kl_corrected_bound().numpy() < log_p
        assert model.elbo().numpy() < log_p


@pytest.mark.slow
def test_sparse_form_with_inducing_inputs_at_the_data_equals_full_form(small_data):
    X, _ = small_data
    full = KLCorrected(_kernel(), data=small_data)
    sparse = KLCorrected(_kernel(), inducing_variable=X.copy(), data=small_data)
    full_trace = fit(full, max_iter=8)
    sparse_trace = fit(sparse, max_iter=8)
    np.testing.assert_allclose(
        full_trace.column("objective"), sparse_trace.column("objective"), rtol=1e-6
    )
    for name in ("_kl_corrected_bound", "_standard_bound", "elbo"):
        np.testing.assert_allclose(getattr(full, name)(), getattr(sparse, name)(), rtol=1e-6)
    Xnew = np.linspace(-2, 2, 7)[:, None].repeat(2, axis=1)
    for a, b in zip(full.predict_f(Xnew), sparse.predict_f(Xnew)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------------------------------
# Predictions and training.


def test_f_is_f_bar_and_the_likelihood_sees_the_noise_around_it(small_data):
    """predict_f is f̄'s predictive, GPflow's posterior object's in every layout; predict_y and
    predict_log_density integrate the likelihood over f = f̄ + ε, of variance larger by β⁻¹."""
    model = KLCorrected(_kernel(), beta=0.7, data=small_data)
    model.update_sites(2)
    Xnew = np.array([[0.3, -1.0], [1.5, 0.2]])
    for full_cov in (False, True):
        for full_output_cov in (False, True):
            ours = model.predict_f(Xnew, full_cov=full_cov, full_output_cov=full_output_cov)
            theirs = model.posterior().predict_f(
                Xnew, full_cov=full_cov, full_output_cov=full_output_cov
            )
            for a, b in zip(ours, theirs):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    mean_bar, var_bar = model.predict_f(Xnew)
    p, _ = model.predict_y(Xnew)
    want = stats.norm.cdf(mean_bar / np.sqrt(1.0 + var_bar + 1.0 / 0.7))
    np.testing.assert_allclose(p, 1e-3 + (1 - 2e-3) * want, rtol=1e-10)
    Y = np.array([[1.0], [0.0]])
    own = np.where(Y == 1.0, p, 1.0 - p)
    np.testing.assert_allclose(
        model.predict_log_density((Xnew, Y))[:, None], np.log(own), rtol=1e-10
    )


@pytest.mark.parametrize("bound", ["kl_corrected", "standard"])
@pytest.mark.slow
def test_fit_runs_em_with_one_trace_row_per_iteration_and_never_lowers_the_bound(small_data, bound):
    model = KLCorrected(_kernel(), bound=bound, data=small_data)
    trace = fit(model, method="em", max_iter=25, tol=0.0)
    assert trace.method == "em"
    assert len(trace.rows) == 25 and trace.column("iteration")[-1] == 25
    objective = trace.column("objective")
    assert np.all(np.diff(objective) > -1e-7 * np.abs(objective[1:]))
    # Each row is taken right after an E-step, where the two bounds coincide: the bound of the
    # q(fₙ) that the stored q(f̄) is optimal for. Reading q(fₙ) off q(f̄) again, an E-step for
    # q(fₙ), cannot lower either bound.
    for bound_now in (model._standard_bound(), model._kl_corrected_bound()):
        assert objective[-1] <= float(bound_now) + 1e-10


@pytest.mark.slow
def test_gpflow_scipy_on_the_training_loss_reaches_the_fit(small_data):
    """Every evaluation of training_loss takes E-steps, so GPflow's Scipy ends where fit does."""
    fitted = KLCorrected(_kernel(), data=small_data)
    fit(fitted)
    model = KLCorrected(_kernel(), data=small_data)
    gpflow.optimizers.Scipy().minimize(model.training_loss_closure(), model.trainable_variables)
    np.testing.assert_allclose(model._objective(), fitted._objective(), rtol=1e-5)
    Xnew = np.linspace(-2, 2, 7)[:, None].repeat(2, axis=1)
    np.testing.assert_allclose(model.predict_y(Xnew)[0], fitted.predict_y(Xnew)[0], atol=1e-3)


# --------------------------------------------------------------------------------------------------
# Bad input.


def test_bad_arguments_raise_clear_errors(small_data):
    X, Y = small_data
    with pytest.raises(ValueError, match="bound must be one of"):
        KLCorrected(_kernel(), bound="corrected", data=small_data)
    with pytest.raises(ValueError, match="e_step must be one of"):
        KLCorrected(_kernel(), e_step="em", data=small_data)
    with pytest.raises(ValueError, match="beta must be a positive"):
        KLCorrected(_kernel(), beta=0.0, data=small_data)
    with pytest.raises(ValueError, match="need inducing points"):
        KLCorrected(_kernel(), batch_size=10, data=small_data)
    with pytest.raises(IncompatibleLikelihoodError, match="ScalarLikelihood"):
        KLCorrected(_kernel(), gpflow.likelihoods.Softmax(3), data=small_data)
    with pytest.raises(InvalidDataError, match="binary labels"):
        KLCorrected(_kernel(), data=(X, Y + 1.0))
    model = KLCorrected(_kernel(), data=small_data)
    with pytest.raises(ValueError, match=r"method must be one of \['em', 'persistent'\]"):
        fit(model, method="analytic")
    with pytest.raises(ValueError, match="holds its training data"):
        fit(model, small_data)
    with pytest.raises(ValueError, match="bound must be one of"):
        model.bound = "KL"


def test_signed_labels_give_the_same_model_and_inputs_are_not_modified(small_data):
    X, Y = small_data
    X_before, Y_signed = X.copy(), 2.0 * Y - 1.0
    a = KLCorrected(_kernel(), data=(X, Y))
    b = KLCorrected(_kernel(), data=(X, Y_signed))
    np.testing.assert_allclose(a._kl_corrected_bound(), b._kl_corrected_bound(), rtol=1e-12)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(Y_signed, 2.0 * Y - 1.0)


@pytest.mark.slow
def test_beta_is_fixed_unless_asked_for(small_data):
    fixed = KLCorrected(_kernel(), beta=2.0, data=small_data)
    assert not fixed.beta.trainable
    fit(fixed, max_iter=3)
    assert fixed.beta.numpy() == 2.0
    trained = KLCorrected(_kernel(), beta=2.0, train_beta=True, data=small_data)
    before = fit(trained, max_iter=1).rows[-1]["objective"]
    trace = fit(trained, max_iter=5)
    assert trained.beta.numpy() != pytest.approx(2.0)
    assert trace.rows[-1]["objective"] > before


@pytest.mark.slow
def test_default_persistent_route_adopts_e_steps_with_their_optimal_q(small_data):
    """
    The default route ends with q(f̄) optimal for the adopted q(fₙ), where the standard bound at
    the stored q(f̄) equals the KL-corrected bound; it climbs at least as high as EM's first
    iterations. For the standard bound, which the persistent route refuses (naming the route
    that takes it), ``fit`` takes EM by default.
    """
    model = KLCorrected(_kernel(), inducing_variable=6, data=small_data)
    start = float(model._kl_corrected_bound())
    trace = fit(model, max_iter=30)
    assert trace.method == "persistent"
    final = trace.rows[-1]["objective"]
    np.testing.assert_allclose(model._kl_corrected_bound(), final, rtol=1e-10)
    np.testing.assert_allclose(model._standard_bound(), final, rtol=1e-10)
    em = KLCorrected(_kernel(), inducing_variable=6, data=small_data)
    em_final = fit(em, method="em", max_iter=3).rows[-1]["objective"]
    assert start < em_final <= final + 1e-8 * abs(final)
    standard = KLCorrected(_kernel(), bound="standard", data=small_data)
    with pytest.raises(ValueError, match='method="em"'):
        fit(standard, method="persistent", max_iter=1)
    assert fit(standard, max_iter=1).method == "em"


@pytest.mark.slow
@pytest.mark.parametrize(
    "bound", ["kl_corrected", pytest.param("standard", marks=pytest.mark.slow)]
)
def test_the_likelihoods_own_parameters_get_the_gradient_of_the_maximised_bound(bound):
    """At the E-steps' fixed point the bound's gradient in a likelihood parameter (a Gaussian's
    variance) is that of the bound maximised over q(fₙ) (the envelope theorem), as a central
    difference of the converged bound says; it was missing, the sites holding q(fₙ) fixed."""
    rng = np.random.default_rng(0)
    X = rng.random((60, 1))
    Y = np.sin(5 * X) + 0.3 * rng.standard_normal((60, 1))

    def model(variance):
        likelihood = gpflow.likelihoods.Gaussian(variance=variance)
        return KLCorrected(_kernel(), likelihood, X[::6].copy(), bound=bound, beta=2.0, data=(X, Y))

    def converged(variance):
        built = model(variance)
        built.update_sites(60)
        return float(built._objective())

    at = model(0.5)
    at.update_sites(60)
    with tf.GradientTape() as tape:
        objective = at._objective()
    gradient = tape.gradient(objective, at.likelihood.variance.unconstrained_variable)
    assert gradient is not None
    h = 1e-4
    u = float(at.likelihood.variance.unconstrained_variable)
    softplus = lambda x: np.log1p(np.exp(x))  # noqa: E731  GPflow's positive transform
    difference = (converged(softplus(u + h)) - converged(softplus(u - h))) / (2 * h)
    np.testing.assert_allclose(float(gradient), difference, rtol=1e-4)
