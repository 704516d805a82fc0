"""
Reliability, one test per class of fault rather than per case: what each kind of bad input gets
(an error naming the problem, or a conversion that changes no value), and what state a failure
leaves behind. ``docs/guarantees.md`` states the same promises for users.
"""

import warnings

import gpflow
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from check_shapes.exceptions import ShapeMismatchError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpflow_fastvi as fv
from gpflow_fastvi.exceptions import (
    ApproximationWarning,
    CholeskyError,
    DivergenceWarning,
    IncompatibleLikelihoodError,
    InvalidDataError,
)
from gpflow_fastvi.models import ALL_MODELS
from gpflow_fastvi.training import TrainingPlan, run_plan
from gpflow_fastvi.training.watch import Watch

from .test_contract import FACTORIES

LOGIT = dict(invlink=tf.sigmoid)


_FITTED = {}


def _fitted(model_class, data, **options):
    """The model after three iterations of fit, a fresh copy at each call: the fit is deterministic,
    so it runs once per model class, data set and options, and no test sees another's changes."""
    key = (model_class, data[0].tobytes(), data[1].tobytes(), tuple(sorted(options.items())))
    if key not in _FITTED:
        model = FACTORIES[model_class](data, data[0][::5].copy())
        fv.fit(model, data, max_iter=3, **options)
        _FITTED[key] = model
    return gpflow.utilities.deepcopy(_FITTED[key])


# --------------------------------------------------------------------------------------------------
# Likelihoods a site rule cannot handle are refused.


@pytest.mark.parametrize("model_class", [fv.VITaylor, fv.KLCorrected], ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "likelihood",
    [gpflow.likelihoods.StudentT(), gpflow.likelihoods.Beta()],
    ids=["StudentT", "Beta"],
)
def test_likelihoods_that_are_not_log_concave_are_refused(model_class, likelihood):
    Z = np.zeros((3, 1))
    # Student-t is VIConcave's, whose steps test the ELBO: the error says so.
    hint = "Use VIConcave" if isinstance(likelihood, gpflow.likelihoods.StudentT) else "concave"
    with pytest.raises(IncompatibleLikelihoodError, match=hint):
        model_class(gpflow.kernels.Matern52(), likelihood, Z)


def test_a_likelihood_of_unknown_concavity_is_accepted_with_a_warning():
    class Custom(gpflow.likelihoods.ScalarLikelihood):
        def _scalar_log_prob(self, X, F, Y):
            return -0.5 * tf.square(Y - F)

        def _conditional_mean(self, X, F):
            return F

        def _conditional_variance(self, X, F):
            return tf.ones_like(F)

    with pytest.warns(UserWarning, match="cannot check that Custom is log-concave"):
        fv.VITaylor(gpflow.kernels.Matern52(), Custom(), np.zeros((3, 1)))


# --------------------------------------------------------------------------------------------------
# Prediction: the factorisation training used, inputs checked like training inputs.


@pytest.mark.slow
def test_prediction_and_elbo_survive_where_gpflows_fixed_jitter_fails(model_class, data):
    """Repeated inducing inputs and a huge kernel variance: Kmm needs more than GPflow's jitter."""
    X, Y = data
    Z = np.repeat(X[:4], 3, axis=0)
    model = FACTORIES[model_class](data, Z)
    model.kernel.variance.assign(1e12)
    gpflow.set_trainable(model.kernel, False)
    try:  # GPflow's own path, jitter 1e-6: an error or NaN
        gpflow_mean, _ = gpflow.posteriors.create_posterior(
            model.kernel, model.inducing_variable, model.q_mu, model.q_sqrt, whiten=True
        ).predict_f(X[:3])
        assert not np.all(np.isfinite(gpflow_mean))
    except tf.errors.InvalidArgumentError:
        pass
    fv.fit(model, data, max_iter=2)
    mean, var = model.predict_f(X)
    p, _ = model.predict_y(X)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var)) and np.all(var > 0)
    assert np.all((p >= 0) & (p <= 1 + 1e-12))  # quadrature weights sum to 1 within rounding
    assert np.isfinite(model.elbo(data).numpy())


@pytest.mark.parametrize("full_cov, full_output_cov", [(True, False), (False, True), (True, True)])
@pytest.mark.slow
def test_full_covariances_are_svgps(model_class, data, full_cov, full_output_cov):
    model = _fitted(model_class, data)
    svgp = gpflow.models.SVGP(
        model.kernel, model.likelihood, model.inducing_variable, whiten=model.whiten
    )
    svgp.q_mu.assign(model.q_mu)
    svgp.q_sqrt.assign(model.q_sqrt)
    Xnew = np.linspace(-2, 2, 6)[:, None].repeat(2, axis=1)
    mean, var = model.predict_f(Xnew, full_cov=full_cov, full_output_cov=full_output_cov)
    want_mean, want_var = svgp.predict_f(Xnew, full_cov=full_cov, full_output_cov=full_output_cov)
    assert var.shape == want_var.shape  # KLCorrected's too: its f̄, the GP, is SVGP's f
    np.testing.assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(var, want_var, rtol=1e-8, atol=1e-10)


def test_prediction_inputs_are_converted_like_training_inputs(model_class, data):
    model = _fitted(model_class, data)
    Xnew = np.array([[0.5, -1.0], [2.0, 1.0], [-3.0, 0.0]])
    want = model.predict_y(Xnew)
    for given_as in (
        Xnew.astype(np.float32),
        Xnew.astype(np.int64),
        pd.DataFrame(Xnew, columns=["a", "b"], index=[10, 20, 30]),
        Xnew.tolist(),
        tf.constant(Xnew, dtype=tf.float32),
    ):
        exact = np.array_equal(np.asarray(given_as, dtype=np.float64), Xnew)
        got = model.predict_y(given_as)
        for g, w in zip(got, want):
            if exact:
                np.testing.assert_allclose(g, w, rtol=1e-12)
            else:  # the float32 or integer copy of Xnew is what is predicted at
                assert g.shape == w.shape and g.dtype == w.dtype
    labels = pd.Series(data[1][:3, 0]).to_frame()
    assert model.predict_log_density((pd.DataFrame(data[0][:3]), labels)).shape == (3,)


def test_bad_prediction_inputs_are_errors_naming_the_problem(model_class, data):
    model = _fitted(model_class, data)
    X, Y = data
    bad_inputs = {
        "NaN or infinite": np.array([[0.0, 1.0], [np.nan, 0.0]]),
        "must be real": X[:2] + 1j,
        "3 features": np.ones((2, 3)),
    }
    for message, Xnew in bad_inputs.items():
        for predict in (model.predict_f, model.predict_y):
            with pytest.raises(InvalidDataError, match=message):
                predict(Xnew)
    # Shapes are GPflow's contract (its check_shapes declarations, which the models inherit).
    for predict in (model.predict_f, model.predict_y):
        with pytest.raises(ShapeMismatchError, match="Xnew"):
            predict(np.ones(2))
    with pytest.raises(InvalidDataError, match="binary labels"):
        model.predict_log_density((X[:4], np.array([[0.0], [2.0], [1.0], [0.0]])))
    with pytest.raises(ShapeMismatchError, match="data"):
        model.predict_log_density((X[:4], Y[:3]))
    with pytest.raises(InvalidDataError, match="NaN"):
        model.elbo((np.where(X == X[0, 0], np.nan, X), Y))


# --------------------------------------------------------------------------------------------------
# Construction and fit's settings.


def test_malformed_inducing_inputs_are_refused_at_construction(model_class, data):
    for Z, message in ((np.zeros((0, 2)), "at least one row"), (np.ones((3, 2, 1)), "rank-2")):
        with pytest.raises(InvalidDataError, match=message):
            FACTORIES[model_class](data, Z)


def test_inducing_inputs_with_the_wrong_columns_are_refused_when_data_arrive(model_class, data):
    model = FACTORIES[model_class](data, np.zeros((4, 3)))
    with pytest.raises(InvalidDataError, match="features"):
        fv.fit(model, data, max_iter=1)


@pytest.mark.parametrize(
    "settings_, name",
    [
        (dict(tol=-1.0), "tol"),
        (dict(tol=float("nan")), "tol"),
        (dict(max_iter=2.5), "max_iter"),
        (dict(max_iter=0), "max_iter"),
        (dict(max_iter=True), "max_iter"),
        (dict(time_budget=-1), "time_budget"),
        (dict(time_budget="10"), "time_budget"),
    ],
)
def test_fit_settings_out_of_range_are_errors_naming_them(data, settings_, name):
    model = FACTORIES[fv.VIJJ](data, data[0][::5].copy())
    before = [v.numpy() for v in model.variables]
    with pytest.raises(ValueError, match=name):
        fv.fit(model, data, **settings_)
    for variable, value in zip(model.variables, before):
        np.testing.assert_array_equal(variable.numpy(), value)


@pytest.mark.parametrize(
    "model_class", [c for c in ALL_MODELS if issubclass(c, fv.GaussianSitesModel)]
)
@pytest.mark.slow
def test_batch_size_changes_memory_not_the_answer(model_class, data):
    """Site statistics accumulated over batches (any b, a remainder included) are the same sums."""
    X, Y = data
    likelihood = (
        gpflow.likelihoods.Bernoulli(**LOGIT) if model_class is not fv.KLCorrected else None
    )
    Z = X[::5].copy()
    objectives = []
    for batch_size in (None, 7, 50):
        model = model_class(
            gpflow.kernels.SquaredExponential(lengthscales=0.8),
            likelihood,
            Z,
            num_data=None,
            batch_size=batch_size,
        )
        trace = fv.fit(model, data, max_iter=3)
        objectives.append(trace.column("objective"))
    np.testing.assert_allclose(objectives[1], objectives[0], rtol=1e-8)
    np.testing.assert_allclose(objectives[2], objectives[0], rtol=1e-8)


# --------------------------------------------------------------------------------------------------
# A failure inside fit leaves the model at its last good iterate.


def _state(model):
    return [v.numpy().copy() for v in model.variables]


def _corrupting_callback(at_iteration, corrupt, seen):
    def callback(model):
        seen.append(_state(model))
        if len(seen) == at_iteration:
            corrupt(model)

    return callback


class CallbackFailed(RuntimeError):
    pass


def _raise(model):
    raise CallbackFailed("the callback failed")


@pytest.mark.parametrize(
    "corrupt, error, message",
    [
        # NaN in the (fixed) inducing inputs: Kmm cannot be factorised whatever the jitter.
        (
            lambda m: m.inducing_variable.Z.unconstrained_variable.assign(
                np.full(m.inducing_variable.Z.shape, np.nan)
            ),
            CholeskyError,
            "Cholesky factorisation of Kmm failed.*after iteration 2",
        ),
        # Any exception raised during an iteration, here by the callback itself.
        (_raise, CallbackFailed, "the callback failed"),
    ],
    ids=["cholesky", "callback"],
)
def test_a_fault_mid_fit_leaves_the_model_at_the_last_good_iterate(
    family_model_class, data, corrupt, error, message
):
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    gpflow.set_trainable(model.inducing_variable, False)  # where the corruption stays put
    seen = []
    with pytest.raises(error, match=message) as raised:
        fv.fit(model, data, max_iter=6, tol=0.0, callback=_corrupting_callback(2, corrupt, seen))
    text = str(raised.value)
    assert "defined at" not in text and "node" not in text.lower()  # no graph trace
    for variable, value in zip(model.variables, seen[-1]):
        np.testing.assert_array_equal(variable.numpy(), value)
    assert np.all(np.isfinite(model.predict_f(data[0])[0]))


def test_a_step_that_goes_non_finite_is_undone_and_named(data):
    """A step whose objective turns NaN (after writing into the model) leaves the model as the
    last finite step did."""
    model = FACTORIES[fv.VIJJ](data, data[0][::5].copy())
    variances = []

    def step():
        model.kernel.variance.assign(model.kernel.variance + 1.0)
        variances.append(model.kernel.variance.numpy())
        return float("nan") if len(variances) == 3 else float(len(variances))

    plan = TrainingPlan.from_step(step, max_iter=10, tol=0.0)
    with pytest.raises(FloatingPointError, match="nan at iteration 3.*after iteration 2"):
        run_plan(plan, model, method="step")
    assert model.kernel.variance.numpy() == variances[1]


@pytest.mark.slow
def test_an_interrupted_fit_returns_the_trace_so_far_and_a_usable_model(model_class, data):
    model = FACTORIES[model_class](data, data[0][::5].copy())
    seen = []

    def interrupt(model):
        raise KeyboardInterrupt

    trace = fv.fit(
        model, data, max_iter=6, tol=0.0, callback=_corrupting_callback(3, interrupt, seen)
    )
    assert trace.stop_reason == "interrupted" and len(trace.rows) == 3
    for variable, value in zip(model.variables, seen[-1]):
        np.testing.assert_array_equal(variable.numpy(), value)
    p, _ = model.predict_y(data[0])
    assert np.all((p > 0) & (p < 1))


# --------------------------------------------------------------------------------------------------
# Properties over shapes, dtypes, label encodings and batch sizes.

PROPERTY_SETTINGS = settings(
    max_examples=8,
    deadline=None,
    derandomize=True,  # the same examples on every run: a CI failure is reproducible here
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(
    N=st.integers(3, 40),
    D=st.integers(1, 4),
    M=st.integers(1, 6),
    labels=st.sampled_from(["01", "pm1", "int", "bool"]),
    dtype=st.sampled_from([np.float64, np.float32]),
    seed=st.integers(0, 2**16),
)
def test_any_valid_problem_trains_and_predicts_in_range(model_class, N, D, M, labels, dtype, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)).astype(dtype)
    positive = X[:, :1] + 0.3 * rng.normal(size=(N, 1)) > 0
    Y = {
        "01": positive.astype(float),
        "pm1": np.where(positive, 1.0, -1.0),
        "int": positive.astype(np.int64),
        "bool": positive,
    }[labels]
    X_before, Y_before = X.copy(), Y.copy()
    Z = X[: min(M, N)].astype(np.float64) + 1e-3 * rng.normal(size=(min(M, N), D))
    model = FACTORIES[model_class]((X, Y), Z)
    trace = fv.fit(model, (X, Y), max_iter=2)
    assert np.all(np.isfinite(trace.column("objective")))
    p, var = model.predict_y(X)
    assert np.all((p >= 0) & (p <= 1 + 1e-12)) and np.all(var >= 0)
    assert np.all(np.isfinite(model.predict_log_density((X, Y))))
    np.testing.assert_array_equal(X, X_before)  # nothing the user gave is modified
    np.testing.assert_array_equal(Y, Y_before)


@pytest.mark.slow
def test_a_tiny_problem_in_another_encoding_trains_and_predicts_in_range(model_class):
    """The fast tier's case of the property above: fewer points than features' worth, as many
    inducing inputs as points, labels as booleans, inputs in float32."""
    test_any_valid_problem_trains_and_predicts_in_range.hypothesis.inner_test(
        model_class, N=4, D=3, M=4, labels="bool", dtype=np.float32, seed=1
    )


@PROPERTY_SETTINGS
@given(
    values=st.lists(st.sampled_from([0.5, 2.0, -2.0, 3.0, np.nan]), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_labels_outside_the_binary_encodings_are_refused(model_class, values, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(10, 2))
    Y = rng.integers(0, 2, size=(10, 1)).astype(float)
    Y[: len(values), 0] = values
    model = FACTORIES[model_class]((X, Y), X[:3].copy())
    with pytest.raises(InvalidDataError):
        fv.fit(model, (X, Y), max_iter=1)


TARGETS = {
    "Gaussian": (gpflow.likelihoods.Gaussian, lambda f, rng: f + 0.3 * rng.normal(size=f.shape)),
    "Poisson": (gpflow.likelihoods.Poisson, lambda f, rng: rng.poisson(np.exp(f)).astype(float)),
    "probit": (gpflow.likelihoods.Bernoulli, lambda f, rng: (f > 0).astype(float)),
    "logit": (
        lambda: gpflow.likelihoods.Bernoulli(**LOGIT),
        lambda f, rng: (f + 0.3 * rng.normal(size=f.shape) > 0).astype(float),
    ),
}


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(
    model_class=st.sampled_from([fv.VITaylor, fv.KLCorrected]),
    likelihood=st.sampled_from(sorted(TARGETS)),
    N=st.integers(5, 40),
    batch_size=st.one_of(st.none(), st.integers(1, 45)),
    seed=st.integers(0, 2**16),
)
def test_any_log_concave_likelihood_and_batch_size_trains_and_predicts(
    model_class, likelihood, N, batch_size, seed
):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(N, 1))
    make_likelihood, draw = TARGETS[likelihood]
    Y = draw(np.sin(2 * X), rng)
    Z = np.linspace(-2, 2, 4)[:, None]
    objectives = []
    for b in (None, batch_size):
        model = model_class(gpflow.kernels.SquaredExponential(), make_likelihood(), Z, batch_size=b)
        objectives.append(fv.fit(model, (X, Y), max_iter=2).column("objective"))
    assert np.all(np.isfinite(objectives[1]))
    np.testing.assert_allclose(objectives[1], objectives[0], rtol=1e-8)
    mean, var = model.predict_y(X)
    assert np.all(np.isfinite(mean)) and np.all(var >= 0)
    if likelihood in ("probit", "logit"):
        assert np.all((mean >= 0) & (mean <= 1 + 1e-12))
    if likelihood == "Poisson":
        assert np.all(mean > 0)


@pytest.mark.slow
def test_poisson_counts_in_batches_with_a_remainder_train_as_in_one_batch():
    """The fast tier's case of the property above: counts, seven points in batches of three."""
    test_any_log_concave_likelihood_and_batch_size_trains_and_predicts.hypothesis.inner_test(
        fv.VITaylor, "Poisson", N=7, batch_size=3, seed=2
    )


# --------------------------------------------------------------------------------------------------
# A run that diverges is stopped, and fit never returns a model worse than one it passed through.


def _watched_run(model, data, objectives, change):
    """run_plan with fit's watch over a plan whose iteration k applies ``change(model, k)`` and
    reports ``objectives[k]``."""
    count = []

    def step():
        count.append(1)
        change(model, len(count))
        return objectives[len(count) - 1]

    plan = TrainingPlan.from_step(step, max_iter=len(objectives), tol=0.0)
    return run_plan(plan, model, method="step", watch=Watch(model, data))


def _vitaylor_with_steps(data):
    """A VITaylor (watched by the SVGP ELBO, its objective not being a bound) and a compiled
    function taking three closed-form steps on ``data``."""
    model = FACTORIES[fv.VITaylor](data, data[0][::5].copy())
    fit_data = tuple(tf.constant(a) for a in data)
    return model, tf.function(lambda: model.update_sites(3, data=fit_data), autograph=False)


def test_an_impossible_objective_stops_the_run_at_the_best_iterate_with_a_warning(data):
    """A bound above 0 for a Bernoulli likelihood is a divergence: the model goes back to the
    iterate with the highest bound, and fit says so."""
    model = FACTORIES[fv.VIJJ](data, data[0][::5].copy())

    def grow(model, k):
        model.kernel.variance.assign(float(k))

    with pytest.warns(DivergenceWarning, match="diverged at iteration 3.*above 0.*iteration 2"):
        trace = _watched_run(model, data, [-30.0, -25.0, 4.0, -20.0], grow)
    assert trace.stop_reason == "diverged" and not trace.converged
    assert len(trace) == 3 and trace.returned_iteration == 2
    assert model.kernel.variance.numpy() == 2.0


@pytest.mark.parametrize(
    "objectives, reason, warning, says",
    [
        (
            [-40.0, -35.0, -30.0, -29.0, -28.0, -27.0],
            "approximation",
            ApproximationWarning,
            "for 3 iterations, while its own objective, an approximation of the ELBO, rose "
            "from -35 to -28",
        ),
        (
            [-40.0, -35.0, -30.0, -29.0, -38.0, -27.0],
            "diverged",
            DivergenceWarning,
            "for 3 iterations. fit stopped",
        ),
    ],
)
def test_an_approximation_is_watched_by_the_svgp_elbo(data, objectives, reason, warning, says):
    """VITaylor's objective is not a bound: the run is watched by the SVGP ELBO, recorded in
    each row, and a collapse of it stops the run however the objective moves; while the
    objective rises past where it was at the ELBO's best, the approximation is what parted."""
    model, update = _vitaylor_with_steps(data)

    def wreck_from_3(model, k):
        update()
        if k >= 3:  # a q(u) far from every sensible one, at every iteration from the third
            model.q_mu.assign(model.q_mu + 30.0)

    with pytest.warns(warning, match="iteration 5: its SVGP ELBO fell.*stayed down " + says):
        trace = _watched_run(model, data, objectives, wreck_from_3)
    assert trace.stop_reason == reason and trace.returned_iteration == 2
    elbos = trace.column("yardstick_elbo")
    assert np.all(elbos[2:] < elbos[1] - 0.01 * len(data[0]))
    np.testing.assert_allclose(float(model.elbo(data)), elbos[1], rtol=1e-10)


def test_one_fall_of_the_yardstick_that_recovers_is_no_divergence(data):
    """L-BFGS-B's early steps may lower the SVGP ELBO for an iteration (VITaylor on digits did):
    the run goes on, and ends at its best iterate."""
    model, update = _vitaylor_with_steps(data)

    def jolt_at_2(model, k):
        update()
        if k == 2:
            model.q_mu.assign(model.q_mu + 30.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        trace = _watched_run(model, data, [-40.0, -35.0, -30.0, -29.0, -28.0], jolt_at_2)
    elbos = trace.column("yardstick_elbo")
    assert elbos[1] < elbos[0] - 0.01 * len(data[0])  # the fall was larger than the drop
    assert trace.stop_reason != "diverged" and len(trace) == 5
    assert trace.returned_iteration in (None, int(np.argmax(elbos)) + 1)


def test_an_approximation_ends_at_its_best_yardstick_without_a_warning(data):
    """A small fall of the SVGP ELBO is no divergence, but the model still ends at the best
    iterate, which the trace names."""
    model, update = _vitaylor_with_steps(data)

    def nudge_at_3(model, k):
        update()
        if k == 3:
            model.q_mu.assign(model.q_mu * 0.9)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        trace = _watched_run(model, data, [-40.0, -35.0, -34.0], nudge_at_3)
    assert trace.stop_reason == "max_iter" and trace.returned_iteration == 2
    elbos = trace.column("yardstick_elbo")
    assert elbos[2] < elbos[1]
    np.testing.assert_allclose(float(model.elbo(data)), elbos[1], rtol=1e-10)


def test_the_persistent_route_hands_the_watch_the_svgp_elbo_it_computed(data, monkeypatch):
    """On the persistent route VITaylor's evaluation computes the SVGP ELBO of the q(u) it
    steps to, from the marginals its next sites are read at: each row's yardstick is the
    model's SVGP ELBO at that iterate, and the watch computes none of its own."""
    model = FACTORIES[fv.VITaylor](data, data[0][::5].copy())
    stepped = model._stepped_sites(3, data, site_parameters=model._site_parameters(data))
    model._adopt(stepped)
    np.testing.assert_allclose(float(stepped.yardstick), float(model.elbo(data)), rtol=1e-9)

    def no_second_pass(self):
        raise AssertionError("the watch computed the yardstick the route had handed it")

    monkeypatch.setattr(Watch, "yardstick", no_second_pass)
    elbos = []
    trace = fv.fit(
        model, data, max_iter=4, tol=0.0, callback=lambda m: elbos.append(float(m.elbo(data)))
    )
    np.testing.assert_allclose(trace.column("yardstick_elbo"), elbos, rtol=1e-9)
    np.testing.assert_allclose(float(model.elbo(data)), max(elbos), rtol=1e-9)


def test_variables_gone_non_finite_are_named_before_the_yardstick_is_computed(data):
    """A step that leaves a variable NaN is a FloatingPointError naming the iteration, even for
    a watched model, whose SVGP ELBO would otherwise fail in a factorisation first."""
    model, update = _vitaylor_with_steps(data)

    def poison_at_2(model, k):
        update()
        if k == 2:
            model.kernel.variance.unconstrained_variable.assign(np.nan)

    with pytest.raises(FloatingPointError, match="iteration 2.*variables stopped being finite"):
        _watched_run(model, data, [-40.0, -35.0, -30.0], poison_at_2)
    assert np.isfinite(model.kernel.variance.numpy())
