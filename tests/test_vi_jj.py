"""VIJJ: the facts of paper 000 and the promise of a drop-in swap for GPflow's SVGP."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from scipy import integrate, stats

import gpflow_fastvi as fv
from gpflow_fastvi.exceptions import IncompatibleLikelihoodError, InvalidDataError

from .references.quadrature import log_marginal_likelihood_by_quadrature


def make_vijj(data, M=10, **kwargs):
    X, _ = data
    kernel = gpflow.kernels.SquaredExponential(variance=2.0, lengthscales=[1.0] * X.shape[1])
    return fv.VIJJ(
        kernel, inducing_variable=X[:: max(1, len(X) // M)][:M].copy(), **kwargs, data=data
    )


def logit_svgp_like(model):
    """A GPflow SVGP with the same kernel, inducing inputs, link and whitening as ``model``."""
    return gpflow.models.SVGP(
        gpflow.utilities.deepcopy(model.kernel),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        gpflow.utilities.deepcopy(model.inducing_variable),
        whiten=model.whiten,
        num_data=model.num_data,
    )


# ------------------------------------------------------------------------------------------------
# The bounds.


@pytest.mark.parametrize("train", [False, True])
def test_jj_bound_below_svgp_elbo_below_log_marginal_likelihood(train):
    """Ĵ ≤ SVGP ELBO at the same q(u) ≤ log p(y), with log p(y) by Gauss–Hermite for n = 3."""
    X = np.array([[-1.0], [0.2], [1.5]])
    Y = np.array([[0.0], [1.0], [1.0]])
    kernel = gpflow.kernels.SquaredExponential(variance=1.5, lengthscales=0.9)
    model = fv.VIJJ(kernel, inducing_variable=X.copy(), data=(X, Y))
    gpflow.set_trainable(model.kernel, False)
    if train:
        fv.fit(model, max_iter=20)
    bound = model._update_q()
    elbo = model.elbo()
    log_py = log_marginal_likelihood_by_quadrature(kernel(X).numpy(), 2 * Y - 1)
    assert bound <= elbo + 1e-10
    assert elbo <= log_py + 1e-8
    if train:  # converged ξ make the bound tight enough to be informative
        assert log_py - bound < 0.5


def test_collapsed_bound_matches_uncollapsed_bound_at_stored_q(binary_data):
    """After update_q(ξ), Σ E_q[site] − KL at the stored q_mu, q_sqrt equals the collapsed bound."""
    model = make_vijj(binary_data)
    model.update_sites(2)
    (xi,) = model._site_parameters()
    bound = model._update_q(site_parameters=(xi,))
    np.testing.assert_allclose(model._sites_elbo(site_parameters=(xi,)), bound, rtol=1e-10)
    X, Y = model.data
    a, b, w = model._site_rule(X, Y, xi)
    Fmu, Fvar = model.predict_f(X)
    kl = gpflow.kullback_leiblers.prior_kl(
        model.inducing_variable, model.kernel, model.q_mu, model.q_sqrt, whiten=True
    )
    uncollapsed = tf.reduce_sum(a + b * Fmu - 0.5 * w * (Fmu**2 + Fvar)) - kl
    np.testing.assert_allclose(uncollapsed, bound, rtol=1e-9)


def test_analytic_site_updates_never_lower_the_bound(binary_data):
    model = make_vijj(binary_data)
    previous = model._site_bound()
    for _ in range(5):
        model.update_sites()
        current = model._site_bound()
        assert current >= previous - 1e-10
        previous = current


@pytest.mark.slow
def test_an_update_at_the_optimum_changes_nothing(binary_data):
    model = make_vijj(binary_data)
    model.update_sites(200)
    (xi,) = model._site_parameters()
    model.update_sites()
    np.testing.assert_allclose(model._site_parameters()[0], xi, rtol=1e-8)


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.slow
def test_batched_model_equals_full_batch_model(binary_data, whiten):
    full = make_vijj(binary_data, whiten=whiten)
    batched = make_vijj(binary_data, whiten=whiten, batch_size=16)
    for model in (full, batched):
        tf.function(model.update_sites, autograph=False)(2)
        tf.function(model._update_q, autograph=False)()
    np.testing.assert_allclose(
        batched._site_parameters()[0], full._site_parameters()[0], rtol=1e-10
    )
    np.testing.assert_allclose(batched.q_sqrt.numpy(), full.q_sqrt.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(batched.elbo(), full.elbo(), rtol=1e-10)

    def loss_and_grads(model):
        with tf.GradientTape() as tape:
            loss = model._training_loss()
        return loss, tape.gradient(loss, model.trainable_variables)

    (l_full, g_full), (l_batched, g_batched) = loss_and_grads(full), loss_and_grads(batched)
    np.testing.assert_allclose(l_batched, l_full, rtol=1e-12)
    for a, b in zip(g_batched, g_full):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_whitened_and_unwhitened_models_predict_the_same(binary_data):
    white, plain = make_vijj(binary_data, whiten=True), make_vijj(binary_data, whiten=False)
    for model in (white, plain):  # from SVGP's start, N(0, I), which differs between the frames
        step = tf.function(model.update_sites, autograph=False)
        for _ in range(300):  # one step, traced once, run 300 times: 300 steps in one trace is slow
            step(1)
    X_new = np.linspace(-2, 2, 7)[:, None].repeat(2, axis=1)
    for a, b in zip(white.predict_f(X_new), plain.predict_f(X_new)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(white.elbo(), plain.elbo(), rtol=1e-8)


def test_mean_function_enters_predictions_and_bound(binary_data):
    model = make_vijj(binary_data, mean_function=gpflow.functions.Constant(1.5))
    fv.fit(model, max_iter=5)
    assert model._update_q() <= model.elbo() + 1e-10
    assert model.mean_function.c.numpy() != 1.5  # the mean is a hyperparameter like any other


# ------------------------------------------------------------------------------------------------
# The swap: GPflow's tools work unchanged.


def test_svgp_with_vijj_q_predicts_like_vijj(binary_data):
    """q_mu/q_sqrt mean what they mean in SVGP: copied across, predictions and ELBO agree."""
    model = make_vijj(binary_data)
    fv.fit(model, max_iter=3)
    svgp = logit_svgp_like(model)
    svgp.q_mu.assign(model.q_mu)
    svgp.q_sqrt.assign(model.q_sqrt)
    X_new = np.random.default_rng(3).normal(size=(9, 2))
    for a, b in zip(model.predict_y(X_new), svgp.predict_y(X_new)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(model.elbo(), svgp.elbo(binary_data), rtol=1e-12)
    np.testing.assert_allclose(model.posterior().predict_f(X_new)[0], model.predict_f(X_new)[0])


def test_checkpoint_written_by_vijj_restores_into_svgp(binary_data, tmp_path):
    model = make_vijj(binary_data)
    fv.fit(model, max_iter=3)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "vijj"))
    svgp = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        np.zeros((10, 2)),
    )
    tf.train.Checkpoint(model=svgp).read(path).assert_consumed()  # SVGP's variables, no more
    X_new = np.random.default_rng(4).normal(size=(5, 2))
    np.testing.assert_allclose(svgp.predict_y(X_new)[0], model.predict_y(X_new)[0], rtol=1e-12)


def test_print_summary_lists_svgp_attribute_paths(binary_data):
    table = gpflow.utilities.tabulate_module_summary(make_vijj(binary_data))
    for path in (
        "VIJJ.q_mu",
        "VIJJ.q_sqrt",
        "VIJJ.kernel.variance",
        "VIJJ.inducing_variable.Z",
    ):
        assert path in table
    assert "xi" not in table  # no per-point state: ξ is read off q(u) in every pass


def test_closed_form_parameters_are_not_trainable_and_inducing_inputs_trained_by_default(
    binary_data,
):
    model = make_vijj(binary_data)
    trainable = {id(v) for v in model.trainable_variables}
    for parameter in (model.q_mu, model.q_sqrt):
        assert id(parameter.unconstrained_variable) not in trainable
    assert {id(v) for v in model.kernel.trainable_variables} | {
        id(model.inducing_variable.Z.unconstrained_variable)
    } == trainable
    fixed_Z = make_vijj(binary_data, train_inducing=False)
    assert id(fixed_Z.inducing_variable.Z.unconstrained_variable) not in {
        id(v) for v in fixed_Z.trainable_variables
    }


def test_labels_minus_one_plus_one_are_the_same_model(binary_data):
    X, Y = binary_data
    a, b = make_vijj((X, Y)), make_vijj((X, 2 * Y - 1))
    np.testing.assert_allclose(a._update_q(), b._update_q(), rtol=1e-14)
    np.testing.assert_allclose(
        a.predict_log_density((X, Y)), b.predict_log_density((X, 2 * Y - 1)), rtol=1e-14
    )


def test_int_inducing_variable_places_kmeans_centres(binary_data):
    X, Y = binary_data
    model = fv.VIJJ(gpflow.kernels.Matern52(), inducing_variable=7, data=(X, Y))
    Z = model.inducing_variable.Z.numpy()
    assert Z.shape == (7, 2)
    np.testing.assert_allclose(Z, fv.kmeans_inducing_points(X, 7), rtol=1e-12)


@pytest.mark.slow
def test_float32_works(binary_data):
    X, Y = binary_data
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32, jitter=1e-5)):
        model = fv.VIJJ(gpflow.kernels.SquaredExponential(), inducing_variable=8, data=(X, Y))
        trace = fv.fit(model, max_iter=3)
        p, _ = model.predict_y(X.astype(np.float32))  # as in GPflow, inputs match the model's float
    assert model.q_mu.dtype == tf.float32 and p.dtype == tf.float32
    assert np.isfinite(trace.rows[-1]["objective"])


@pytest.mark.slow
def test_compiled_steps_do_not_retrace(binary_data):
    model = make_vijj(binary_data)
    update = tf.function(lambda: model.update_sites(3), autograph=False)
    loss = tf.function(model.training_loss, autograph=False)
    for _ in range(4):
        update()
        loss()
        model.kernel.variance.assign(model.kernel.variance + 0.1)
    assert update.experimental_get_tracing_count() == 1
    assert loss.experimental_get_tracing_count() == 1


# ------------------------------------------------------------------------------------------------
# Bad input: a clear error naming the problem, the caller's arrays untouched.


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda X, Y: (X.__setitem__((3, 0), np.nan), (X, Y))[1], "X contains NaN or infinite"),
        (lambda X, Y: (Y.__setitem__((3, 0), np.inf), (X, Y))[1], "Y contains NaN or infinite"),
        (lambda X, Y: (X[:, 0], Y), "X must be a rank-2 array"),
        (lambda X, Y: (X, np.hstack([Y, Y])), r"Y must have shape \[N, 1\]"),
        (lambda X, Y: (X, 2 * Y), r"binary labels.*\{0\.0, 2\.0\}"),
        (lambda X, Y: (X[:-1], Y), "same number of rows"),
        (lambda X, Y: (X[:0], Y[:0]), "empty"),
        (lambda X, Y: (X.astype(str).astype(object) + "x", Y), "numeric"),
    ],
)
def test_bad_data_raises_a_clear_error(binary_data, mutate, match):
    X, Y = (a.copy() for a in binary_data)
    with pytest.raises(InvalidDataError, match=match):
        fv.VIJJ(gpflow.kernels.SquaredExponential(), inducing_variable=5, data=mutate(X, Y))


def test_probit_likelihood_is_refused_with_advice(binary_data):
    with pytest.raises(IncompatibleLikelihoodError, match="logit.*VITaylor"):
        fv.VIJJ(
            gpflow.kernels.SquaredExponential(),
            inducing_variable=5,
            likelihood=gpflow.likelihoods.Bernoulli(),
            data=binary_data,
        )
    with pytest.raises(IncompatibleLikelihoodError, match="Gaussian"):
        fv.VIJJ(
            gpflow.kernels.SquaredExponential(),
            inducing_variable=5,
            likelihood=gpflow.likelihoods.Gaussian(),
            data=binary_data,
        )


def test_bad_inducing_inputs_raise(binary_data):
    X, _ = binary_data
    with pytest.raises(InvalidDataError, match="between 1 and the number of data points"):
        fv.VIJJ(gpflow.kernels.SquaredExponential(), inducing_variable=len(X) + 1, data=binary_data)
    with pytest.raises(InvalidDataError, match=r"shape \[M, D\] with D = 2"):
        fv.VIJJ(
            gpflow.kernels.SquaredExponential(),
            inducing_variable=np.zeros((4, 3)),
            data=binary_data,
        )
    with pytest.raises(ValueError, match="batch_size"):
        fv.VIJJ(
            gpflow.kernels.SquaredExponential(), inducing_variable=4, batch_size=0, data=binary_data
        )


def test_caller_arrays_are_never_modified(binary_data):
    X, Y = binary_data
    Y_signed = 2 * Y - 1
    Z = X[:6].copy()
    copies = [X.copy(), Y_signed.copy(), Z.copy()]
    model = fv.VIJJ(gpflow.kernels.SquaredExponential(), inducing_variable=Z, data=(X, Y_signed))
    fv.fit(model, max_iter=3)
    model.predict_log_density((X, Y_signed))
    for original, copy in zip((X, Y_signed, Z), copies):
        np.testing.assert_array_equal(original, copy)


@pytest.mark.parametrize(
    "model_class",
    [
        fv.VIJJ,
        lambda *args, **kwargs: fv.VITaylor(
            *args, likelihood=gpflow.likelihoods.Bernoulli(tf.sigmoid), **kwargs
        ),
    ],
    ids=["VIJJ", "VITaylor-logit"],
)
@pytest.mark.slow
def test_elbo_stays_finite_where_gpflows_bernoulli_takes_log_zero(binary_data, model_class):
    """
    With prior standard deviation ≈ 45, GPflow's Gauss–Hermite nodes reach f ≈ 340, where its
    Bernoulli computes log(1 − σ(f)) = log 0. The models' ELBO uses the same nodes with a stable
    log σ: finite, equal to GPflow's wherever GPflow's is finite, and near exact quadrature.
    """
    X, Y = binary_data
    wide = model_class(
        gpflow.kernels.SquaredExponential(variance=2000.0),
        inducing_variable=X[:10].copy(),
        data=(X, Y),
    )
    Fmu, Fvar = wide.predict_f(X)
    gpflow_sum = tf.reduce_sum(wide.likelihood.variational_expectations(X, Fmu, Fvar, Y))
    assert np.isneginf(gpflow_sum.numpy())

    def expected_log_sigmoid(mean: float, var: float, y: float) -> float:
        density = stats.norm(mean, np.sqrt(var)).pdf
        integrand = lambda f: -np.logaddexp(0.0, -(2 * y - 1) * f) * density(f)  # noqa: E731
        return integrate.quad(integrand, -np.inf, np.inf, limit=200)[0]

    exact = sum(map(expected_log_sigmoid, Fmu.numpy()[:, 0], Fvar.numpy()[:, 0], Y[:, 0]))
    ours = wide._expected_log_likelihood(tf.constant(X), tf.constant(Y)).numpy()
    assert np.isfinite(wide.elbo().numpy())
    np.testing.assert_allclose(ours, exact, rtol=0.05)  # 20 nodes across a very wide Gaussian

    model = make_vijj(binary_data)
    fv.fit(model, max_iter=3)
    Fmu, Fvar = model.predict_f(X)
    gpflow_sum = tf.reduce_sum(model.likelihood.variational_expectations(X, Fmu, Fvar, Y))
    ours = model._expected_log_likelihood(tf.constant(X), tf.constant(Y))
    np.testing.assert_allclose(ours.numpy(), gpflow_sum.numpy(), rtol=1e-12)
