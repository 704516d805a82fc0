"""VITaylor: Taylor sites from autodiff, exactness for Gaussian likelihoods, and other likelihoods."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import gpflow_fastvi as fv
from gpflow_fastvi.sites import log_density_derivatives, mixed_derivatives, taylor_sites

LOGIT = dict(invlink=tf.sigmoid)


def log_density_of(likelihood, X, Y):
    """F ↦ log p(Y | F) at inputs X, the function the Taylor sites expand."""
    return lambda F: likelihood.log_prob(X, F, Y)


def test_logit_coefficients_match_the_paper():
    """Paper 000 eq. 16–19: φ = y/(1 + e^{yξ}), ψ = e^{yξ}/(2(1 + e^{yξ})²), B uses 2Ψ, v = φ + 2Ψξ."""
    xi = np.linspace(-8.0, 8.0, 33)[:, None]
    for label in (0.0, 1.0):
        Y = np.full_like(xi, label)
        y = 2.0 * Y - 1.0
        likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
        X = np.zeros_like(xi)
        sites = taylor_sites(log_density_of(likelihood, X, Y), tf.constant(xi))
        phi = y / (1.0 + np.exp(y * xi))
        psi = np.exp(y * xi) / (2.0 * (1.0 + np.exp(y * xi)) ** 2)
        np.testing.assert_allclose(sites.w, 2.0 * psi, rtol=1e-10)
        np.testing.assert_allclose(sites.b, phi + 2.0 * psi * xi, rtol=1e-10, atol=1e-14)
        # The site touches log p at ξ with the same slope and curvature.
        log_p = -np.log1p(np.exp(-y * xi))
        np.testing.assert_allclose(
            sites.a + sites.b * xi - 0.5 * sites.w * xi**2, log_p, rtol=1e-10
        )


def test_gaussian_site_is_the_log_density_itself(rng):
    variance = 0.3
    likelihood = gpflow.likelihoods.Gaussian(variance=variance)
    Y = rng.standard_normal((20, 1))
    X = np.zeros_like(Y)
    sites = taylor_sites(
        log_density_of(likelihood, X, Y), tf.constant(rng.standard_normal((20, 1)))
    )
    F = rng.standard_normal((20, 1)) * 3.0
    exact = likelihood.log_prob(X, F, Y).numpy()[:, None]
    np.testing.assert_allclose(sites.a + sites.b * F - 0.5 * sites.w * F**2, exact, rtol=1e-10)


def test_mixed_derivatives_are_the_chain_rule_through_w(rng):
    """For outputs f = W g: the summed log-density, its gradient in g and its Hessian's diagonal
    are those of autodiff through W; the majorized curvature is the Hessian's absolute row sums,
    and the negative Hessian is below the diagonal it gives (a separable quadratic under the
    expansion)."""
    N, P, L = 7, 4, 3
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    X = np.zeros((N, 1))
    Y = (rng.uniform(size=(N, P)) < 0.5).astype(float)
    W = tf.constant(rng.standard_normal((P, L)))
    xi = tf.constant(rng.standard_normal((N, L)))

    def per_output(F):
        return likelihood._scalar_log_prob(X, F, Y)

    with tf.GradientTape() as outer:
        outer.watch(xi)
        with tf.GradientTape() as inner:
            inner.watch(xi)
            total = tf.reduce_sum(per_output(tf.matmul(xi, W, transpose_b=True)), axis=-1)
            summed = tf.reduce_sum(total)
        g = inner.gradient(summed, xi)  # each point's total depends on its own ξ only
    hessian = outer.batch_jacobian(g, xi).numpy()  # [N, L, L]
    log_p, gradient, diagonal = mixed_derivatives(per_output, xi, W)
    np.testing.assert_allclose(log_p[:, 0], total, rtol=1e-12)
    np.testing.assert_allclose(gradient, g, rtol=1e-10)
    np.testing.assert_allclose(diagonal, np.diagonal(hessian, axis1=1, axis2=2), rtol=1e-10)
    _, _, majorized = mixed_derivatives(per_output, xi, W, majorized=True)
    np.testing.assert_allclose(-majorized, np.abs(hessian).sum(axis=-1), rtol=1e-10)
    for n in range(N):
        gap = np.diag(-majorized.numpy()[n]) + hessian[n]  # diag(R) − (−H) ⪰ 0
        assert np.linalg.eigvalsh(gap).min() > -1e-12


def test_curvature_is_clipped_where_the_density_is_not_log_concave():
    """Student-t far in its tails, and GPflow's probit with its 1e-3 offset, bend log p upwards."""
    xi = tf.constant(np.linspace(-10.0, 10.0, 41)[:, None])
    X = tf.zeros_like(xi)
    for likelihood, Y in (
        (gpflow.likelihoods.StudentT(scale=0.5, df=3.0), tf.zeros_like(xi)),
        (gpflow.likelihoods.Bernoulli(), tf.ones_like(xi)),
    ):
        _, _, h = log_density_derivatives(log_density_of(likelihood, X, Y), xi)
        assert np.any(h.numpy() > 0.0)  # the safeguard is needed here...
        sites = taylor_sites(log_density_of(likelihood, X, Y), xi)
        assert np.all(sites.w.numpy() >= 0.0) and np.all(
            np.isfinite(sites.b.numpy())
        )  # ...and holds


def test_non_finite_derivatives_raise_naming_the_likelihood():
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    xi = tf.constant([[0.0], [40.0]], dtype=tf.float64)  # log(1 − σ(40)) rounds to log 0
    with pytest.raises(tf.errors.InvalidArgumentError, match="Bernoulli"):
        taylor_sites(
            lambda F: likelihood.log_prob(tf.zeros_like(F), F, tf.zeros_like(F)),
            xi,
            name="Bernoulli",
        )


def test_logit_sites_are_finite_and_exact_where_gpflows_bernoulli_underflows():
    """
    VITaylor expands log σ(y f) itself for the logit link, so that a posterior mean beyond
    f ≈ 36 (well-separated data) cannot stop training: g = y σ(−y ξ), h = −σ(ξ) σ(−ξ). The
    expansion's value and slope at ξ are exact everywhere; its curvature is −h on the right side
    of the boundary and the ceiling's floor g²/(2 (0 − log σ(yξ))) far on the wrong side.
    """
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    Y = np.array([[0.0], [1.0], [0.0], [1.0]])
    model = fv.VITaylor(
        gpflow.kernels.SquaredExponential(), inducing_variable=X.copy(), data=(X, Y)
    )
    xi = tf.constant([[40.0], [-60.0], [-3.0], [50.0]], dtype=tf.float64)
    sites = model._site_rule(*model.data, xi)
    y, x = np.array([[-1.0], [1.0], [-1.0], [1.0]]), xi.numpy()
    sigmoid = lambda t: 1.0 / (1.0 + np.exp(-t))  # noqa: E731
    log_p = -np.logaddexp(0.0, -y * x)
    g = y * sigmoid(-y * x)
    np.testing.assert_allclose(sites.a + sites.b * x - 0.5 * sites.w * x**2, log_p, rtol=1e-10)
    np.testing.assert_allclose(sites.b - sites.w * x, g, rtol=1e-10, atol=1e-13)
    wrong_side = (y * x < 0)[:, 0]
    floor = g**2 / (-2.0 * log_p)
    np.testing.assert_allclose(sites.w.numpy()[wrong_side], floor[wrong_side], rtol=1e-10)
    # (σ(40) σ(−40) ≈ 4·10⁻¹⁸ may come out as 0: an absolute error far below anything that counts)
    w = sigmoid(x) * sigmoid(-x)
    np.testing.assert_allclose(sites.w.numpy()[~wrong_side], w[~wrong_side], atol=1e-15)


@settings(max_examples=60, deadline=None)
@given(
    xi=st.floats(-700.0, 700.0),
    label=st.sampled_from([0.0, 1.0]),
    link=st.sampled_from(["logit", "probit"]),
)
def test_a_site_never_promises_more_than_the_likelihood_can_give(xi, label, link):
    """
    With the ceiling of a discrete likelihood (log p ≤ 0), the Taylor site's peak
    log p(y | ξ) + g²/(2w) is at most 0, for either link and any expansion point, and the
    site still touches log p at ξ with its slope; where the expansion's own peak is already
    below 0 (y ξ > −0.92 for the logit link) its curvature is left as it was.
    """
    likelihood = gpflow.likelihoods.Bernoulli(**(LOGIT if link == "logit" else {}))
    Y = tf.constant([[label]], dtype=tf.float64)
    log_density = log_density_of(likelihood, tf.zeros_like(Y), Y)
    if link == "logit":  # the stable form VITaylor expands, finite at any ξ
        log_density = lambda F: -tf.math.softplus(-(2.0 * Y - 1.0) * F)[:, 0]  # noqa: E731
    x = tf.constant([[xi]], dtype=tf.float64)
    log_p, g, h = (t.numpy()[0, 0] for t in log_density_derivatives(log_density, x))
    assume(np.isfinite([log_p, g, h]).all())
    site = taylor_sites(log_density, x, ceiling=0.0)
    a, b, w = (float(t) for t in (site.a, site.b, site.w))
    if w > 0:
        assert a + b**2 / (2.0 * w) <= 1e-9 * max(1.0, abs(a))  # the peak, at f = b / w
    else:
        assert b * b == 0.0 and a <= 0.0  # flat, but for a slope whose square underflows
    np.testing.assert_allclose(a + b * xi - 0.5 * w * xi**2, log_p, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b - w * xi, g, rtol=1e-9, atol=1e-12)
    if link == "logit" and (2.0 * label - 1.0) * xi > -0.9:
        np.testing.assert_allclose(w, max(-h, 0.0), rtol=1e-12)


def test_the_taylor_objective_never_exceeds_log_p_y_ceiling(rng):
    """
    The collapsed objective of ceiling-respecting sites is at most N · 0 for a Bernoulli
    likelihood, however the hyperparameters inflate it: a huge kernel variance with a q(u) that
    puts every point on the wrong side (whose plain expansions each promise about e^|yξ|/2 > 0)
    still gives an objective ≤ 0, and the SVGP ELBO at the closed-form q(u) is finite.
    """
    X = rng.uniform(-2.0, 2.0, (200, 1))
    Y = (X > 0).astype(float)
    model = fv.VITaylor(
        gpflow.kernels.SquaredExponential(variance=1e6),
        inducing_variable=X[::10].copy(),
        data=(X, Y),
    )
    model.q_mu.assign(-30.0 * np.sign(X[::10]))  # whitened: every mean far on the wrong side
    objective = float(model._objective())
    assert objective <= 0.0
    model.update_sites(5)
    assert float(model._objective()) <= 0.0 and np.isfinite(float(model.elbo()))


@pytest.mark.slow
@pytest.mark.parametrize("with_mean", [False, True])
def test_gaussian_likelihood_gives_sgpr_exactly(rng, with_mean):
    X = rng.uniform(-3.0, 3.0, size=(80, 1))
    Y = np.sin(2.0 * X) + 0.2 * rng.standard_normal((80, 1)) + 1.5
    Z = X[::8].copy()

    def mean():
        return gpflow.mean_functions.Constant(0.7) if with_mean else None

    model = fv.VITaylor(
        gpflow.kernels.Matern32(),
        inducing_variable=Z,
        likelihood=gpflow.likelihoods.Gaussian(variance=0.2),
        mean_function=mean(),
        data=(X, Y),
    )
    sgpr = gpflow.models.SGPR(
        (X, Y), gpflow.kernels.Matern32(), Z, mean_function=mean(), noise_variance=0.2
    )
    np.testing.assert_allclose(-model.training_loss(), sgpr.elbo(), rtol=1e-10)
    # Trained, both reach the same hyperparameters and inducing inputs (the sites are exact for
    # any ξ), each training Z by default.
    fv.fit(model, max_iter=200, tol=1e-10)
    gpflow.optimizers.Scipy().minimize(sgpr.training_loss, sgpr.trainable_variables)
    np.testing.assert_allclose(-model.training_loss(), sgpr.elbo(), rtol=1e-6)
    np.testing.assert_allclose(model.likelihood.variance, sgpr.likelihood.variance, rtol=1e-3)
    np.testing.assert_allclose(model.predict_f(X)[0], sgpr.predict_f(X)[0], atol=1e-3)


def test_gaussian_likelihood_with_z_equal_x_gives_gpr(rng):
    X = rng.uniform(-3.0, 3.0, size=(30, 1))
    Y = np.cos(X) + 0.1 * rng.standard_normal((30, 1))
    with gpflow.config.as_context(gpflow.config.Config(float=np.float64, jitter=1e-12)):
        model = fv.VITaylor(
            gpflow.kernels.SquaredExponential(),
            inducing_variable=X.copy(),
            likelihood=gpflow.likelihoods.Gaussian(0.05),
            data=(X, Y),
        )
        bound = model.training_loss()
    gpr = gpflow.models.GPR((X, Y), gpflow.kernels.SquaredExponential(), noise_variance=0.05)
    np.testing.assert_allclose(-bound, gpr.log_marginal_likelihood(), rtol=1e-8)


@pytest.mark.slow
def test_logit_expansion_points_converge_to_the_posterior_mean(binary_data):
    model = fv.VITaylor(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        inducing_variable=12,
        data=binary_data,
    )
    gpflow.set_trainable(model.kernel, False)
    model.update_sites(100)
    X, _ = model.data
    Fmu, _ = model.predict_f(X)
    np.testing.assert_allclose(model._site_parameters()[0], Fmu, atol=1e-12)  # ξ read as E_q[f]
    model.update_sites(1)
    np.testing.assert_allclose(model.predict_f(X)[0], Fmu, atol=1e-8)  # ξ = E_q[f]: a fixed point
    # Near the fixed point, the approximation is close to the true ELBO (here within 0.5 %).
    assert abs(float(model.elbo()) + float(model.training_loss())) < 5e-3 * abs(float(model.elbo()))


@pytest.mark.slow
def test_poisson_counts_match_svgp(rng):
    """Counts from a known GP: VITaylor's predictive log density ≈ SVGP + Poisson's."""
    X = np.sort(rng.uniform(0.0, 10.0, size=(300, 1)), axis=0)
    f = 1.0 + np.sin(X) + 0.3 * X / 10.0
    Y = rng.poisson(np.exp(f)).astype(float)
    X_test = np.linspace(0.0, 10.0, 200)[:, None]
    Y_test = rng.poisson(np.exp(1.0 + np.sin(X_test) + 0.3 * X_test / 10.0)).astype(float)
    Z = np.linspace(0.0, 10.0, 20)[:, None]
    model = fv.VITaylor(
        gpflow.kernels.SquaredExponential(),
        inducing_variable=Z,
        likelihood=gpflow.likelihoods.Poisson(),
        data=(X, Y),
    )
    trace = fv.fit(model)
    assert trace.converged
    svgp = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(), gpflow.likelihoods.Poisson(), Z.copy()
    )
    gpflow.set_trainable(svgp.inducing_variable, False)
    gpflow.optimizers.Scipy().minimize(svgp.training_loss_closure((X, Y)), svgp.trainable_variables)
    ours = np.mean(model.predict_log_density((X_test, Y_test)))
    theirs = np.mean(svgp.predict_log_density((X_test, Y_test)))
    assert abs(ours - theirs) < 0.01
    np.testing.assert_allclose(model.elbo(), svgp.elbo((X, Y)), rtol=2e-3)


def test_bad_likelihoods_methods_and_targets_raise(binary_data, rng):
    X, Y = binary_data
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(fv.IncompatibleLikelihoodError, match="RobustMax is flat"):
        fv.VITaylor(
            kernel,
            inducing_variable=5,
            likelihood=gpflow.likelihoods.MultiClass(3),
            data=binary_data,
        )
    with pytest.raises(fv.InvalidDataError, match="non-negative integer counts"):
        fv.VITaylor(
            kernel, inducing_variable=5, likelihood=gpflow.likelihoods.Poisson(), data=(X, Y - 0.5)
        )
    with pytest.raises(fv.InvalidDataError, match="binary labels"):
        fv.VITaylor(kernel, inducing_variable=5, data=(X, Y * 3.0))
    model = fv.VITaylor(kernel, inducing_variable=5, data=binary_data)
    with pytest.raises(ValueError, match=r"method must be one of \['analytic', 'persistent'\]"):
        fv.fit(model, method="full")
    assert {id(v) for v in model.trainable_variables} == {
        id(v) for v in model.kernel.trainable_variables
    } | {id(model.inducing_variable.Z.unconstrained_variable)}


@pytest.mark.slow
@pytest.mark.parametrize("link", ["logit", "probit"])
def test_banana_accuracy_matches_vijj_and_svgp(banana_split, link):
    X_train, Y_train, X_test, Y_test = banana_split
    likelihood = (
        gpflow.likelihoods.Bernoulli(**LOGIT) if link == "logit" else gpflow.likelihoods.Bernoulli()
    )
    Z = fv.kmeans_inducing_points(X_train, 50, seed=0)
    model = fv.VITaylor(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        inducing_variable=Z,
        likelihood=likelihood,
        data=(X_train, Y_train),
    )
    trace = fv.fit(model)
    assert trace.converged
    accuracy = np.mean((model.predict_y(X_test)[0].numpy() > 0.5) == (Y_test > 0.5))
    assert accuracy > 0.894  # SVGP + Scipy and VIJJ reach 0.904 on this split (see test_fit)
