"""The likelihoods module: the ceiling of log p, and the logistic-softmax likelihood."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpflow_fastvi.likelihoods import LogisticSoftmax, log_density_ceiling


def reference_probabilities(F):
    """σ(f_k) / Σ_c σ(f_c), in NumPy."""
    sigmoid = 1.0 / (1.0 + np.exp(-F))
    return sigmoid / sigmoid.sum(axis=-1, keepdims=True)


@settings(max_examples=40, deadline=None)
@given(F=hnp.arrays(np.float64, (5, 4), elements=st.floats(-30.0, 30.0)))
def test_the_class_probabilities_are_the_logistic_softmax_and_sum_to_one(F):
    likelihood = LogisticSoftmax(4)
    X = np.zeros((5, 1))
    probabilities = likelihood.conditional_mean(X, F).numpy()
    np.testing.assert_allclose(probabilities, reference_probabilities(F), rtol=1e-12)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)
    for k in range(4):
        Y = np.full((5, 1), float(k))
        np.testing.assert_allclose(
            np.exp(likelihood.log_prob(X, F, Y).numpy()), probabilities[:, k], rtol=1e-10
        )


def test_the_log_density_is_finite_far_out_where_the_sigmoids_saturate():
    likelihood = LogisticSoftmax(3)
    F = tf.constant([[-1000.0, 0.0, 1000.0], [800.0, -900.0, -700.0]], dtype=tf.float64)
    Y = tf.constant([[0], [1]], dtype=tf.int64)
    log_p = likelihood.log_prob(tf.zeros((2, 1), tf.float64), F, Y).numpy()
    # log σ(−1000) − log(σ(−1000) + ½ + 1) = −1000 − log 1.5; log σ(−900) − log(1 + …) = −900.
    np.testing.assert_allclose(log_p, [-1000.0 - np.log(1.5), -900.0], rtol=1e-12)


def test_the_predictive_density_is_the_expectation_over_the_c_gaussians(rng):
    """predict_log_density against 2-D Gauss–Hermite quadrature of p(y | f) under q(f)."""
    likelihood = LogisticSoftmax(2)
    likelihood.num_monte_carlo_points = 200_000
    Fmu = np.array([[0.3, -1.2], [2.0, 0.5]])
    Fvar = np.array([[0.5, 1.5], [2.0, 0.1]])
    Y = np.array([[1.0], [0.0]])
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    weights = weights / weights.sum()
    expected = []
    for mu, var, y in zip(Fmu, Fvar, Y[:, 0].astype(int)):
        f1 = mu[0] + np.sqrt(var[0]) * nodes[:, None]
        f2 = mu[1] + np.sqrt(var[1]) * nodes[None, :]
        F = np.stack(np.broadcast_arrays(f1, f2), axis=-1)
        p = reference_probabilities(F)[..., y]
        expected.append(np.log(np.sum(weights[:, None] * weights[None, :] * p)))
    tf.random.set_seed(0)
    estimate = likelihood.predict_log_density(np.zeros((2, 1)), Fmu, Fvar, Y).numpy()
    np.testing.assert_allclose(estimate, expected, atol=3e-3)


@pytest.mark.parametrize(
    "Y, message",
    [
        (np.array([[0.0], [3.0]]), "not below the number of classes, 3"),
        (np.array([[0.0], [-1.0]]), "below 0"),
        (np.array([[0.5], [1.0]]), "integer classes"),
    ],
)
def test_labels_out_of_range_or_not_integers_are_refused(Y, message):
    likelihood = LogisticSoftmax(3)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        likelihood.log_prob(np.zeros((2, 1)), np.zeros((2, 3)), Y)


@pytest.mark.parametrize("num_classes", [1, 2.0, True, "3"])
def test_a_bad_number_of_classes_is_refused(num_classes):
    with pytest.raises(ValueError, match="num_classes"):
        LogisticSoftmax(num_classes)


@pytest.mark.slow
def test_gpflows_svgp_trains_on_it_and_predicts_class_probabilities(rng):
    """The likelihood is GPflow's: SVGP(num_latent_gps=C) with it learns three separated classes."""
    centres = np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]])
    labels = rng.integers(0, 3, 150)
    X = centres[labels] + 0.5 * rng.standard_normal((150, 2))
    Y = labels[:, None].astype(float)
    likelihood = LogisticSoftmax(3)
    model = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(), likelihood, X[::10].copy(), num_latent_gps=3
    )
    gpflow.utilities.set_trainable(model.inducing_variable, False)
    tf.random.set_seed(1)
    optimizer = gpflow.keras.tf_keras.optimizers.Adam(0.05)
    loss = model.training_loss_closure((X, Y))
    for _ in range(150):
        optimizer.minimize(loss, model.trainable_variables)
    probabilities, _ = model.predict_y(X)
    assert probabilities.shape == (150, 3)
    np.testing.assert_allclose(probabilities.numpy().sum(axis=1), 1.0, rtol=1e-10)
    assert np.mean(np.argmax(probabilities, axis=1) == labels) > 0.95


def test_the_ceiling_is_zero_for_discrete_likelihoods_only():
    assert log_density_ceiling(gpflow.likelihoods.Bernoulli()) == 0.0
    assert log_density_ceiling(gpflow.likelihoods.Softmax(3)) == 0.0
    assert log_density_ceiling(LogisticSoftmax(3)) == 0.0
    assert log_density_ceiling(gpflow.likelihoods.Gaussian()) is None
