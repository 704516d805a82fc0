"""
GPflow's natural-gradient recipe with a model swapped in: ``NaturalGradient`` on
``(q_mu, q_sqrt)`` alternating with Adam on the hyperparameters, both on
``training_loss_closure``. The full-data loss takes the model's closed-form steps on q(u) and
carries the gradient of the uncollapsed objective in q(u), which is zero where it stored q(u).
"""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflow_fastvi as fv
from gpflow_fastvi.models.step_sizes import FULL_DATA_STEPS

N, M = 200, 15


def _data(classification: bool):
    rng = np.random.default_rng(1)
    X = rng.uniform(-3.0, 3.0, (N, 1))
    F = np.sin(2.0 * X) + 0.3 * rng.normal(size=(N, 1))
    return X, (F > 0).astype(float) if classification else F


def _model(cls, likelihood):
    Z = np.linspace(-3.0, 3.0, M)[:, None]
    model = cls(gpflow.kernels.Matern52(), likelihood, Z, num_data=N)
    gpflow.set_trainable(model.q_mu, False)  # the recipe's first lines
    gpflow.set_trainable(model.q_sqrt, False)
    gpflow.set_trainable(model.inducing_variable, False)
    return model


def _recipe(model, data, gamma: float, iterations: int) -> float:
    natgrad = gpflow.optimizers.NaturalGradient(gamma=gamma)
    adam = tf_keras.optimizers.Adam(0.01)
    loss = model.training_loss_closure(data)
    for _ in range(iterations):
        natgrad.minimize(loss, [(model.q_mu, model.q_sqrt)])
        adam.minimize(loss, model.trainable_variables)
    return float(gpflow.models.SVGP.elbo(model, data)) / N


def test_the_full_data_loss_has_a_gradient_in_q_that_is_zero_where_it_stored_q():
    data = _data(classification=True)
    model = _model(fv.VIJJ, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid))
    variables = [model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(
            variables
        )  # untrainable, as the recipe sets them: watched as NaturalGradient does
        loss = model.training_loss(data)
    q_mu_gradient, q_sqrt_gradient = tape.gradient(loss, variables)
    assert q_mu_gradient is not None and q_sqrt_gradient is not None
    np.testing.assert_allclose(q_mu_gradient, 0.0, atol=1e-8)
    np.testing.assert_allclose(q_sqrt_gradient, 0.0, atol=1e-8)
    # The value is the model's own: minus the objective of its steps from the same start.
    twin = _model(fv.VIJJ, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid))
    stepped = twin._closed_form_steps(twin._passes.training_data(data), FULL_DATA_STEPS)
    np.testing.assert_allclose(loss, -(stepped.objective + twin.log_prior_density()), rtol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("cls", [fv.VIConcave, fv.VITaylor], ids=lambda c: c.__name__)
def test_gpflows_recipe_on_regression_ends_at_svgps_elbo(cls):
    """A Gaussian likelihood: one natural-gradient step of size 1 is SVGP's closed-form q(u), and
    the models' sites are exact, so the two runs agree iteration by iteration."""
    data = _data(classification=False)
    ours = _recipe(_model(cls, gpflow.likelihoods.Gaussian(0.1)), data, 1.0, 8)
    svgp = _recipe(_model(gpflow.models.SVGP, gpflow.likelihoods.Gaussian(0.1)), data, 1.0, 8)
    assert abs(ours - svgp) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize(
    "cls", [fv.VIConcave, fv.VIJJ, fv.PolyaGammaSVGP], ids=lambda c: c.__name__
)
def test_gpflows_recipe_on_classification_runs_and_ends_near_svgps_elbo(cls):
    data = _data(classification=True)
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    ours = _recipe(_model(cls, likelihood), data, 0.1, 15)
    svgp = _recipe(
        _model(gpflow.models.SVGP, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)), data, 0.1, 15
    )
    assert ours > svgp - 0.01  # per point; SVGP's natural steps of 0.1 have not converged q(u)


@pytest.mark.parametrize("cls", [fv.VIConcave, fv.PolyaGammaSVGP], ids=lambda c: c.__name__)
def test_the_recipe_on_mini_batches_runs_and_natural_gradient_leaves_the_models_step(cls):
    """A closure over an iterator of mini-batches: the loss's own step on q(u) is the
    natural-gradient step, and its gradient in (q_mu, q_sqrt), zero where it stored q(u), lets
    GPflow's NaturalGradient run without moving it further."""
    X, Y = _data(classification=True)
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    model, twin = _model(cls, likelihood), _model(cls, likelihood)
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(50)
    loss = model.training_loss_closure(iter(dataset))
    gpflow.optimizers.NaturalGradient(gamma=0.5).minimize(loss, [(model.q_mu, model.q_sqrt)])
    twin.training_loss(next(iter(dataset)))  # the same first batch, the loss's step alone
    assert not np.allclose(twin.q_mu, 0.0)
    np.testing.assert_allclose(model.q_mu, twin.q_mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.q_sqrt, twin.q_sqrt, rtol=1e-8, atol=1e-10)
    tf_keras.optimizers.Adam(0.01).minimize(
        loss, model.trainable_variables
    )  # the recipe's other half
