"""VITaylor with GPflow's Softmax(C): per-class Taylor sites, C latent GPs, the collapsed route."""

import os
import subprocess
import sys

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.exceptions import IncompatibleLikelihoodError
from gpflow_fastvi.likelihoods import LogisticSoftmax
from gpflow_fastvi.sites import log_density_derivatives, softmax_derivatives, taylor_sites

from .test_polya_gamma_multiclass import C, three_classes


def softmax_log_density(labels):
    one_hot = tf.one_hot(labels, C, dtype=tf.float64)
    return lambda F: tf.reduce_sum(one_hot * F, axis=1) - tf.reduce_logsumexp(F, axis=1)


def make_model(data, M=12, **kwargs):
    X, _ = data
    return fv.VITaylor(
        gpflow.kernels.SquaredExponential(lengthscales=[0.8, 0.8]),
        gpflow.likelihoods.Softmax(C),
        X[:M].copy(),
        num_latent_gps=C,
        num_data=X.shape[0],
        train_inducing=False,
        **kwargs,
    )


def test_derivatives_are_the_softmax_gradient_and_hessian_diagonal(rng):
    """g = y − π and the Hessian's diagonal −π(1 − π), per class, by the nested autodiff."""
    xi = rng.normal(0.0, 3.0, (9, C))
    labels = rng.integers(0, C, 9)
    log_p, g, h = log_density_derivatives(softmax_log_density(labels), tf.constant(xi))
    pi = np.exp(xi - xi.max(axis=1, keepdims=True))
    pi /= pi.sum(axis=1, keepdims=True)
    y = np.eye(C)[labels]
    np.testing.assert_allclose(log_p[:, 0], np.log(pi[np.arange(9), labels]), rtol=1e-12)
    np.testing.assert_allclose(g, y - pi, atol=1e-12)
    np.testing.assert_allclose(h, -pi * (1 - pi), atol=1e-12)


def test_the_closed_form_softmax_derivatives_are_the_autodiff_ones(rng):
    """VITaylor's softmax sites take log p, g and diag h in closed form: the same values as the
    nested autodiff of the log-density (vectorised over the classes), far from the boundary too."""
    xi = tf.constant(rng.normal(0.0, 6.0, (40, C)))
    labels = rng.integers(0, C, 40)
    by_autodiff = log_density_derivatives(softmax_log_density(labels), xi)
    in_closed_form = softmax_derivatives(tf.constant(np.eye(C)[labels]), xi)
    for got, want in zip(in_closed_form, by_autodiff):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)


def test_the_sites_of_a_point_share_its_value_slope_and_ceiling(rng):
    """Summed over the classes, the sites are the expansion with the diagonal Hessian: value
    log p at ξ and slope g there; each peak is at most 0/C, so their sum never exceeds 0."""
    xi = tf.constant(rng.normal(0.0, 4.0, (30, C)))
    labels = rng.integers(0, C, 30)
    log_density = softmax_log_density(labels)
    a, b, w = taylor_sites(log_density, xi, ceiling=0.0)
    log_p, g, _ = log_density_derivatives(log_density, xi)
    value = tf.reduce_sum(a + b * xi - 0.5 * w * xi**2, axis=1)
    np.testing.assert_allclose(value, log_p[:, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b - w * xi, g, atol=1e-10)
    peaks = a + tf.math.divide_no_nan(b**2, 2 * w)
    assert np.all(peaks.numpy() <= 1e-12)


@pytest.mark.slow
def test_the_fixed_point_at_fixed_hyperparameters_is_the_posterior_mode(rng):
    """Taylor steps at ξ = E_q[f] are Newton steps with the Hessian's diagonal: where they stop,
    the whitened means of all C classes maximise Σᵢ log p(yᵢ | fᵢ = aᵢᵀ v) − ½ Σ_c ‖v_c‖², whose
    gradient couples the classes through the softmax. The diagonal ignores that coupling, so
    the steps converge linearly (about ×0.7 per step here), not quadratically."""
    data = three_classes(rng, N=80)
    model = make_model(data)
    for _ in range(60):
        model.update_sites(1, data=data)
    X, Y = (tf.constant(t) for t in data)
    L = model._passes.Kmm_cholesky()
    A = model._passes.projection(X, L).A
    v = tf.Variable(model.q_mu.numpy())  # whitened, [M, C]
    log_density = softmax_log_density(Y[:, 0].numpy().astype(int))
    with tf.GradientTape() as tape:
        objective = tf.reduce_sum(log_density(tf.matmul(A, v, transpose_a=True)))
        objective -= 0.5 * tf.reduce_sum(v**2)
    np.testing.assert_allclose(tape.gradient(objective, v), 0.0, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_learns_three_classes_as_gpflow_svgp_does(rng, tmp_path, dtype):
    """fit on 300 points of three classes: test accuracy within 2 points of GPflow's SVGP with
    Softmax trained by Scipy from the same start, in float32 too; a checkpoint restores into
    SVGP(num_latent_gps=C) and predicts the same."""
    data = three_classes(rng, N=300)
    test = three_classes(np.random.default_rng(11), N=300)
    with gpflow.config.as_context(gpflow.config.Config(float=dtype, jitter=1e-6)):
        model = make_model(data, M=20)
        fv.fit(model, data, max_iter=100)
        accuracy = np.mean(model.predict_y(test[0])[0].numpy().argmax(axis=1) == test[1][:, 0])
        svgp = gpflow.models.SVGP(
            gpflow.kernels.SquaredExponential(lengthscales=[0.8, 0.8]),
            gpflow.likelihoods.Softmax(C),
            data[0][:20].copy(),
            num_latent_gps=C,
            num_data=300,
        )
        gpflow.set_trainable(svgp.inducing_variable, False)
    if dtype == np.float64:
        labels = (data[0], data[1].astype(np.int64))
        gpflow.optimizers.Scipy().minimize(
            svgp.training_loss_closure(labels), svgp.trainable_variables, options=dict(maxiter=300)
        )
        theirs = np.mean(svgp.predict_y(test[0])[0].numpy().argmax(axis=1) == test[1][:, 0])
        assert accuracy > theirs - 0.02
        path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
        tf.train.Checkpoint(model=svgp).read(path).assert_existing_objects_matched()
        for a, b in zip(model.predict_f(test[0]), svgp.predict_f(test[0])):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert accuracy > 0.9
    assert model.q_mu.dtype == dtype


def test_softmax_labels_and_latent_functions_are_checked(rng):
    data = three_classes(rng)
    X, Y = data
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(IncompatibleLikelihoodError, match="num_latent_gps=3"):
        fv.VITaylor(kernel, gpflow.likelihoods.Softmax(C), X[:5])
    for model_class in (fv.VIJJ, fv.KLCorrected):
        with pytest.raises(IncompatibleLikelihoodError, match="VITaylor with .*Softmax"):
            model_class(kernel, gpflow.likelihoods.Softmax(C), X[:5], num_latent_gps=C)
    model = make_model(data)
    with pytest.raises(fv.InvalidDataError, match="integer classes"):
        model.elbo((X, Y + C))
    shared = gpflow.kernels.SharedIndependent(kernel, output_dim=C)
    for model_class, likelihood in (
        (fv.VITaylor, gpflow.likelihoods.Softmax(C)),
        (fv.PolyaGammaSVGP, LogisticSoftmax(C)),
    ):
        with pytest.raises(fv.UnsupportedConfigurationError, match="single-output kernel"):
            model_class(shared, likelihood, X[:5], num_latent_gps=C)


@pytest.mark.slow
def test_labels_out_of_range_are_named_where_they_enter_a_stream_or_a_compiled_call(rng):
    """The site rule reads labels unchecked, in loops; they are checked where they enter: a
    stream's batch, or a compiled call's tensors."""
    X, Y = three_classes(rng, N=60)
    bad = Y.copy()
    bad[45, 0] = C  # in the third batch of 20
    model = make_model((X, Y))
    stream = tf.data.Dataset.from_tensor_slices((X, bad)).batch(20)
    with pytest.raises(fv.InvalidDataError, match=r"Batch 3 of the dataset has labels outside"):
        fv.fit(model, stream, max_iter=2)
    compiled = tf.function(lambda X, Y: model._objective((X, Y)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not below the number of classes"):
        compiled(tf.constant(X), tf.constant(bad))


@pytest.mark.slow
def test_a_multi_class_fit_logs_nothing_of_tensorflows_graph_optimiser():
    """A check of the labels inside the engine's loops made TensorFlow log, at every fit,
    "Skipping loop optimization for Merge node with control input: assert_greater_equal"."""
    script = """
import numpy as np, gpflow
import gpflow_fastvi as fv
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 2)); Y = np.argmax(X @ rng.normal(size=(2, 3)), 1)[:, None] * 1.0
for cls in (fv.VITaylor, fv.VIConcave):
    kernel = gpflow.kernels.SquaredExponential()
    likelihood = gpflow.likelihoods.Softmax(3)
    m = cls(kernel, likelihood, X[:8].copy(), num_latent_gps=3, num_data=200)
    fv.fit(m, (X, Y), max_iter=3)
"""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=environment
    )
    assert result.returncode == 0, result.stderr
    assert "loop_optimizer" not in result.stderr and "Skipping loop" not in result.stderr


def test_the_yardstick_is_a_fixed_estimate_of_gpflows_expectation(rng):
    """The SVGP ELBO of a Softmax model: the same number at every call (fixed draws), and the
    same expectation as GPflow's own Monte Carlo estimate (both with many draws)."""
    from gpflow_fastvi.sites import expected_log_softmax

    Fmu = tf.constant(rng.normal(0.0, 2.0, (40, C)))
    Fvar = tf.constant(rng.uniform(0.1, 2.0, (40, C)))
    Y = tf.constant(rng.integers(0, C, (40, 1)).astype(np.float64))
    np.testing.assert_array_equal(
        expected_log_softmax(Fmu, Fvar, Y), expected_log_softmax(Fmu, Fvar, Y)
    )
    many = gpflow.likelihoods.Softmax(C)
    many.num_monte_carlo_points = 40000
    theirs = many.variational_expectations(tf.zeros((40, 1)), Fmu, Fvar, tf.cast(Y, tf.int64))
    ours = expected_log_softmax(Fmu, Fvar, Y)
    np.testing.assert_allclose(ours, theirs, atol=0.05)  # about 5 of GPflow's Monte Carlo errors


@pytest.mark.slow
def test_a_stream_and_gpflows_scipy_loop_work_for_c_classes(rng):
    """The objective of a tf.data stream is that of the arrays; GPflow's Scipy on the closure
    lowers the loss and stores C latent GPs."""
    data = three_classes(rng, N=120)
    model = make_model(data)
    stream = tf.data.Dataset.from_tensor_slices(data).batch(50)
    np.testing.assert_allclose(model._objective(stream), model._objective(data), rtol=1e-10)
    closure = model.training_loss_closure(data)
    before = float(closure())
    gpflow.optimizers.Scipy().minimize(closure, model.trainable_variables, options=dict(maxiter=20))
    assert float(closure()) < before
    assert model.q_mu.shape == (12, C) and model.q_sqrt.shape == (C, 12, 12)


def test_fit_warns_of_a_class_with_no_training_point(rng):
    X, Y = three_classes(rng, N=60)
    keep = Y[:, 0] != 2
    model = make_model((X[keep], Y[keep]))
    with pytest.warns(
        UserWarning, match=r"1 of the 3 classes have no training point \(classes 2\)"
    ):
        fv.fit(model, (X[keep], Y[keep]), max_iter=1)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", [fv.VITaylor, fv.PolyaGammaSVGP])
def test_greedy_rounds_choose_training_inputs_and_keep_every_class_posterior(rng, model_class):
    """fit's greedy rounds on C classes: the site precisions are summed over the classes (one
    weight per point), the inducing inputs chosen are training inputs, and moving them carries
    each class's posterior mean over to the new inputs."""
    X, Y = data = three_classes(rng, N=90)
    likelihood = gpflow.likelihoods.Softmax(C) if model_class is fv.VITaylor else LogisticSoftmax(C)
    model = model_class(
        gpflow.kernels.SquaredExponential(lengthscales=[0.8, 0.8]),
        likelihood,
        X[:8].copy(),
        num_latent_gps=C,
        num_data=X.shape[0],
    )
    fv.fit(model, data, max_iter=3)
    weights = model._site_precisions(data)
    assert weights.shape == (90,) and np.all(weights > 0.0)
    Z_new = fv.greedy_inducing_points(X, model.kernel, 8, weights=weights)
    mean_there, _ = model.predict_f(Z_new)
    model._move_inducing_inputs(Z_new)
    # to within the jitter on the new Kmm (1e-6 relative to variances of order 1)
    np.testing.assert_allclose(model.predict_f(Z_new)[0], mean_there, rtol=0.0, atol=1e-4)
    trace = fv.fit(model, data, greedy_rounds=2, max_iter=3)
    assert {row["round"] for row in trace.rows} <= {1, 2} and trace.rows[0]["round"] == 1
    Z = model.inducing_variable.Z.numpy()
    assert all(np.any(np.all(X == z, axis=1)) for z in Z)  # each a training input
    assert model.q_mu.shape == (8, C) and model.q_sqrt.shape == (C, 8, 8)
    assert model.inducing_variable.Z.trainable  # held during the rounds, given back after
