"""VIConcave with GPflow's Softmax(C): E[log softmax] by fixed draws, its sites, the steps, fit."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.sites import (
    expectation_sites,
    expected_log_softmax,
    expected_log_softmax_gradient,
)
from gpflow_fastvi.sites.expectation import SOFTMAX_BLOCK, SOFTMAX_DRAWS, softmax_draws

from .test_polya_gamma_multiclass import C, three_classes


def make_model(data, M=12, **kwargs):
    X, _ = data
    return fv.VIConcave(
        gpflow.kernels.SquaredExponential(lengthscales=[0.8, 0.8], variance=2.0),
        gpflow.likelihoods.Softmax(C),
        X[:M].copy(),
        num_latent_gps=C,
        num_data=X.shape[0],
        train_inducing=False,
        **kwargs,
    )


def two_class_expectation(m, v, labels):
    """E[log softmax(f)_y] for two classes: E[log σ(d)] with d = f_y − f_other Gaussian, by
    Gauss–Hermite quadrature with 200 nodes (exact to rounding here)."""
    own = np.eye(2)[labels]
    mean = (own * m).sum(1) - ((1 - own) * m).sum(1)
    std = np.sqrt(v.sum(1))
    x, w = np.polynomial.hermite_e.hermegauss(200)
    d = mean[:, None] + std[:, None] * x
    return (-np.logaddexp(0.0, -d) * w).sum(1) / w.sum()


def random_marginals(rng, N, classes, spread, variances):
    """Marginals q(f_ic) = N(m_ic, v_ic) [N, classes] (means N(0, spread²), variances uniform
    over ``variances``), the class of each point, and the classes as the labels Y [N, 1]."""
    m = rng.normal(0.0, spread, (N, classes))
    v = rng.uniform(*variances, (N, classes))
    labels = rng.integers(0, classes, N)
    return m, v, labels, tf.constant(labels[:, None].astype(np.float64))


def plain_monte_carlo(m, v, labels, draws=2**18, seed=0):
    """E[log softmax(f)_y] per point by plain Monte Carlo in NumPy, independent of the package."""
    rng = np.random.default_rng(seed)
    totals = np.zeros(len(m))
    chunk = 2**14
    for _ in range(draws // chunk):
        f = m[:, None, :] + np.sqrt(v)[:, None, :] * rng.standard_normal(
            (len(m), chunk, m.shape[1])
        )
        own = np.take_along_axis(f, labels[:, None, None].repeat(chunk, 1), 2)[..., 0]
        totals += (own - np.logaddexp.reduce(f, axis=2)).sum(1)
    return totals / draws


@pytest.mark.slow
def test_the_fixed_draws_give_the_softmax_expectation_within_a_thousandth_of_a_nat(rng):
    """For two classes E[log softmax(f)_y] is a 1-D integral (exact by quadrature), for five a
    NumPy Monte Carlo estimate with 2¹⁸ draws per point: the default fixed draws' mean error
    over the points is below 10⁻³ nats. Jensen's inequality over the other classes, a
    closed-form lower bound, is measurably further off."""
    m, v, labels, Y = random_marginals(rng, 200, 2, 2.0, (0.01, 3.0))
    exact = two_class_expectation(m, v, labels)
    ours = expected_log_softmax(tf.constant(m), tf.constant(v), Y).numpy()
    assert abs(np.mean(ours - exact)) < 1e-3
    assert np.mean(np.abs(ours - exact)) < 3e-3

    m, v, labels, Y = random_marginals(rng, 40, 5, 1.5, (0.05, 2.0))
    reference = plain_monte_carlo(m, v, labels)
    ours = expected_log_softmax(tf.constant(m), tf.constant(v), Y).numpy()
    assert abs(np.mean(ours - reference)) < 1e-3
    own = np.eye(5)[labels].astype(bool)
    x, w = np.polynomial.hermite_e.hermegauss(40)
    f_y = m[own][:, None] + np.sqrt(v[own])[:, None] * x
    others = np.where(own, -np.inf, m + v / 2)
    jensen = -np.logaddexp(0.0, np.logaddexp.reduce(others[:, None, :] - f_y[..., None], axis=2))
    assert np.mean(reference - jensen @ (w / w.sum())) > 5e-3


def test_the_expectation_is_deterministic_and_blind_to_a_common_shift(rng):
    """The same number at every call, and unchanged when every class's mean moves together."""
    m, v, _, Y = random_marginals(rng, 30, C, 2.0, (0.05, 2.0))
    m, v = tf.constant(m), tf.constant(v)
    first = expected_log_softmax(m, v, Y).numpy()
    np.testing.assert_array_equal(expected_log_softmax(m, v, Y), first)
    np.testing.assert_allclose(expected_log_softmax(m + 3.7, v, Y), first, rtol=1e-12)


def test_the_blocks_of_points_give_the_draws_mean_of_all_points_at_once(rng):
    """Over several blocks of points (the last one padded), the value is the draws' mean in
    NumPy for every point, and the one-pass derivatives are automatic differentiation's."""
    rows = SOFTMAX_BLOCK // (SOFTMAX_DRAWS * C)
    N = 2 * rows + 7  # three blocks, the last padded
    m, v, labels, Y = random_marginals(rng, N, C, 2.0, (1e-4, 3.0))
    F = m[:, None, :] + np.sqrt(v)[:, None, :] * softmax_draws(C)
    reference = m[np.arange(N), labels] - np.logaddexp.reduce(F, axis=2).mean(axis=1)
    m, v = tf.constant(m), tf.constant(v)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([m, v])
        f_b = expected_log_softmax(m, v, Y)
    np.testing.assert_allclose(f_b, reference, rtol=1e-12, atol=1e-12)
    value, dm, dv = expected_log_softmax_gradient(m, v, Y)
    np.testing.assert_allclose(value[:, 0], reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dm, tape.gradient(f_b, m), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dv, tape.gradient(f_b, v), rtol=1e-9, atol=1e-12)


def test_the_sites_of_a_point_touch_the_expectation_in_every_class(rng):
    """Summed over the classes, the sites' expectation is fᵦ at (m, v), with its gradient in
    every m_c and v_c; the site precisions are not negative."""
    m, v, _, Y = random_marginals(rng, 30, C, 2.0, (0.05, 2.0))
    m, v = tf.constant(m), tf.constant(v)
    expected = lambda m, v: expected_log_softmax(m, v, Y)  # noqa: E731
    sites = expectation_sites(expected, m, v)
    one_pass = expectation_sites(
        expected, m, v, gradient=lambda m, v: expected_log_softmax_gradient(m, v, Y)
    )
    for automatic, fused in zip(sites, one_pass):
        np.testing.assert_allclose(fused, automatic, rtol=1e-9, atol=1e-12)
    assert np.all(sites.w.numpy() >= 0.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([m, v])
        f_b = expected_log_softmax(m, v, Y)
        touching = tf.reduce_sum(sites.a + sites.b * m - 0.5 * sites.w * (m**2 + v), axis=1)
    np.testing.assert_allclose(touching, f_b, rtol=1e-10, atol=1e-12)
    for variable in (m, v):
        np.testing.assert_allclose(
            tape.gradient(touching, variable), tape.gradient(f_b, variable), atol=1e-10
        )


@pytest.mark.slow
def test_the_steps_climb_to_a_stationary_point_of_the_elbo_with_centred_means(rng):
    """At fixed θ the steps never lower the objective; where they stop, its gradient in the
    whitened means is zero and the means sum to zero over the classes (the softmax does not see
    a shift common to all of them, so the KL alone sets it)."""
    data = three_classes(rng, N=80)
    model = make_model(data)
    values = [float(model.update_sites(1, data=data)) for _ in range(40)]
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    np.testing.assert_allclose(np.sum(model.q_mu.numpy(), axis=1), 0.0, atol=1e-10)
    np.testing.assert_allclose(float(model._objective(data)), values[-1], rtol=1e-10)
    with tf.GradientTape() as tape:
        tape.watch(model.q_mu.unconstrained_variable)
        objective = model._objective(data)
    gradient = tape.gradient(objective, model.q_mu.unconstrained_variable).numpy()
    assert np.max(np.abs(gradient)) < 1e-4


@pytest.mark.slow
def test_fit_learns_three_classes_as_gpflow_svgp_does(rng, tmp_path):
    """fit on 300 points of three classes: test accuracy within 2 points of GPflow's SVGP with
    Softmax trained by Scipy from the same start; the objective is the ELBO; a checkpoint restores into SVGP(num_latent_gps=C) and predicts the same.
    """
    data = three_classes(rng, N=300)
    test = three_classes(np.random.default_rng(11), N=300)
    model = make_model(data, M=20)
    trace = fv.fit(model, data, max_iter=100)
    assert trace.stop_reason == "converged"
    accuracy = np.mean(model.predict_y(test[0])[0].numpy().argmax(axis=1) == test[1][:, 0])
    svgp = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[0.8, 0.8], variance=2.0),
        gpflow.likelihoods.Softmax(C),
        data[0][:20].copy(),
        num_latent_gps=C,
        num_data=300,
    )
    gpflow.set_trainable(svgp.inducing_variable, False)
    labels = (data[0], data[1].astype(np.int64))
    gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure(labels), svgp.trainable_variables, options=dict(maxiter=300)
    )
    theirs = np.mean(svgp.predict_y(test[0])[0].numpy().argmax(axis=1) == test[1][:, 0])
    assert accuracy > max(0.9, theirs - 0.02)
    # The objective is SVGP's ELBO at the model's q(u), and the fixed draws' estimate of it is
    # within 10⁻³ nats per point of an independent estimate with 2¹⁸ draws per point.
    np.testing.assert_allclose(float(model._objective(data)), float(model.elbo(data)), rtol=1e-12)
    Fmu, Fvar = (t.numpy() for t in model.predict_f(data[0]))
    labels = data[1][:, 0].astype(int)
    ours = expected_log_softmax(tf.constant(Fmu), tf.constant(Fvar), tf.constant(data[1])).numpy()
    assert abs(np.mean(ours - plain_monte_carlo(Fmu, Fvar, labels))) < 1e-3
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=svgp).read(path).assert_existing_objects_matched()
    for a, b in zip(model.predict_f(test[0]), svgp.predict_f(test[0])):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_the_steps_form_site_statistics_only_for_a_q_they_step_on_from(rng, monkeypatch):
    """With the data in memory a pass keeps its sites, and their statistics (an N·M² product per
    latent function) are formed only for a q that a later step starts from: at most one per step
    taken, however many trials were halved, and none for the q of the last step, whose
    statistics are formed once, for the objective."""
    from gpflow_fastvi.models import closed_form, vi_concave

    formed = []
    original = closed_form.statistics_from_projection

    def counted(*args, **kwargs):
        formed.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(closed_form, "statistics_from_projection", counted)
    monkeypatch.setattr(vi_concave, "statistics_from_projection", counted, raising=False)
    data = three_classes(rng, N=80)
    model = make_model(data)
    before = float(model.elbo(data))
    steps = 4
    after = float(model.update_sites(steps, data=data))
    assert after > before  # the steps moved: they were not cut short
    # the start's, those of the first steps - 1 taken, and the objective's
    assert 2 <= len(formed) <= steps + 1


@pytest.mark.slow
def test_the_elbo_of_accepted_iterates_never_falls():
    """
    fit's persistent route on scikit-learn's wine set (178 points, 13 features, 3 classes): the
    objective, the softmax ELBO at the adopted q(u), rises at every accepted
    iterate, L-BFGS-B's restarts included (each evaluation steps from the better of the stored
    q(u) and the sites' optimum, so it is never below the state it starts from).
    """
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    Y = y[:, None].astype(float)
    D = X.shape[1]
    model = fv.VIConcave(
        gpflow.kernels.SquaredExponential(lengthscales=np.full(D, np.sqrt(D))),
        gpflow.likelihoods.Softmax(3),
        fv.kmeans_inducing_points(X, 15, seed=0),
        num_latent_gps=3,
        num_data=len(X),
        train_inducing=False,
    )
    trace = fv.fit(model, (X, Y), max_iter=60)
    objective = np.array([row["objective"] for row in trace.rows])
    assert len(objective) >= 10
    np.testing.assert_array_less(-1e-8 * np.abs(objective[1:]), np.diff(objective))


@pytest.mark.slow
def test_a_stream_steps_as_the_arrays_do(rng):
    """The objective and a step of a tf.data stream are those of the arrays."""
    data = three_classes(rng, N=120)
    in_memory, streamed = make_model(data), make_model(data)
    stream = tf.data.Dataset.from_tensor_slices(data).batch(50)
    np.testing.assert_allclose(in_memory._objective(stream), in_memory._objective(data), rtol=1e-10)
    np.testing.assert_allclose(
        streamed.update_sites(2, data=stream), in_memory.update_sites(2, data=data), rtol=1e-9
    )
    np.testing.assert_allclose(streamed.q_mu, in_memory.q_mu, atol=1e-9)


@pytest.mark.parametrize("model_class", [fv.VIJJ, fv.KLCorrected])
def test_the_binary_models_name_the_ones_that_take_c_classes(rng, model_class):
    X, _ = three_classes(rng)
    with pytest.raises(fv.IncompatibleLikelihoodError, match="VIConcave"):
        model_class(
            gpflow.kernels.SquaredExponential(),
            gpflow.likelihoods.Softmax(C),
            X[:5],
            num_latent_gps=C,
        )


def test_the_warm_start_reports_each_evaluation_as_a_row(rng):
    """With C classes fit takes site steps at the starting θ before L-BFGS-B starts: each is a
    row of the trace (its callback sees the model), so the first rows hold the starting
    hyperparameters while the objective rises, and only later rows move them."""
    data = three_classes(rng, N=150)
    model = make_model(data)
    start = model.kernel.lengthscales.numpy().copy()
    seen = []
    trace = fv.fit(
        model,
        data,
        max_iter=6,
        callback=lambda m: seen.append(m.kernel.lengthscales.numpy().copy()),
    )
    assert len(seen) == len(trace.rows) == 6
    at_start = [np.array_equal(lengthscales, start) for lengthscales in seen]
    assert at_start[0] and at_start[1]  # the warm start: θ has not moved
    assert not at_start[-1]  # L-BFGS-B has
    objective = trace.column("objective")
    first = at_start.index(False)
    assert np.all(np.diff(objective[:first]) > 0)
