"""fit(): the training entry point, its trace, and the accuracy it reaches on real data."""

import time

import gpflow
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from hypothesis import given, settings
from hypothesis import strategies as st

import gpflow_fastvi as fv

from .test_vi_jj import make_vijj


@pytest.mark.parametrize("method", ["analytic", "full", "hybrid"])
@pytest.mark.slow
def test_every_method_raises_the_bound_and_records_rows(binary_data, method):
    model = make_vijj(binary_data)
    start = float(model._site_bound())
    trace = fv.fit(model, method=method, max_iter=8, tol=0.0)
    objectives = trace.column("objective")
    assert trace.method == method and trace.stop_reason == "max_iter"
    assert [row["iteration"] for row in trace.rows] == list(range(1, 9))
    assert len(trace) == 8 and trace[-1] is trace.rows[-1]  # a sequence of its rows
    assert np.all(np.diff(trace.column("time")) > 0)
    assert objectives[0] > start
    # Closed-form updates cannot lower the bound; L-BFGS-B may by line-search slack only.
    assert np.all(np.diff(objectives) > -1e-6 * np.abs(objectives[1:]))
    # The last row is the bound of the sites the stored q(u) is optimal for: the sites read off
    # that q(u) are one more closed-form step, which cannot lower it.
    assert objectives[-1] <= float(model._objective()) + 1e-10


@pytest.mark.slow
def test_the_three_methods_reach_the_same_optimum_in_xi(binary_data):
    """
    With the hyperparameters fixed, vi-JJ (closed-form ξ), vi-JJ-full (L-BFGS on ξ) and
    vi-JJ-hybrid (both) maximise the same bound over ξ and must agree on its maximum.
    (With θ free the bound is nearly flat along kernel variance and lengthscale on this small
    problem, so there the methods are only compared by the rise of the bound, above.)
    """
    bounds = []
    for method in ("analytic", "full", "hybrid"):
        model = make_vijj(binary_data, train_inducing=False)
        gpflow.set_trainable(model.kernel, False)
        trace = fv.fit(model, method=method, max_iter=3000, tol=1e-12)
        assert trace.converged
        bounds.append(trace.rows[-1]["objective"])
    np.testing.assert_allclose(bounds, bounds[0], rtol=1e-7)


@pytest.mark.slow
def test_callback_values_join_the_rows_and_their_time_is_not_counted(binary_data):
    model = make_vijj(binary_data)
    X, Y = binary_data

    def callback(m):
        time.sleep(0.2)
        return {"accuracy": float(np.mean((m.predict_y(X)[0].numpy() > 0.5) == Y))}

    start = time.perf_counter()
    trace = fv.fit(model, max_iter=3, tol=0.0, callback=callback)
    wall = time.perf_counter() - start
    assert all(0.0 <= row["accuracy"] <= 1.0 for row in trace.rows)
    # Each row's callback slept 0.2 s inside fit's wall time; none of it is in the recorded time,
    # however slow the machine.
    assert trace.rows[-1]["time"] <= wall - 0.2 * len(trace.rows)


@pytest.mark.slow
def test_time_budget_and_tolerance_stop_the_loop(binary_data):
    # A budget shorter than the first iteration (which compiles: unshared, so that a graph an
    # earlier test traced for the same signature is not called instead): on this small problem
    # L-BFGS-B can converge within a second, and convergence rightly ends a run before any budget
    # does.
    from gpflow_fastvi.training import compiled

    with compiled.unshared():
        trace = fv.fit(make_vijj(binary_data), max_iter=10**6, tol=0.0, time_budget=0.2)
    times = trace.column("time")
    assert trace.stop_reason == "time_budget" and times[-1] >= 0.2
    assert np.all(times[:-1] < 0.2)  # it stops after the iteration during which the budget ran out
    trace = fv.fit(make_vijj(binary_data), max_iter=10**6, tol=1e-3)
    assert trace.converged
    last, before = trace.column("objective")[-2:]
    assert abs(last - before) <= 1e-3 * abs(last)


class _CountingModel(tf.Module):
    """A stand-in for a model, a module without variables: run_plan only reports it."""


def _counting_plan():
    """A plan whose default cap is 2 iterations, with no convergence test."""
    calls = []

    def step():
        time.sleep(0.01)
        calls.append(1)
        return float(len(calls))  # rises by 1 per iteration: never converged

    return fv.training.TrainingPlan.from_step(step, max_iter=2, tol=0.0)


def _run_counting(**kwargs):
    return fv.training.run_plan(_counting_plan(), _CountingModel(), method="count", **kwargs)


def test_a_time_budget_lifts_the_default_iteration_cap_but_not_a_given_one():
    trace = _run_counting(time_budget=0.3)
    assert trace.stop_reason == "time_budget" and len(trace.rows) > 2
    trace = _run_counting(time_budget=0.3, max_iter=3)
    assert trace.stop_reason == "max_iter" and len(trace.rows) == 3
    assert _run_counting().stop_reason == "max_iter"


def test_an_unknown_training_keyword_names_the_accepted_ones(binary_data):
    with pytest.raises(TypeError, match=r"train_inducing.*n_upd.*constructor"):
        fv.fit(make_vijj(binary_data), train_inducing=True)


def test_progress_bar_is_shown_on_request(binary_data, capsys):
    fv.fit(make_vijj(binary_data), max_iter=2, progress=True)
    assert "VIJJ (persistent)" in capsys.readouterr().err
    # With a time budget the bar counts training seconds against it.
    _run_counting(time_budget=0.2, progress=True)
    err = capsys.readouterr().err
    assert "_CountingModel (count)" in err and "/0.2 s" in err


def test_fit_refuses_misuse(binary_data):
    model = make_vijj(binary_data)
    with pytest.raises(ValueError, match="holds its training data"):
        fv.fit(model, binary_data)
    with pytest.raises(ValueError, match=r"one of \['analytic', 'full', 'hybrid', 'persistent'\]"):
        fv.fit(model, method="newton")
    with pytest.raises(ValueError, match="n_upd"):
        fv.fit(model, n_upd=0)
    with pytest.raises(ValueError, match="maxfun"):
        fv.fit(model, method="analytic", maxfun=2.5)
    with pytest.raises(TypeError, match=r"n_upd.*method='full'.*maxfun"):
        fv.fit(model, method="full", n_upd=3)  # vi-JJ-full has no closed-form updates
    with pytest.raises(TypeError, match="no training routes"):
        fv.fit(gpflow.models.GPR(binary_data, gpflow.kernels.Matern32()))


def test_every_route_is_declared_with_a_driver_fit_knows():
    """The routes are data on the model classes; fit reads them and nothing else."""
    for model_class in fv.models.ALL_MODELS:
        assert model_class.default_route in model_class.training_routes
        for route in model_class.training_routes.values():
            assert route.driver in fv.training.DRIVERS
            assert route.description


def test_fit_with_trainable_inducing_inputs_moves_them(binary_data):
    model = make_vijj(binary_data, train_inducing=True)
    Z = model.inducing_variable.Z.numpy().copy()
    fv.fit(model, max_iter=3)
    assert not np.allclose(model.inducing_variable.Z.numpy(), Z)


# ------------------------------------------------------------------------------------------------
# Real data: banana, m = 50, the set-up of `gpflow-fastvi compare`.


def accuracy(model, X, Y):
    return float(np.mean((model.predict_y(X)[0].numpy() > 0.5) == (Y > 0.5)))


@pytest.fixture(scope="module")
def svgp_banana_accuracy(banana_split):
    """GPflow's SVGP with the logit link, fixed k-means Z, trained to convergence by L-BFGS."""
    X, Y, X_test, Y_test = banana_split
    model = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        fv.kmeans_inducing_points(X, 50),
        num_data=len(X),
    )
    gpflow.set_trainable(model.inducing_variable, False)
    gpflow.optimizers.Scipy().minimize(
        model.training_loss_closure((X, Y)), model.trainable_variables, options={"maxiter": 2000}
    )
    return accuracy(model, X_test, Y_test)


@pytest.mark.slow
def test_fit_reaches_svgp_accuracy_on_banana(banana_split, svgp_banana_accuracy):
    X, Y, X_test, Y_test = banana_split
    model = fv.VIJJ(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        inducing_variable=50,
        data=(X, Y),
    )
    trace = fv.fit(model, max_iter=100)
    assert abs(accuracy(model, X_test, Y_test) - svgp_banana_accuracy) <= 0.01
    assert trace.rows[-1]["objective"] <= model.elbo()  # the bound stays below the yardstick


@pytest.mark.slow
def test_plain_scipy_on_training_loss_reaches_svgp_accuracy_on_banana(
    banana_split, svgp_banana_accuracy
):
    X, Y, X_test, Y_test = banana_split
    model = fv.VIJJ(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        inducing_variable=50,
        data=(X, Y),
    )
    gpflow.optimizers.Scipy().minimize(model.training_loss, model.trainable_variables)
    assert abs(accuracy(model, X_test, Y_test) - svgp_banana_accuracy) <= 0.01
    # The q(u) the model predicts with is the optimum for the parameters Scipy left behind, up to
    # what further closed-form steps move: each evaluation stepped the sites with θ.
    p_scipy = model.predict_y(X_test)[0].numpy()
    model.update_sites(20)
    np.testing.assert_allclose(model.predict_y(X_test)[0], p_scipy, atol=1e-3)


def test_lbfgs_stage_backs_off_from_trial_points_that_fail():
    """A trial point that cannot be evaluated (say Kmm not factorisable) shortens the step."""
    from gpflow_fastvi.training import LBFGSStage

    x = tf.Variable([0.0], dtype=tf.float64)

    def loss():
        checked = tf.debugging.assert_all_finite(tf.sqrt(2.0 - x), message="too far")  # NaN past 2
        return tf.reduce_sum((x - 5.0) ** 2) + 0.0 * tf.reduce_sum(checked)

    stage = LBFGSStage(loss, [x], maxfun=30)
    stage()
    assert 0.0 < x.numpy()[0] < 2.0  # moved towards 5 as far as it could be evaluated
    x.assign([3.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="too far"):
        stage()  # the current point itself fails: that is reported


def test_a_failed_factorisation_at_a_trial_point_logs_nothing_and_one_at_the_start_is_named(capfd):
    """The package's own checks (here robust_cholesky's) are left out of a loss traced for
    trial points, so TensorFlow's executor logs no failed op there; at the current point the
    checked loss raises the error that names the matrix."""
    from gpflow_fastvi.gaussian import robust_cholesky
    from gpflow_fastvi.training import LBFGSStage

    v = tf.Variable([0.0], dtype=tf.float64)
    failed = tf.Variable(0)  # trial points at which no jitter saved the factorisation

    def loss():
        one = tf.ones([1], tf.float64)
        K = tf.stack([tf.concat([one, v], 0), tf.concat([v, one], 0)])  # PD only for |v| < 1
        L = robust_cholesky(K, what="the test's K")
        failed.assign_add(tf.cast(~tf.reduce_all(tf.math.is_finite(L)), tf.int32))
        log_det = 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(L)))
        return tf.reduce_sum((v - 5.0) ** 2) - log_det

    stage = LBFGSStage(loss, [v], maxfun=30)
    capfd.readouterr()
    stage()
    assert 0.0 < v.numpy()[0] < 1.0  # towards 5 as far as K stays positive definite
    logged = capfd.readouterr().err
    assert "CheckNumerics" not in logged and "VerifyFinite" not in logged, logged
    assert failed.numpy() > 0  # (counted where no check raised before the count)
    v.assign([3.0])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="Cholesky factorisation of the test's K"
    ):
        stage()


def test_lbfgs_stage_ends_at_the_accepted_iterate_when_time_runs_out_and_reuses_the_last_loss():
    """A run told mid-way that the budget is spent ends at its last accepted iterate, without
    the evaluation it was about to make; a run started where the last evaluation was made takes
    that evaluation as its first (``start_from_last``), and only then."""
    from gpflow_fastvi.training import LBFGSStage

    x = tf.Variable([0.0, 0.0], dtype=tf.float64)
    calls = tf.Variable(0)

    def loss():
        calls.assign_add(1)
        return tf.reduce_sum((x - [3.0, -1.0]) ** 2 * [1.0, 10.0])

    stage = LBFGSStage(loss, [x], maxfun=None, start_from_last=True)
    accepted = []
    asked = []

    def out_of_time():
        asked.append(int(calls.numpy()))
        return len(accepted) >= 1

    result = stage(callback=lambda r: accepted.append(r.x.copy()), out_of_time=out_of_time)
    assert result.out_of_time and not result.success
    np.testing.assert_array_equal(x.numpy(), accepted[-1])  # the last accepted iterate
    assert asked[0] == 1  # never asked before the run's first evaluation
    assert int(calls.numpy()) == asked[-1]  # nothing evaluated once time was out

    stage.evaluate()  # at the variables' values: the next run starts with this evaluation
    before = int(calls.numpy())
    result = stage()
    assert result.success
    np.testing.assert_allclose(x.numpy(), [3.0, -1.0], rtol=1e-6)
    assert int(calls.numpy()) == before + result.nfev - 1
    x.assign([1.0, 1.0])  # moved since the last evaluation: evaluated afresh
    before = int(calls.numpy())
    result = stage()
    assert int(calls.numpy()) == before + result.nfev


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-800.0, max_value=700.0))
def test_the_log_scale_of_a_softplus_parameter_is_exact_and_invertible(x):
    """z = log softplus(x) and back, and dx/dz = softplus(x) / sigmoid(x), from x = −800 to 700."""
    from gpflow_fastvi.training import LogScale

    s = gpflow.Parameter(1.0, transform=gpflow.utilities.positive())
    scale = LogScale([s], [s.unconstrained_variable])
    z = scale.to_search(np.array([x]))
    np.testing.assert_allclose(scale.from_search(z), [x], rtol=1e-12, atol=1e-13)
    softplus = tf.math.softplus(tf.constant(x, tf.float64)).numpy()
    if softplus > 0.0:  # below about −745 softplus(x) underflows; z = x there
        np.testing.assert_allclose(z, [np.log(softplus)], rtol=1e-12)
    dx_dz = scale.gradient(np.array([x]), np.ones(1))
    expected = 1.0 if x < LogScale.LINEAR_BELOW else softplus * (1.0 + np.exp(-x))
    np.testing.assert_allclose(dx_dz, [expected], rtol=1e-10)


def test_the_log_scale_takes_softplus_parameters_only_and_leaves_the_values_alone():
    from gpflow_fastvi.training import LBFGSStage, LogScale

    kernel = gpflow.kernels.SquaredExponential(lengthscales=[0.5, 2.0])
    bounded = gpflow.Parameter(3.0, transform=gpflow.utilities.positive(lower=1e-3))
    unit = gpflow.Parameter(0.3, transform=tfp.bijectors.Sigmoid())
    free = gpflow.Parameter([1.0, -2.0])
    parameters = [kernel.variance, kernel.lengthscales, bounded, unit, free]
    variables = [p.unconstrained_variable for p in parameters]
    scale = LogScale(parameters, variables)
    np.testing.assert_array_equal(scale.mask, [True, True, True, True, False, False, False])
    x = gpflow.optimizers.Scipy.pack_tensors(variables).numpy()
    z = scale.to_search(x)
    np.testing.assert_allclose(z[:4], np.log([1.0, 0.5, 2.0, 3.0 - 1e-3]), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(z[4:], x[4:])
    np.testing.assert_allclose(scale.from_search(z), x, rtol=1e-12)

    # A scale over decades: L-BFGS-B in log s finds it in fewer evaluations than in softplus⁻¹(s).
    def run(in_log: bool) -> int:
        s = gpflow.Parameter(1.0, transform=gpflow.utilities.positive())

        def loss():
            return (tf.math.log(s) - np.log(300.0)) ** 2

        stage = LBFGSStage(loss, [s.unconstrained_variable], None, parameters=[s] * in_log)
        result = stage()
        assert result.success
        np.testing.assert_allclose(s.numpy(), 300.0, rtol=1e-3)
        return int(result.nfev)

    assert run(in_log=True) < run(in_log=False)


def test_stepped_sites_assign_nothing_and_match_update_sites(binary_data):
    model = make_vijj(binary_data)
    q_mu = model.q_mu.numpy()
    stepped = model._stepped_sites(2).objective
    np.testing.assert_array_equal(model.q_mu.numpy(), q_mu)  # a trial evaluation leaves q(u)
    np.testing.assert_allclose(stepped, model.update_sites(2), rtol=1e-12)
    # The objective reads the sites off the stored q(u): what one more step starts from.
    np.testing.assert_allclose(model._objective(), model.update_sites(1), rtol=1e-12)


@pytest.mark.parametrize("model_class", [fv.VIJJ, fv.VITaylor, fv.KLCorrected])
def test_kept_site_parameters_give_the_steps_that_read_q_u_where_it_was_set(
    binary_data, model_class
):
    """The persistent route's shortcut: at a trial θ, starting from the local parameters kept
    from the accepted iterate is the same computation as reading the stored q(u) at the θ where
    it was set, and the parameters a result carries are those the next step reads."""
    Z = binary_data[0][::5].copy()
    model = model_class(gpflow.kernels.SquaredExponential(), inducing_variable=Z, data=binary_data)
    accepted = model._stepped_sites(2, site_parameters=model._site_parameters())
    model._adopt(accepted)
    model.kernel.variance.assign(1.7)  # a trial θ away from the accepted one
    read, kept = model._stepped_sites(3), model._stepped_sites(
        3, site_parameters=accepted.site_parameters
    )
    for a, b in zip(read[:3], kept[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    model.kernel.variance.assign(1.0)  # back at the accepted θ: what a read there gives
    for a, b in zip(model._site_parameters(), accepted.site_parameters):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="needs the data as arrays"):
        dataset = tf.data.Dataset.from_tensor_slices(binary_data).batch(50)
        model._stepped_sites(1, dataset, site_parameters=accepted.site_parameters)


@pytest.mark.slow
def test_stepped_sites_objective_gradient_is_that_of_the_bound_maximised_over_xi(binary_data):
    """The envelope theorem behind the persistent route: at the optimal ξ, the θ-gradient of
    Ĵ(θ, ξ) with ξ held fixed is the derivative of max_ξ Ĵ(θ, ξ), here by central differences."""
    model = make_vijj(binary_data)
    model.update_sites(60)  # ξ at the optimum: the gradient as after 300 steps, to 1e-9
    variance = model.kernel.variance
    with tf.GradientTape() as tape:
        value = model._stepped_sites(2).objective
    gradient = tape.gradient(value, variance.unconstrained_variable).numpy()

    def maximised(u):
        probe = make_vijj(binary_data)
        probe.q_mu.assign(model.q_mu)
        probe.q_sqrt.assign(model.q_sqrt)
        probe.kernel.variance.unconstrained_variable.assign(u)
        return float(probe.update_sites(60))

    u, h = variance.unconstrained_variable.numpy(), 1e-4
    np.testing.assert_allclose(gradient, (maximised(u + h) - maximised(u - h)) / (2 * h), rtol=1e-4)


@pytest.mark.slow
def test_the_persistent_route_never_lowers_the_bound_and_beats_its_start(binary_data):
    model = make_vijj(binary_data)
    start = float(model.update_sites(2))
    trace = fv.fit(model, method="persistent", max_iter=15, tol=0.0)
    objectives = trace.column("objective")
    assert trace.method == "persistent" and objectives[0] > start
    # Each row: an L-BFGS step that lowers −Ĵ at stepped sites, then closed-form steps of ξ,
    # which cannot lower a bound.
    assert np.all(np.diff(objectives) > -1e-8 * np.abs(objectives[1:]))
    assert objectives[-1] <= float(model._objective()) + 1e-10


def test_the_persistent_route_adopts_the_q_u_of_each_accepted_iterate(binary_data):
    """Each accepted iterate adopts the q(u) kept from its own evaluation: the optimum, at the
    accepted θ, for the sites that evaluation read last, so that one more closed-form step from
    it gives the model's objective exactly and moves q(u) by a step only."""
    model = make_vijj(binary_data)
    trace = fv.fit(model, method="persistent", max_iter=6, tol=0.0)
    assert len(trace.rows) == 6
    stepped = model._stepped_sites(1)
    np.testing.assert_allclose(stepped.objective, model._objective(), rtol=1e-12)
    # q(u) was set at the accepted θ: a step taken from it reads the same sites again if
    # nothing moved, so two further steps differ from one by less than the first moved it.
    first = np.abs(stepped.q_mu.numpy() - model.q_mu.numpy()).max()
    second = np.abs(model._stepped_sites(2).q_mu.numpy() - stepped.q_mu.numpy()).max()
    assert second < first


@pytest.mark.parametrize(
    "method, traced", [("persistent", "_stepped_sites"), ("analytic", "_objective")]
)
def test_fit_compiles_its_loss_once_however_many_iterations(binary_data, method, traced):
    """Python code inside a tf.function runs only while it is traced: counting calls of the
    model's loss counts traces, and a fit of many iterations must trace it once."""
    model = make_vijj(binary_data)
    original = getattr(model, traced)
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    object.__setattr__(model, traced, counted)
    trace = fv.fit(model, method=method, max_iter=12, tol=0.0)
    assert len(trace.rows) == 12
    # Persistent: the L-BFGS-B loss only. Analytic: the L-BFGS-B loss (the site updates are
    # compiled separately and call update_sites).
    assert len(calls) == 1


@pytest.mark.slow
def test_validation_stop_records_the_held_out_nll_and_keeps_the_best_iterate(binary_data):
    X, Y = binary_data
    train, held_out = (X[:40], Y[:40]), (X[40:], Y[40:])
    model = make_vijj(train)
    trace = fv.fit(model, max_iter=15, tol=0.0, validation=held_out)
    nll = trace.column("validation_nll")
    assert len(nll) == len(trace.rows) and np.all(np.isfinite(nll))
    # Whatever the last iteration, the model is the one with the lowest held-out NLL.
    held_out_nll = -float(np.mean(model.predict_log_density(held_out)))
    np.testing.assert_allclose(held_out_nll, nll.min(), rtol=1e-10)


@pytest.mark.slow
def test_validation_stop_ends_the_run_when_the_held_out_nll_rises(binary_data):
    """Held-out points with their labels flipped: the better the fit, the worse their NLL, so
    the run stops after `validation_patience` iterations and keeps the first iterate."""
    X, Y = binary_data
    train, flipped = (X[:40], Y[:40]), (X[40:], 1.0 - Y[40:])
    model = make_vijj(train)
    trace = fv.fit(model, max_iter=50, tol=0.0, validation=flipped, validation_patience=3)
    nll = trace.column("validation_nll")
    assert trace.stop_reason == "validation" and len(trace.rows) == 1 + 3
    assert nll.argmin() == 0 and np.all(nll[1:] > nll[0])
    np.testing.assert_allclose(-np.mean(model.predict_log_density(flipped)), nll[0], rtol=1e-10)


def test_validation_stop_refuses_bad_input(binary_data):
    X, Y = binary_data
    model = make_vijj(binary_data)
    with pytest.raises(fv.InvalidDataError, match="validation inputs have 1 features"):
        fv.fit(model, max_iter=2, validation=(X[:, :1], Y))
    with pytest.raises(ValueError, match="validation_patience"):
        fv.fit(model, max_iter=2, validation=(X, Y), validation_patience=0)
    with pytest.raises(fv.InvalidDataError, match="binary"):
        fv.fit(model, max_iter=2, validation=(X, Y + 2.0))


def test_a_restored_snapshot_records_q_u_as_set_at_the_restored_hyperparameters(binary_data):
    """A rollback (a failed step, the best validation iterate, an undone greedy round) puts q(u)
    back with the hyperparameters it was set at: the frame the next step reads the sites in is
    theirs again, not that of the q(u) stored since."""
    from gpflow_fastvi.training.snapshot import Snapshot

    model = make_vijj(binary_data)
    model.update_sites(num_updates=2)
    snapshot = Snapshot(model)
    kept = [v.numpy() for v in model.variables]
    model.kernel.lengthscales.assign(model.kernel.lengthscales * 2.0)
    model.update_sites()  # q(u) stored at other hyperparameters: the frame is theirs
    snapshot.restore()
    for variable, value in zip(model.variables, kept):
        np.testing.assert_array_equal(variable.numpy(), value)
    assert bool(model._q_frame.belongs_to(model.q_mu, model.q_sqrt))
    assert bool(model._q_frame.is_at_model())
