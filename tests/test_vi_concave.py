"""VIConcave (paper 003): the standard ELBO's optimum by steps that never lower it."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.gaussian import ascent
from gpflow_fastvi.sites import expectation_sites

from .conftest import make_binary_data
from .references.coordinate import coordinate_ascent, expected_log_density

LOGIT = dict(invlink=tf.sigmoid)


def _kernel():
    return gpflow.kernels.SquaredExponential(lengthscales=0.8)


def _steps(model, data, n):
    return [float(model.update_sites(1, data=data)) for _ in range(n)]


def _optimum_by_scipy(model, loss):
    """GPflow's Scipy on q alone (θ fixed), to convergence: the reference optimum."""
    gpflow.set_trainable(model.kernel, False)
    gpflow.set_trainable(model.likelihood, False)
    if hasattr(model, "inducing_variable"):
        gpflow.set_trainable(model.inducing_variable, False)
    gpflow.optimizers.Scipy().minimize(
        loss, model.trainable_variables, options=dict(maxiter=10_000, ftol=1e-15, gtol=1e-10)
    )


@pytest.fixture
def counts(rng):
    X = rng.uniform(-2.0, 2.0, size=(80, 1))
    return X, rng.poisson(np.exp(1.0 + np.sin(2.0 * X))).astype(float)


@pytest.mark.slow
@pytest.mark.parametrize(
    "likelihood",
    [gpflow.likelihoods.Bernoulli(**LOGIT), gpflow.likelihoods.Bernoulli()],
    ids=["logit", "probit"],
)
def test_sparse_form_reaches_svgps_optimum(rng, likelihood):
    X, Y = make_binary_data(rng, N=120)
    Z = X[::8].copy()
    model = fv.VIConcave(_kernel(), likelihood, Z, num_data=len(X))
    elbos = _steps(model, (X, Y), 25)
    svgp = gpflow.models.SVGP(_kernel(), likelihood, Z, num_data=len(X))
    _optimum_by_scipy(svgp, svgp.training_loss_closure((X, Y)))
    np.testing.assert_allclose(elbos[-1], svgp.elbo((X, Y)).numpy(), rtol=1e-6)
    assert np.all(np.diff(elbos) >= -1e-9 * abs(elbos[-1]))


@pytest.mark.slow
def test_sparse_form_reaches_svgps_optimum_for_poisson_counts(counts):
    X, Y = counts
    Z = X[::8].copy()
    model = fv.VIConcave(_kernel(), gpflow.likelihoods.Poisson(), Z, num_data=len(X))
    elbos = _steps(model, (X, Y), 40)
    svgp = gpflow.models.SVGP(_kernel(), gpflow.likelihoods.Poisson(), Z, num_data=len(X))
    _optimum_by_scipy(svgp, svgp.training_loss_closure((X, Y)))
    # Not below Scipy's end (which may stop a little short), and within 1e-6 of it.
    assert elbos[-1] >= svgp.elbo((X, Y)).numpy() - 1e-6 * abs(elbos[-1])
    np.testing.assert_allclose(elbos[-1], svgp.elbo((X, Y)).numpy(), rtol=1e-6)
    assert np.all(np.diff(elbos) >= -1e-9 * abs(elbos[-1]))


@pytest.mark.slow
def test_full_form_reaches_vgps_optimum(rng):
    X, Y = make_binary_data(rng, N=100)
    model = fv.VIConcave(_kernel(), data=(X, Y))
    assert model.inducing_variable.num_inducing == len(X)  # Z = X: the full GP
    elbos = _steps(model, None, 25)
    vgp = gpflow.models.VGP((X, Y), _kernel(), gpflow.likelihoods.Bernoulli(**LOGIT))
    _optimum_by_scipy(vgp, vgp.training_loss)
    np.testing.assert_allclose(elbos[-1], vgp.elbo().numpy(), rtol=1e-6)
    assert np.all(np.diff(elbos) >= -1e-9 * abs(elbos[-1]))


@pytest.mark.slow
def test_the_papers_coordinate_wise_sweeps_reach_the_same_optimum(rng):
    """The paper's own algorithm (rank-one updates of V, Newton on m) and VIConcave's steps on
    the shared core find the same q(f) = N(m, V) of the full GP: the fixed point is the ELBO's."""
    X, Y = make_binary_data(rng, N=80)
    model = fv.VIConcave(_kernel(), data=(X, Y))
    elbos = _steps(model, None, 40)
    K = model.kernel(X).numpy() + gpflow.config.default_jitter() * np.eye(len(X))
    reached = coordinate_ascent(K, 2.0 * Y.ravel() - 1.0)
    assert len(reached.elbos) < 40  # stopped by its own test
    # the same ELBO (its own formula, in K α and λ) and the same marginals as the model's
    np.testing.assert_allclose(reached.elbos[-1], elbos[-1], rtol=1e-7)
    mean, var = model.predict_f(X)
    np.testing.assert_allclose(reached.m, mean.numpy().ravel(), atol=1e-5)
    np.testing.assert_allclose(np.diag(reached.V), var.numpy().ravel(), atol=1e-5)
    # at the fixed point each site precision is the curvature of fᵦ at its own marginal
    dv = expected_log_density(2.0 * Y.ravel() - 1.0, reached.m, np.diag(reached.V))[2]
    np.testing.assert_allclose(reached.lam, -2.0 * dv, rtol=1e-6)


@pytest.mark.slow
def test_halving_the_step_is_what_keeps_the_bound_from_falling(rng, monkeypatch):
    """Large counts from the prior: the undamped fixed-point step overshoots (exp(m + v/2) grows
    fast) and lowers the ELBO; with halvings no step does."""
    X = rng.uniform(-2.0, 2.0, size=(60, 1))
    Y = rng.poisson(40.0 * np.exp(np.sin(2.0 * X))).astype(float)
    Z = X[::6].copy()

    def model():
        return fv.VIConcave(_kernel(), gpflow.likelihoods.Poisson(), Z, num_data=len(X))

    start = float(model().elbo((X, Y)))
    monkeypatch.setattr(ascent, "MAX_HALVINGS", 0)  # ρ = 1 or no step at all
    undamped = model()
    assert float(undamped.update_sites(1, data=(X, Y))) == pytest.approx(start)  # refused
    monkeypatch.undo()
    damped = model()
    elbos = [start] + _steps(damped, (X, Y), 30)
    assert elbos[1] > start
    assert np.all(np.diff(elbos) >= -1e-9 * abs(elbos[-1]))
    # and it gets there: the sites' fixed point, where a further step changes nothing
    again = _steps(damped, (X, Y), 1)[0]
    assert again == pytest.approx(elbos[-1], rel=1e-9)


def test_sites_touch_the_expected_log_likelihood(rng):
    """a + b m − w (m² + v)/2 = fᵦ(m, v), with the same derivatives in m and v (quadrature)."""
    likelihood = gpflow.likelihoods.Bernoulli()
    Y = (rng.uniform(size=(30, 1)) < 0.5).astype(float)
    m = tf.constant(rng.normal(size=(30, 1)))
    v = tf.constant(rng.uniform(0.1, 2.0, size=(30, 1)))
    expected = lambda m, v: likelihood.variational_expectations(None, m, v, Y)  # noqa: E731
    sites = expectation_sites(expected, m, v)
    site_value = lambda m, v: sites.a + sites.b * m - 0.5 * sites.w * (m**2 + v)  # noqa: E731
    np.testing.assert_allclose(site_value(m, v)[:, 0], expected(m, v), rtol=1e-12)
    h = 1e-6
    for dm, dv in ((h, 0.0), (0.0, h)):
        numeric = (expected(m + dm, v + dv) - expected(m - dm, v - dv)) / (2 * h)
        along_site = (site_value(m + dm, v + dv) - site_value(m - dm, v - dv))[:, 0] / (2 * h)
        np.testing.assert_allclose(along_site, numeric, rtol=1e-5, atol=1e-8)
    assert np.all(sites.w.numpy() >= 0)


@pytest.mark.slow
def test_fit_trains_the_hyperparameters_on_the_elbo(rng):
    X, Y = make_binary_data(rng, N=150)
    model = fv.VIConcave(_kernel(), inducing_variable=X[::10].copy(), data=(X, Y))
    before = float(model.elbo())
    trace = fv.fit(model)
    assert trace.converged
    np.testing.assert_allclose(trace.rows[-1]["objective"], model.elbo().numpy(), rtol=1e-8)
    assert model.elbo().numpy() > before
    # θ moved, and q(u) is at its optimum for the θ reached: a further step changes nothing
    np.testing.assert_allclose(float(model.update_sites(1)), model.elbo().numpy(), rtol=1e-6)


def test_refuses_likelihoods_that_are_not_log_concave_but_student_t():
    with pytest.raises(fv.IncompatibleLikelihoodError, match="concave"):
        fv.VIConcave(_kernel(), gpflow.likelihoods.Beta(), np.zeros((3, 1)), num_data=10)
    with pytest.raises(fv.IncompatibleLikelihoodError):
        fv.VIConcave(_kernel(), gpflow.likelihoods.Softmax(3), np.zeros((3, 1)), num_data=10)
    fv.VIConcave(_kernel(), gpflow.likelihoods.StudentT(), np.zeros((3, 1)), num_data=10)


@pytest.mark.slow
def test_student_t_with_outliers_reaches_svgps_elbo():
    """Student-t regression with a fifth of the points moved by ten noise scales: at the
    outliers the expected log-density bends upwards in the marginal variance (the site precision
    is clipped at 0 there), yet at SVGP's trained hyperparameters the steps reach SVGP's ELBO,
    and fit ends where SVGP trained by Scipy does, within 10⁻⁴ nats a point."""
    rng = np.random.default_rng(1)
    N = 200
    X = rng.uniform(-3.0, 3.0, (N, 1))
    Y = np.sin(2.0 * X) + 0.1 * rng.standard_normal((N, 1))
    outliers = rng.choice(N, N // 5, replace=False)
    Y[outliers] += rng.normal(0.0, 10.0, (N // 5, 1))
    Z = np.linspace(-3.0, 3.0, 15)[:, None]

    def built(model_class):
        return model_class(_kernel(), gpflow.likelihoods.StudentT(), Z.copy(), num_data=N)

    svgp = built(gpflow.models.SVGP)
    gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure((X, Y)), svgp.trainable_variables, options={"maxiter": 10_000}
    )
    target = float(svgp.elbo((X, Y)))
    at_svgps = built(fv.VIConcave)
    for ours, theirs in ((at_svgps.kernel, svgp.kernel), (at_svgps.likelihood, svgp.likelihood)):
        gpflow.utilities.multiple_assign(ours, gpflow.utilities.parameter_dict(theirs))
    at_svgps.update_sites(25, data=(X, Y))
    assert (target - float(at_svgps.elbo((X, Y)))) / N < 1e-4
    Fmu, Fvar = at_svgps.predict_f(X)
    with tf.GradientTape() as tape:
        tape.watch(Fvar)
        f_b = tf.reduce_sum(at_svgps._expected_log_density(X, Y, Fmu, Fvar))
    assert np.any(tape.gradient(f_b, Fvar).numpy() > 0)  # bends upwards: the clip binds
    trained = built(fv.VIConcave)
    fv.fit(trained, (X, Y))
    assert (target - float(trained.elbo((X, Y)))) / N < 1e-4


@pytest.mark.parametrize(
    "streamed", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["in_memory", "streamed"]
)
def test_objective_and_its_gradient_are_svgps_at_the_q_reached(rng, streamed):
    """
    The objective's gradient in θ goes through the sites of the steps' last pass (in memory) or
    sites read at the held marginals (streamed), not through the quadrature: value and gradient
    must be GPflow SVGP's ELBO and its gradient at the q(u) reached, whitened q(u) held fixed
    (the envelope theorem's gradient). Two steps from the prior: far from the optimum, where
    only a correct first-order touch gives the right gradient.
    """
    X, Y = make_binary_data(rng, N=120)
    Z = X[::8].copy()
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    model = fv.VIConcave(_kernel(), likelihood, Z, num_data=len(X))
    data = tf.data.Dataset.from_tensor_slices((X, Y)).batch(50) if streamed else (X, Y)
    with tf.GradientTape() as tape:
        stepped = model._stepped_sites(2, data)
    gradient = tape.gradient(stepped.objective, model.kernel.trainable_variables)

    svgp = gpflow.models.SVGP(_kernel(), likelihood, Z, num_data=len(X), whiten=True)
    svgp.q_mu.assign(stepped.q_mu)
    svgp.q_sqrt.assign(stepped.q_sqrt)
    with tf.GradientTape() as tape:
        elbo = svgp.elbo((X, Y))
    expected = tape.gradient(elbo, svgp.kernel.trainable_variables)
    assert float(stepped.objective) > float(model.elbo((X, Y)))  # the steps moved q(u)
    np.testing.assert_allclose(stepped.objective, elbo, rtol=1e-10)
    for ours, reference in zip(gradient, expected):
        np.testing.assert_allclose(ours, reference, rtol=1e-7)


def test_steps_from_kept_sites_at_a_new_theta(rng):
    """
    The persistent route's evaluation: the steps start from the optimal q(u), at the trial θ, for
    the sites read at another θ (the last accepted iterate's marginals). The objective and its
    gradient are still SVGP's at the q(u) reached, the first step is the whole step to those
    sites' optimum, and the sites handed on are those at the marginals of the q(u) reached.
    """
    X, Y = make_binary_data(rng, N=120)
    Z = X[::8].copy()
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    model = fv.VIConcave(_kernel(), likelihood, Z, num_data=len(X))
    model.update_sites(2, data=(X, Y))
    kept = model._site_parameters((X, Y))  # the sites (a, b, w) at the first θ
    model.kernel.lengthscales.assign(0.6)  # the trial θ

    one = model._stepped_sites(1, (X, Y), site_parameters=kept)
    # one step: the optimal q(u) for the kept sites, their collapsed bound's optimum at this θ
    sites = model._site_rule(X, Y, *kept)
    stats = fv.gaussian.statistics_from_projection(
        model._passes.projection(X, model._passes.Kmm_cholesky()), sites
    )
    target = fv.gaussian.site_target(stats, tf.ones((), tf.float64))
    m, R = fv.gaussian.q_from_natural(target)
    np.testing.assert_allclose(one.q_mu, m, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(one.q_sqrt, R, rtol=1e-9, atol=1e-12)

    with tf.GradientTape() as tape:
        stepped = model._stepped_sites(3, (X, Y), site_parameters=kept)
    gradient = tape.gradient(stepped.objective, model.kernel.trainable_variables)
    svgp = gpflow.models.SVGP(_kernel(), likelihood, Z, num_data=len(X), whiten=True)
    svgp.kernel.lengthscales.assign(0.6)
    svgp.q_mu.assign(stepped.q_mu)
    svgp.q_sqrt.assign(stepped.q_sqrt)
    with tf.GradientTape() as tape:
        elbo = svgp.elbo((X, Y))
    expected = tape.gradient(elbo, svgp.kernel.trainable_variables)
    assert float(stepped.objective) >= float(one.objective)  # the later steps did not lower it
    np.testing.assert_allclose(stepped.objective, elbo, rtol=1e-10)
    for ours, reference in zip(gradient, expected):
        np.testing.assert_allclose(ours, reference, rtol=1e-7)
    mean, var = svgp.predict_f(X)
    for ours, reference in zip(stepped.site_parameters, model.local_sites(X, Y, mean, var)):
        np.testing.assert_allclose(ours, reference, rtol=1e-8, atol=1e-12)


def test_objective_gradient_reaches_the_likelihoods_own_parameters(rng):
    """The sites touch fᵦ in the marginals only: a Gaussian's variance must still get SVGP's
    gradient (fᵦ's own, at the held marginals), as must the kernel's parameters."""
    X = rng.uniform(-2.0, 2.0, size=(60, 1))
    Y = np.sin(2.0 * X) + 0.3 * rng.normal(size=X.shape)
    Z = X[::6].copy()
    likelihood = gpflow.likelihoods.Gaussian(variance=0.5)
    model = fv.VIConcave(_kernel(), likelihood, Z, num_data=len(X))
    with tf.GradientTape() as tape:
        stepped = model._stepped_sites(2, (X, Y))
    gradient = tape.gradient(stepped.objective, model.trainable_variables)

    svgp = gpflow.models.SVGP(_kernel(), likelihood, Z, num_data=len(X), whiten=True)
    svgp.q_mu.assign(stepped.q_mu)
    svgp.q_sqrt.assign(stepped.q_sqrt)
    gpflow.set_trainable(svgp.q_mu, False)
    gpflow.set_trainable(svgp.q_sqrt, False)
    with tf.GradientTape() as tape:
        elbo = svgp.elbo((X, Y))
    expected = tape.gradient(elbo, svgp.trainable_variables)
    assert len(gradient) == len(expected) == 4  # Z, lengthscale, variance, noise variance
    np.testing.assert_allclose(stepped.objective, elbo, rtol=1e-10)
    for ours, reference in zip(gradient, expected):
        np.testing.assert_allclose(ours, reference, rtol=1e-7, atol=1e-10)


@pytest.mark.slow
def test_persistent_loss_does_not_jump_at_the_accepted_iterate():
    """
    The persistent route's loss at θ, from the kept sites of the last accepted iterate, is one
    continuous function of θ: at that iterate itself it is the limit of the loss beside it. The
    stored q(u) is a candidate start by the same rule at every θ (``gaussian.ascent.Fallback``); when
    it was one at the iterate's θ alone, the loss there differed from the loss beside it by 0.27
    nats at this iterate, and L-BFGS-B's line searches from such an iterate failed.
    """
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    from gpflow_fastvi.sklearn import GPClassifier

    X, y = sklearn_datasets.load_breast_cancer(return_X_y=True)
    estimator = GPClassifier(n_inducing=100, max_iter=12, random_state=1).fit(X, y)
    model = estimator.model_
    data = ((X - estimator.x_mean_) / estimator.x_scale_, y[:, None].astype(float))
    kept = model._site_parameters(data)  # the sites the last accepted iterate handed on

    lengthscales = model.kernel.lengthscales.unconstrained_variable
    accepted = lengthscales.numpy()

    def loss_at(shift):  # the iterate's θ itself, exactly, at shift 0
        lengthscales.assign(accepted + shift)
        return -float(model._stepped_sites(3, data, site_parameters=kept).objective)

    at, beside, further = loss_at(0.0), loss_at(1e-9), loss_at(1e-6)
    assert abs(beside - at) <= 1e-7 * abs(at)
    assert abs(further - at) <= 1e-4 * abs(at)
