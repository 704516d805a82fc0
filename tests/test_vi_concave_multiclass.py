"""VIConcave with GPflow's Softmax(C): the bound on E[log softmax], its sites, the steps, fit."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.models.base import expected_log_softmax
from gpflow_fastvi.sites import expectation_sites, log_softmax_bound

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


def test_the_bound_lies_below_the_expectation_and_is_exact_where_theory_says(rng):
    """For two classes E[log softmax] is a 1-D integral: the bound is below it, and equal to it
    when the other class's variance is 0 (no Jensen gap is left). For four classes it is below a
    Monte Carlo estimate and above the bound that puts the whole log-sum-exp under Jensen."""
    m = rng.normal(0.0, 2.0, (50, 2))
    v = rng.uniform(0.01, 3.0, (50, 2))
    labels = rng.integers(0, 2, 50)
    Y = tf.constant(labels[:, None].astype(np.float64))
    exact = two_class_expectation(m, v, labels)
    bound = log_softmax_bound(tf.constant(m), tf.constant(v), Y).numpy()
    assert np.all(bound <= exact + 1e-12)
    assert np.max(exact - bound) > 1e-2  # not trivially equal: the gap is real
    v_own_only = v * np.eye(2)[labels]
    exact = two_class_expectation(m, v_own_only, labels)
    bound = log_softmax_bound(tf.constant(m), tf.constant(v_own_only), Y, nodes=200).numpy()
    np.testing.assert_allclose(bound, exact, rtol=1e-9, atol=1e-12)

    m = rng.normal(0.0, 2.0, (40, 4))
    v = rng.uniform(0.01, 2.0, (40, 4))
    Y = tf.constant(rng.integers(0, 4, (40, 1)).astype(np.float64))
    bound = log_softmax_bound(tf.constant(m), tf.constant(v), Y).numpy()
    estimate = expected_log_softmax(tf.constant(m), tf.constant(v), Y, draws=100_000).numpy()
    assert np.all(bound <= estimate + 0.01)  # 0.01: several Monte Carlo errors
    own = np.eye(4)[Y.numpy()[:, 0].astype(int)]
    jensen = (own * m).sum(1) - np.log(np.exp(m + v / 2).sum(1))
    assert np.all(bound >= jensen - 1e-12)


def test_the_sites_of_a_point_touch_the_bound_in_every_class(rng):
    """Summed over the classes, the sites' expectation is the bound at (m, v), with its gradient
    in every m_c and v_c."""
    m = tf.constant(rng.normal(0.0, 2.0, (30, C)))
    v = tf.constant(rng.uniform(0.05, 2.0, (30, C)))
    Y = tf.constant(rng.integers(0, C, (30, 1)).astype(np.float64))
    sites = expectation_sites(lambda m, v: log_softmax_bound(m, v, Y), m, v)
    assert np.all(sites.w.numpy() >= 0.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([m, v])
        bound = log_softmax_bound(m, v, Y)
        touching = tf.reduce_sum(sites.a + sites.b * m - 0.5 * sites.w * (m**2 + v), axis=1)
    np.testing.assert_allclose(touching, bound, rtol=1e-10, atol=1e-12)
    for variable in (m, v):
        np.testing.assert_allclose(
            tape.gradient(touching, variable), tape.gradient(bound, variable), atol=1e-10
        )


def test_the_steps_climb_to_a_stationary_point_of_the_bound_with_centred_means(rng):
    """At fixed θ the steps never lower the objective; where they stop, its gradient in the
    whitened means is zero and the means sum to zero over the classes (the softmax does not see
    a shift common to all of them, so the KL alone sets it)."""
    data = three_classes(rng, N=80)
    model = make_model(data)
    values = [float(model.update_sites(1, data=data)) for _ in range(40)]
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    np.testing.assert_allclose(np.sum(model.q_mu.numpy(), axis=1), 0.0, atol=1e-10)
    np.testing.assert_allclose(float(model.objective(data)), values[-1], rtol=1e-10)
    with tf.GradientTape() as tape:
        tape.watch(model.q_mu.unconstrained_variable)
        objective = model.objective(data)
    gradient = tape.gradient(objective, model.q_mu.unconstrained_variable).numpy()
    assert np.max(np.abs(gradient)) < 1e-4


def test_fit_learns_three_classes_as_gpflow_svgp_does(rng, tmp_path):
    """fit on 300 points of three classes: test accuracy within 2 points of GPflow's SVGP with
    Softmax trained by Scipy from the same start; the objective is below the ELBO (by many
    draws); a checkpoint restores into SVGP(num_latent_gps=C) and predicts the same."""
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
    elbo = model.variational_bound(  # the ELBO, by 20,000 draws instead of elbo()'s 64
        lambda X, Y: tf.reduce_sum(expected_log_softmax(*model.predict_f(X), Y, draws=20_000)),
        data,
    )
    assert float(model.objective(data)) < float(elbo) + 1.0
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=svgp).read(path).assert_existing_objects_matched()
    for a, b in zip(model.predict_f(test[0]), svgp.predict_f(test[0])):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_the_bound_of_accepted_iterates_never_falls():
    """
    fit's persistent route on scikit-learn's wine set (178 points, 13 features, 3 classes): the
    objective, the softmax ELBO's lower bound at the adopted q(u), rises at every accepted
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


def test_a_stream_steps_as_the_arrays_do(rng):
    """The objective and a step of a tf.data stream are those of the arrays."""
    data = three_classes(rng, N=120)
    in_memory, streamed = make_model(data), make_model(data)
    stream = tf.data.Dataset.from_tensor_slices(data).batch(50)
    np.testing.assert_allclose(in_memory.objective(stream), in_memory.objective(data), rtol=1e-10)
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
