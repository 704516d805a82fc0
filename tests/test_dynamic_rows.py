"""
A loss compiled for any number of rows (``tf.function`` with ``input_signature=[None, D]``, as
GPflow's dynamic-shape recipe compiles it) tells all the data from a mini-batch when it runs, by
the rows against ``num_data``: all the data take the full-data steps, as a loss of known shapes
does; a closure over an iterator of mini-batches takes the mini-batch step alone.
"""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv

from .conftest import make_binary_data

LOGIT = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
TRAINING_LOSSES = (fv.VIConcave, fv.PolyaGammaSVGP)
"""The two implementations of ``training_loss``: the closed-form models' and PolyaGammaSVGP's."""


def _model(model_class, X):
    return model_class(
        gpflow.kernels.Matern52(lengthscales=[1.0, 1.0]), LOGIT, X[::6].copy(), num_data=len(X)
    )


def _any_rows(model, D):
    spec = [tf.TensorSpec([None, D], tf.float64), tf.TensorSpec([None, 1], tf.float64)]
    return tf.function(lambda X, Y: model.training_loss((X, Y)), input_signature=spec)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", TRAINING_LOSSES, ids=lambda c: c.__name__)
def test_all_the_data_in_a_loss_of_any_rows_take_the_full_data_steps(model_class, rng):
    X, Y = make_binary_data(rng, N=60)
    known, any_rows = _model(model_class, X), _model(model_class, X)
    loss = _any_rows(any_rows, X.shape[1])
    for _ in range(2):  # the second call starts from the q(u) the first stored
        np.testing.assert_allclose(loss(X, Y), known.training_loss((X, Y)), rtol=1e-9)
        np.testing.assert_allclose(any_rows.q_mu, known.q_mu, rtol=1e-9, atol=1e-12)
    # Fewer rows than num_data in the same graph: a mini-batch's step, as with known rows.
    twin = _model(model_class, X)
    twin.q_mu.assign(any_rows.q_mu)
    twin.q_sqrt.assign(any_rows.q_sqrt)
    np.testing.assert_allclose(
        loss(X[:20], Y[:20]), twin.training_loss((X[:20], Y[:20])), rtol=1e-9
    )
    np.testing.assert_allclose(any_rows.q_mu, twin.q_mu, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", TRAINING_LOSSES, ids=lambda c: c.__name__)
def test_gpflows_scipy_on_a_loss_of_any_rows_ends_where_known_shapes_do(model_class, rng):
    X, Y = make_binary_data(rng, N=80)
    known, any_rows = _model(model_class, X), _model(model_class, X)
    compiled = _any_rows(any_rows, X.shape[1])
    closures = ((known, lambda: known.training_loss((X, Y))), (any_rows, lambda: compiled(X, Y)))
    answers = []
    for model, closure in closures:
        gpflow.optimizers.Scipy().minimize(closure, model.trainable_variables)
        answers.append(float(model.elbo((X, Y))) / len(X))
    assert abs(answers[0] - answers[1]) < 1e-4, answers
