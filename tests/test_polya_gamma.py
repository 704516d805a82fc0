"""PolyaGammaSVGP: its closed-form ELBO, its natural-gradient SVI, and its SVGP compatibility."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.sites import jj_sites, pg_kl, pg_mean, pg_optimal_c, pg_sites
from gpflow_fastvi.training import compiled

from .conftest import make_binary_data
from .references.quadrature import log_marginal_likelihood_by_quadrature

LOGIT = dict(invlink=tf.sigmoid)


def make_pg(data, M=12, whiten=True, train_inducing=False, **kwargs):
    X, _ = data
    model = fv.PolyaGammaSVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0] * X.shape[1]),
        gpflow.likelihoods.Bernoulli(**LOGIT),
        X[:M].copy(),
        num_data=X.shape[0],
        whiten=whiten,
        **kwargs,
    )
    gpflow.set_trainable(model.inducing_variable, train_inducing)
    return model


def test_polya_gamma_site_is_the_jaakkola_jordan_site_for_every_c():
    """E_q(ω)[log p(y | f, ω)] − KL[q(ω) ‖ p(ω)] with q(ω) = PG(1, c) is the JJ bound at ξ = c."""
    c = tf.constant(np.concatenate([[0.0, 1e-6, 1e-3], np.linspace(-40.0, 40.0, 161)])[:, None])
    for y in (-1.0, 1.0):
        Y = tf.fill(tf.shape(c), tf.constant(y, tf.float64))
        pg, jj = pg_sites(Y, c), jj_sites(Y, c)
        for name in ("a", "b", "w"):
            np.testing.assert_allclose(getattr(pg, name), getattr(jj, name), rtol=1e-12, atol=1e-14)


def test_polya_gamma_moments_against_the_series_definition():
    """E[ω] and KL(PG(1, c) ‖ PG(1, 0)) against PG(1, c) as the law of Σₖ gₖ / (2π²((k − ½)² + c²/4π²))."""
    k = np.arange(1, 200001)[:, None]
    c = np.array([0.0, 0.5, 2.0, 7.0])
    denominators = 2 * np.pi**2 * ((k - 0.5) ** 2 + c**2 / (4 * np.pi**2))  # gₖ ~ Exp(1)
    np.testing.assert_allclose(pg_mean(tf.constant(c)), np.sum(1 / denominators, 0), rtol=1e-5)
    # KL = log cosh(c/2) − c² E[ω]/2 from the density ratio cosh(c/2) exp(−c² ω / 2).
    expected_kl = np.log(np.cosh(c / 2)) - 0.5 * c**2 * np.sum(1 / denominators, 0)
    np.testing.assert_allclose(pg_kl(tf.constant(c)), expected_kl, rtol=1e-4, atol=1e-9)


def test_elbo_lies_below_svgp_elbo_and_log_marginal_likelihood(rng):
    """Tiny problem, Z = X: PG ELBO ≤ SVGP (quadrature) ELBO at the same q ≤ log p(y)."""
    X = rng.uniform(-1.0, 1.0, size=(3, 1))
    Y = np.array([[1.0], [0.0], [1.0]])
    model = make_pg((X, Y), M=3)
    fv.fit(model, (X, Y), max_iter=200, learning_rate=0.0 + 1e-9)
    data = (tf.constant(X), tf.constant(Y))
    pg_elbo = float(model.maximum_log_likelihood_objective(data))
    svgp_elbo = float(gpflow.models.SVGP.elbo(model, data))
    K = model.kernel(X).numpy()
    log_py = log_marginal_likelihood_by_quadrature(K, 2 * Y - 1)
    assert pg_elbo < svgp_elbo < log_py


@pytest.mark.slow
@pytest.mark.parametrize("whiten", [True, False])
def test_full_batch_rho_one_reaches_vijj(binary_data, whiten):
    """Coordinate ascent (full batch, ρ = 1, fixed θ) converges to VIJJ's q(u), ξ = c and bound."""
    X, Y = binary_data
    Z = X[:12].copy()
    vijj = fv.VIJJ(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        inducing_variable=Z,
        data=binary_data,
    )
    vijj.update_sites(400)
    model = make_pg(binary_data, whiten=whiten)
    gpflow.set_trainable(model.kernel, False)
    trace = fv.fit(model, binary_data, max_iter=400, tol=0.0)
    elbo = float(model.maximum_log_likelihood_objective(binary_data))
    np.testing.assert_allclose(elbo, float(vijj._objective()), rtol=1e-12)
    np.testing.assert_allclose(trace.rows[-1]["objective"], elbo, rtol=1e-12)
    np.testing.assert_allclose(
        pg_optimal_c(*model.predict_f(X)), vijj._site_parameters()[0], atol=1e-8
    )
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    if not whiten:  # VIJJ stores q whitened: compare the same distribution
        L = np.linalg.cholesky(
            model.kernel(Z).numpy() + gpflow.config.default_jitter() * np.eye(len(Z))
        )
        q_mu, q_sqrt = np.linalg.solve(L, q_mu), np.linalg.solve(L, q_sqrt[0])[None]
    np.testing.assert_allclose(q_mu, vijj.q_mu.numpy(), atol=1e-8)
    np.testing.assert_allclose(q_sqrt, vijj.q_sqrt.numpy(), atol=1e-8)


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("rho", [0.3, 1.0])
def test_step_agrees_with_gpflow_natural_gradient(binary_data, whiten, rho):
    """
    Our closed-form step = GPflow's NaturalGradient(gamma=ρ) on the closed-form ELBO; with ρ = 1
    that is the closed-form optimum for the c of the starting q(u), from a random start.
    """
    data = tuple(tf.constant(a) for a in binary_data)
    ours, theirs = make_pg(binary_data, whiten=whiten), make_pg(binary_data, whiten=whiten)
    rng = np.random.default_rng(3)
    q_sqrt = np.tril(0.2 * rng.standard_normal((12, 12)), -1) + np.diag(rng.uniform(0.3, 1.0, 12))
    for model in (ours, theirs):
        gpflow.set_trainable(model.kernel, False)
        model.q_mu.assign(np.linspace(-1.0, 1.0, 12)[:, None])
        model.q_sqrt.assign(q_sqrt[None])
    fv.NaturalGradientSVI(ours, step_size=rho).step(data)
    gpflow.optimizers.NaturalGradient(gamma=rho).minimize(
        lambda: -theirs.maximum_log_likelihood_objective(data), [(theirs.q_mu, theirs.q_sqrt)]
    )
    np.testing.assert_allclose(ours.q_mu, theirs.q_mu, rtol=1e-7, atol=1e-9)
    S_ours = ours.q_sqrt[0] @ tf.transpose(ours.q_sqrt[0])
    S_theirs = theirs.q_sqrt[0] @ tf.transpose(theirs.q_sqrt[0])
    np.testing.assert_allclose(S_ours, S_theirs, rtol=1e-7, atol=1e-9)


def test_mini_batch_elbo_is_unbiased(binary_data):
    """The mean of the scaled ELBOs of a partition into equal batches is the full-data ELBO."""
    X, Y = binary_data
    model = make_pg(binary_data)
    fv.fit(model, binary_data, batch_size=10, max_iter=2)  # somewhere away from the prior
    batches = [
        model.maximum_log_likelihood_objective((X[i : i + 10], Y[i : i + 10]))
        for i in range(0, len(X), 10)
    ]
    np.testing.assert_allclose(
        np.mean(batches), model.maximum_log_likelihood_objective(binary_data), rtol=1e-10
    )


def test_mini_batch_plans_have_no_tolerance_test_and_full_batch_plans_do(binary_data):
    # Mini-batch ELBO estimates are noisy: a tolerance on them would stop runs at random.
    assert fv.training.svi_plan(make_pg(binary_data), binary_data, batch_size=10).tol == 0.0
    assert fv.training.svi_plan(make_pg(binary_data), binary_data).tol > 0.0


def test_the_plateau_schedule_halves_the_steps_at_each_plateau_and_then_stops(binary_data):
    """Windows of passes that raise the mean estimate keep the steps; a window no higher than the
    one before halves ρ and Adam's rate; after the last halving a plateau is convergence."""
    svi = fv.NaturalGradientSVI(make_pg(binary_data), step_size=0.4, learning_rate=0.1)
    plateau = fv.training.plateau.Plateau(svi, points=10_000)  # progress: 1 nat per pass
    window = fv.training.plateau.PLATEAU_PATIENCE
    rising = [-100.0 * k for k in range(2 * window, 0, -1)]
    noisy_flat = [-0.5, 0.5, -0.2, 0.3, -0.2, 0.1][: 2 * window]
    assert not any(plateau.after_pass(e) for e in rising + noisy_flat[:window])
    assert float(svi.step_scale) == 1.0  # the flat window is still far above the one before
    assert not any(plateau.after_pass(e) for e in noisy_flat[window:])  # flat after flat: halve
    assert float(svi.step_scale) == 0.5
    assert float(svi.rho(0) * svi.step_scale) == pytest.approx(0.2)
    assert float(svi.optimizer.learning_rate) == pytest.approx(0.05)
    passes = 2 * window * fv.training.plateau.PLATEAU_HALVINGS
    ended = [plateau.after_pass(1.0) for _ in range(passes)]
    assert ended == [False] * (passes - 1) + [True]
    assert float(svi.step_scale) == 0.5**fv.training.plateau.PLATEAU_HALVINGS


# The mean ELBO estimates of the first 58 passes of PolyaGammaSVGP's SVI on 1,669 points (18
# features of scikit-learn's make_classification, 50 inducing inputs, batches of 1000: one step
# per pass). The full-data bound rose from -864 to -441 over them and went on rising to -392;
# windows of three passes read their scatter as five plateaus and ended the run here.
ONE_STEP_PASSES = [float(e) for e in """
    -837.7 -761.8 -700.4 -644.0 -609.0 -572.7 -568.8 -536.7 -528.1 -532.2 -523.0 -511.6 -500.6
    -479.7 -497.4 -481.3 -496.1 -475.4 -477.7 -450.4 -455.6 -465.9 -462.1 -460.8 -444.0 -455.1
    -457.9 -463.6 -437.1 -455.5 -448.4 -458.1 -428.7 -452.2 -468.3 -436.3 -425.6 -431.2 -442.7
    -445.4 -427.4 -442.8 -459.1 -457.5 -447.8 -448.4 -427.5 -441.7 -443.5 -449.3 -431.3 -435.4
    -456.1 -432.4 -441.9 -428.3 -443.8 -457.4
""".split()]


class CountedHalvings:
    """Stands in for a NaturalGradientSVI: counts the plateau schedule's halvings."""

    def __init__(self):
        self.halvings = 0

    def scale_steps(self, factor):
        assert factor == 0.5
        self.halvings += 1


def test_the_plateau_schedule_does_not_read_the_scatter_of_one_step_passes_as_plateaus():
    svi = CountedHalvings()
    plateau = fv.training.plateau.Plateau(svi, points=1669)
    assert not any(plateau.after_pass(e) for e in ONE_STEP_PASSES)
    assert svi.halvings == 0
    # Windows long enough that two windows' means differ by less than the rise allowed.
    noise = fv.training.plateau.pass_noise(plateau.residuals)
    assert 8.0 < noise < 20.0
    assert plateau.window() > 10 * fv.training.plateau.PLATEAU_PATIENCE // 2


def test_the_plateau_window_grows_with_the_scatter_of_the_passes(rng):
    plateau = fv.training.plateau
    trend = np.linspace(0.0, 50.0, 400)
    for sigma in (0.5, 5.0, 50.0):
        residuals = plateau.pass_residuals(trend + rng.normal(0.0, sigma, trend.size))
        assert plateau.pass_noise(residuals) == pytest.approx(sigma, rel=0.15)
    assert plateau.plateau_window(0.0, 1.0) == plateau.PLATEAU_PATIENCE
    assert plateau.plateau_window(0.1, 1.0) == plateau.PLATEAU_PATIENCE
    w = plateau.plateau_window(10.0, 0.1)
    assert 10.0 * np.sqrt(2.0 / w) <= w * 0.1 < 10.0 * np.sqrt(2.0 / (w - 1)) + 0.1
    assert plateau.plateau_window(1e9, 0.1) == plateau.MAX_WINDOW
    with pytest.raises(ValueError, match="tolerance must be positive"):
        plateau.plateau_window(1.0, 0.0)
    with pytest.raises(ValueError, match="at least one residual"):
        plateau.pass_noise([])


@pytest.mark.slow
def test_mini_batch_svi_ends_at_the_same_bound_from_two_lengthscale_starts(rng):
    """One step per pass (1500 points, batches of 1000): the run stops by its plateau schedule at
    an answer that does not depend on where its lengthscales started."""
    N, D = 1500, 6
    data = make_binary_data(rng, N=N, D=D)
    bounds = []
    for lengthscale in (0.3, 3.0):
        model = fv.PolyaGammaSVGP(
            gpflow.kernels.SquaredExponential(lengthscales=[lengthscale] * D),
            gpflow.likelihoods.Bernoulli(**LOGIT),
            data[0][:20].copy(),
            num_data=N,
            train_inducing=False,
        )
        trace = fv.fit(model, data)
        assert trace.stop_reason == "converged" and len(trace) < fv.training.plateau.MAX_PASSES
        bounds.append(float(model.maximum_log_likelihood_objective(data)) / N)
    assert bounds[0] == pytest.approx(bounds[1], abs=0.01)


@pytest.mark.slow
def test_mini_batch_svi_converges_by_itself_to_the_full_batch_answer(rng):
    """With its defaults the mini-batch route ends by the plateau schedule, not a cap, near the
    answer of full-batch steps."""
    data = make_binary_data(rng, N=2000)
    full, mini = make_pg(data, M=20), make_pg(data, M=20)
    fv.fit(full, data, batch_size=len(data[0]))
    trace = fv.fit(mini, data, batch_size=100)
    assert trace.stop_reason == "converged" and len(trace) < fv.training.plateau.MAX_PASSES
    assert float(mini.maximum_log_likelihood_objective(data)) == pytest.approx(
        float(full.maximum_log_likelihood_objective(data)), abs=5e-3 * 2000
    )


def test_svi_step_is_traced_once_for_any_batch_size(binary_data):
    X, Y = binary_data
    model = make_pg(binary_data)
    with compiled.unshared():  # a graph of its own, whatever ran before in the process
        svi = fv.NaturalGradientSVI(model)
    before = compiled.trace_count()
    for size in (10, 7, 10, 60, 3):
        svi.step((X[:size], Y[:size]))
    assert compiled.trace_count() - before == 1
    assert int(svi.iteration) == 5


@pytest.mark.slow
def test_svi_steps_positive_hyperparameters_in_log_scale(binary_data):
    """One step of plain gradient descent moves log s of a softplus parameter (and Z / c, c the
    spread of the columns of X) by −rate × its gradient in that coordinate: the optimiser's step
    is taken in z = log s (and in Z / c)."""
    rate = 0.05
    model = make_pg(binary_data, train_inducing=True)
    model.kernel.variance.assign(300.0)
    svi = fv.NaturalGradientSVI(
        model, step_size=1.0, optimizer=gpflow.keras.tf_keras.optimizers.SGD(rate)
    )
    assert svi.in_log_scale == [
        v is model.kernel.variance.unconstrained_variable
        or v is model.kernel.lengthscales.unconstrained_variable
        for v in svi.variables
    ]
    variance, Z = model.kernel.variance.numpy(), model.inducing_variable.Z.numpy().copy()
    # The gradient the step takes: at the q(u) its natural step sets (ρ = 1, the full batch,
    # the same q(u) whatever θ does next), in log s and in Z.
    probe = make_pg(binary_data, train_inducing=True)
    probe.kernel.variance.assign(300.0)
    fv.NaturalGradientSVI(probe, step_size=1.0, learning_rate=0.0).step(binary_data)
    with tf.GradientTape() as tape:
        tape.watch(probe.kernel.variance.unconstrained_variable)
        tape.watch(probe.inducing_variable.Z.unconstrained_variable)
        loss = -probe.maximum_log_likelihood_objective(binary_data)
    g_x, g_Z = tape.gradient(
        loss,
        [
            probe.kernel.variance.unconstrained_variable,
            probe.inducing_variable.Z.unconstrained_variable,
        ],
    )
    x = probe.kernel.variance.unconstrained_variable.numpy()
    g_log_s = g_x.numpy() * variance / tf.sigmoid(x).numpy()  # dx/d log s = s / sigmoid(x)
    svi.step(binary_data)
    # The step's own gradient also sees q(u) move with θ, to second order at the fixed point.
    step = np.log(model.kernel.variance.numpy()) - np.log(variance)
    np.testing.assert_allclose(step, -rate * g_log_s, rtol=1e-6)
    c = binary_data[0].std(axis=0)  # the first batch's inputs: here all of them
    moved = model.inducing_variable.Z.numpy() - Z
    np.testing.assert_allclose(moved / c, -rate * c * g_Z.numpy(), rtol=1e-6, atol=1e-12)


def test_the_inducing_inputs_are_stepped_in_units_of_the_inputs_spread(binary_data):
    """Each column's standard deviation; for a column without spread its largest magnitude, or
    1. Taken from the first batch stepped on, unless measured on all the inputs before."""
    X = np.array([[0.0, 3.0, 2.0], [0.0, -3.0, 4.0]])
    np.testing.assert_array_equal(fv.training.svi.input_units(X), [1.0, 3.0, 1.0])
    np.testing.assert_array_equal(fv.training.svi.input_units([[-2e-6, 0.0]]), [2e-6, 1.0])
    svi = fv.NaturalGradientSVI(make_pg(binary_data, train_inducing=True))
    in_a_function = tf.function(svi.step)  # measured in the graph, where the batch arrives
    in_a_function(tuple(tf.constant(a[:20]) for a in binary_data))
    svi.step(binary_data)
    (units,) = [c for c in svi.units if c is not None]
    np.testing.assert_allclose(units.numpy()[0], binary_data[0][:20].std(axis=0), rtol=1e-12)
    svi.measure_inputs(binary_data[0])
    np.testing.assert_allclose(units.numpy()[0], binary_data[0].std(axis=0), rtol=1e-12)
    held = fv.NaturalGradientSVI(make_pg(binary_data, train_inducing=False))
    assert held.units == [None] * len(held.variables)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [None, pytest.param(20, marks=pytest.mark.slow)])
def test_the_same_data_in_other_units_train_to_the_same_model(binary_data, batch_size):
    """
    The inputs, the inducing inputs and the lengthscales all multiplied by 10⁻⁶ are the same
    model in other units: ``fit``, with the inducing inputs trained as SVGP trains them, runs
    the same iterations and predicts the same probabilities.
    """
    X, Y = binary_data
    runs = []
    for scale in (1.0, 1e-6):
        model = fv.PolyaGammaSVGP(
            gpflow.kernels.SquaredExponential(lengthscales=[scale] * X.shape[1]),
            gpflow.likelihoods.Bernoulli(**LOGIT),
            X[:12] * scale,
            num_data=len(X),
        )
        trace = fv.fit(model, (X * scale, Y), batch_size=batch_size, max_iter=30)
        p, _ = model.predict_y(X * scale)
        runs.append((trace.column("objective"), p.numpy(), model.inducing_variable.Z / scale))
    (objective, p, Z), (objective_scaled, p_scaled, Z_scaled) = runs
    assert np.mean((p > 0.5) == (Y > 0.5)) > 0.7
    np.testing.assert_allclose(objective_scaled, objective, rtol=1e-6)
    np.testing.assert_allclose(p_scaled, p, atol=1e-6)
    np.testing.assert_allclose(Z_scaled, Z, rtol=1e-5, atol=1e-8)


@pytest.mark.slow
def test_an_adam_step_changes_a_large_variance_by_a_factor_not_an_amount(binary_data):
    """Adam's first step is its learning rate in each coordinate: in log scale a variance of
    10⁴ changes by the factor e^±rate, where in GPflow's unconstrained value it changes by ±rate."""
    rate = 0.1
    ratios = {}
    for log_scale in (True, False):
        model = make_pg(binary_data)
        model.kernel.variance.assign(1e4)
        fv.NaturalGradientSVI(model, learning_rate=rate, log_scale=log_scale).step(binary_data)
        ratios[log_scale] = model.kernel.variance.numpy() / 1e4
    assert abs(np.log(ratios[True])) == pytest.approx(rate, rel=1e-4)  # Adam's ε aside
    assert abs(ratios[False] - 1.0) == pytest.approx(rate / 1e4, rel=1e-3)


@pytest.mark.slow
def test_fit_accepts_tf_data_datasets(binary_data):
    X, Y = binary_data
    model = make_pg(binary_data)
    batched = tf.data.Dataset.from_tensor_slices(binary_data).shuffle(60, seed=1).batch(15)
    trace = fv.fit(model, batched, max_iter=3)
    assert len(trace.rows) == 3 and np.all(np.isfinite(trace.column("objective")))
    single = tf.data.Dataset.from_tensor_slices(binary_data)
    trace = fv.fit(make_pg(binary_data), single, batch_size=20, max_iter=2, steps_per_iteration=5)
    assert len(trace.rows) == 2
    with pytest.raises(ValueError, match="give batch_size"):
        fv.fit(make_pg(binary_data), single)
    with pytest.raises(ValueError, match="already batched"):
        fv.fit(make_pg(binary_data), batched, batch_size=5)


@pytest.mark.slow
def test_an_svgp_training_script_runs_with_the_class_name_changed(binary_data):
    """GPflow's SVGP recipe: Adam on training_loss_closure over trainable_variables."""
    X, Y = binary_data
    model = make_pg(binary_data)
    loss = model.training_loss_closure(binary_data, compile=True)
    before = float(loss())
    optimizer = gpflow.keras.tf_keras.optimizers.Adam(0.05)
    for _ in range(20):
        optimizer.minimize(loss, model.trainable_variables)
    assert float(loss()) < before
    mean, _ = model.predict_y(X)
    assert mean.shape == (60, 1)


@pytest.mark.slow
def test_mini_batch_svi_trains_hyperparameters_and_predicts(binary_data):
    X, Y = binary_data
    model = make_pg(binary_data)
    start = model.kernel.lengthscales.numpy().copy()
    trace = fv.fit(model, binary_data, batch_size=20, max_iter=30)
    assert not np.allclose(model.kernel.lengthscales.numpy(), start)
    objectives = trace.column("objective")
    assert objectives[-5:].mean() > objectives[0]
    accuracy = np.mean((model.predict_y(X)[0].numpy() > 0.5) == (Y > 0.5))
    assert accuracy > 0.75


@pytest.mark.slow
def test_ten_thousand_mini_batch_steps_stay_finite(binary_data):
    """Long runs: no NaN, no Cholesky failure, with hyperparameters and inducing inputs trained."""
    X, Y = binary_data
    model = make_pg(binary_data, M=20, train_inducing=True)
    trace = fv.fit(model, binary_data, batch_size=5, steps_per_iteration=1000, max_iter=10, tol=0.0)
    assert len(trace.rows) == 10
    assert np.all(np.isfinite(trace.column("objective")))
    for value in (model.q_mu, model.q_sqrt, model.kernel.lengthscales, model.inducing_variable.Z):
        assert np.all(np.isfinite(value.numpy()))


@pytest.mark.slow
def test_banana_accuracy_matches_svgp(banana_split):
    X_train, Y_train, X_test, Y_test = banana_split
    model = fv.PolyaGammaSVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        gpflow.likelihoods.Bernoulli(**LOGIT),
        fv.kmeans_inducing_points(X_train, 50, seed=0),
        num_data=len(X_train),
    )
    gpflow.set_trainable(model.inducing_variable, False)
    fv.fit(model, (X_train, Y_train), batch_size=100, max_iter=15)
    accuracy = np.mean((model.predict_y(X_test)[0].numpy() > 0.5) == (Y_test > 0.5))
    assert accuracy > 0.895  # SVGP + Scipy reaches 0.904 on this split (see test_fit)


def test_bad_construction_and_data_raise_clear_errors(binary_data):
    X, Y = binary_data
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(fv.IncompatibleLikelihoodError, match="logit"):
        fv.PolyaGammaSVGP(kernel, gpflow.likelihoods.Bernoulli(), X[:5], num_data=60)
    with pytest.raises(ValueError, match="num_data"):
        model = fv.PolyaGammaSVGP(kernel, gpflow.likelihoods.Bernoulli(**LOGIT), X[:5])
        fv.fit(model, binary_data, batch_size=10)
    with pytest.raises(fv.InvalidDataError, match="binary labels"):
        fv.fit(make_pg(binary_data), (X, Y * 2.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="binary labels"):
        fv.NaturalGradientSVI(make_pg(binary_data)).step((X, Y * 2.0))
    with pytest.raises(fv.InvalidDataError, match="num_data is 60"):
        fv.fit(make_pg(binary_data), (X[:30], Y[:30]))
    with pytest.raises(ValueError, match="step_size"):
        fv.NaturalGradientSVI(make_pg(binary_data), step_size=1.5)


@pytest.mark.slow
def test_labels_minus_one_plus_one_give_the_same_step(binary_data):
    X, Y = binary_data
    a, b = make_pg(binary_data), make_pg(binary_data)
    fv.NaturalGradientSVI(a, step_size=1.0).step((X, Y))
    fv.NaturalGradientSVI(b, step_size=1.0).step((X, 2.0 * Y - 1.0))
    np.testing.assert_allclose(a.q_mu, b.q_mu, rtol=1e-12)
    np.testing.assert_allclose(a.kernel.lengthscales, b.kernel.lengthscales, rtol=1e-12)


def test_fit_takes_the_full_batch_up_to_1000_points_and_mini_batches_beyond(rng):
    """Without ``batch_size``, arrays of at most 1000 points need no ``num_data`` (full-batch steps);
    more points are split into mini-batches of 1000, which do, and the error says so."""
    kernel = gpflow.kernels.SquaredExponential()
    small = make_binary_data(rng, N=60)
    model = fv.PolyaGammaSVGP(kernel, gpflow.likelihoods.Bernoulli(**LOGIT), small[0][:5].copy())
    assert len(fv.fit(model, small, max_iter=2, tol=0.0).rows) == 2
    large = make_binary_data(rng, N=2500)
    model = fv.PolyaGammaSVGP(kernel, gpflow.likelihoods.Bernoulli(**LOGIT), large[0][:5].copy())
    with pytest.raises(ValueError, match="Mini-batches of 1000 .* batch_size=2500"):
        fv.fit(model, large, max_iter=1)


class NaNMean(gpflow.mean_functions.MeanFunction):
    def __call__(self, X):
        return tf.fill([tf.shape(X)[0], 1], tf.constant(np.nan, tf.float64))


def test_a_full_data_loss_whose_step_cannot_be_taken_is_inf_and_stores_nothing(binary_data):
    """
    Where a step's natural parameters are not finite (a line search's trial point too far out;
    here forced by a NaN in the prior mean) the loss is +inf, and q(u) stays.
    """
    model = make_pg(binary_data)
    data = tuple(tf.constant(a) for a in binary_data)
    assert np.isfinite(model.training_loss(data))
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    model.mean_function = NaNMean()
    assert np.isposinf(model.training_loss(data))
    np.testing.assert_array_equal(model.q_mu.numpy(), q_mu)
    np.testing.assert_array_equal(model.q_sqrt.numpy(), q_sqrt)


@pytest.mark.slow
@pytest.mark.parametrize("length", ["known", "unknown"])
def test_single_points_are_counted_with_the_last_batch_that_is_not_stepped_on(binary_data, length):
    """
    60 points in batches of 25 step on 50 of them; a model built for 55 points would step on 50
    too, so the rows stepped on cannot tell the two apart: every point is counted, before the
    stream is read where TensorFlow knows their number, else in the first pass.
    """
    model = make_pg(binary_data)
    model.num_data = 55
    points = tf.data.Dataset.from_tensor_slices(binary_data)
    if length == "unknown":
        points = points.filter(lambda X, Y: True)
    said = "yields" if length == "known" else "yielded"
    with pytest.raises(
        fv.InvalidDataError, match=f"{said} 60 rows in a pass, where num_data is 55"
    ):
        fv.fit(model, points, batch_size=25, max_iter=3)
    model.num_data = 60
    trace = fv.fit(model, points, batch_size=25, max_iter=2)
    assert len(trace.rows) == 2


@pytest.mark.slow
def test_training_loss_and_elbo_take_a_dataset_as_all_the_data(binary_data):
    """As the other models do: a ``tf.data.Dataset`` is all the data, streamed in every pass,
    its rows counted against ``num_data``; one that never ends is refused."""
    model, twin = make_pg(binary_data), make_pg(binary_data)
    dataset = tf.data.Dataset.from_tensor_slices(binary_data).batch(25)  # 25, 25 and 10 rows
    np.testing.assert_allclose(model.training_loss(dataset), twin.training_loss(binary_data))
    np.testing.assert_allclose(model.q_mu.numpy(), twin.q_mu.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        model.maximum_log_likelihood_objective(dataset),
        twin.maximum_log_likelihood_objective(binary_data),
        rtol=1e-10,
    )
    closures = [m.training_loss_closure(d) for m, d in ((model, dataset), (twin, binary_data))]
    np.testing.assert_allclose(*(closure() for closure in closures))
    short = tf.data.Dataset.from_tensor_slices(tuple(a[:50] for a in binary_data))
    with pytest.raises(tf.errors.InvalidArgumentError, match="yielded"):
        model.training_loss(short.batch(20))
    with pytest.raises(fv.InvalidDataError, match="yields 50 rows in a pass, where num_data is 60"):
        model.training_loss(short.batch(25, drop_remainder=True))
    with pytest.raises(fv.InvalidDataError, match="repeats without end"):
        model.training_loss(dataset.repeat())
    model.mean_function = NaNMean()
    with pytest.raises(tf.errors.InvalidArgumentError, match="natural parameters that are not"):
        model.training_loss(dataset)
