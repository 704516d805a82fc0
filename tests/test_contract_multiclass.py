"""
The swap contract for C classes, run over every model that takes them: what a user of GPflow's
multi-class SVGP (``SVGP(kernel, likelihood, Z, num_latent_gps=C)``) may rely on whichever of them
they swap in. A model that gains multi-class support gets all of it by one line in
``MULTI_CLASS_FACTORIES``; the first test fails until that line is written.
"""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.likelihoods import LogisticSoftmax
from gpflow_fastvi.models import ALL_MODELS

from .test_polya_gamma_multiclass import C, three_classes


def _kernel():
    return gpflow.kernels.SquaredExponential(lengthscales=0.8)


def _swapped(model_class, likelihood):
    """Built exactly as GPflow's multi-class SVGP is, with the data per call."""
    return lambda data, Z: model_class(
        _kernel(), likelihood(), Z, num_latent_gps=C, num_data=len(data[0])
    )


MULTI_CLASS_FACTORIES = {
    fv.VITaylor: (_swapped(fv.VITaylor, lambda: gpflow.likelihoods.Softmax(C)), "Softmax"),
    fv.VIConcave: (_swapped(fv.VIConcave, lambda: gpflow.likelihoods.Softmax(C)), "Softmax"),
    fv.PolyaGammaSVGP: (_swapped(fv.PolyaGammaSVGP, lambda: LogisticSoftmax(C)), "LogisticSoftmax"),
}
"""How the contract builds each multi-class model on data of C classes, and its likelihood's name."""


def _build(model_class, data):
    return MULTI_CLASS_FACTORIES[model_class][0](data, data[0][::5].copy())


def _svgp_likelihood(model_class):
    if MULTI_CLASS_FACTORIES[model_class][1] == "Softmax":
        return gpflow.likelihoods.Softmax(C)
    return LogisticSoftmax(C)


@pytest.fixture(params=list(MULTI_CLASS_FACTORIES), ids=lambda c: c.__name__)
def model_class(request):
    return request.param


@pytest.fixture
def data(rng):
    return three_classes(rng, N=60)


_FITTED = {}


def _fitted(model_class, data):
    """The model after three iterations of fit, a fresh copy at each call."""
    key = (model_class, data[0].tobytes())
    if key not in _FITTED:
        model = _build(model_class, data)
        fv.fit(model, data, max_iter=3)
        _FITTED[key] = model
    return gpflow.utilities.deepcopy(_FITTED[key])


def test_every_multi_class_model_is_in_the_contract():
    assert {c for c in ALL_MODELS if c._multi_class_likelihoods} == set(MULTI_CLASS_FACTORIES)


@pytest.mark.slow
def test_predict_y_gives_a_distribution_over_the_classes(model_class, data):
    model = _fitted(model_class, data)
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    p, _ = model.predict_y(Xnew)
    assert p.shape == (9, C) and np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(np.sum(p, axis=1), 1.0, rtol=1e-6)
    log_density = model.predict_log_density(data)
    assert log_density.shape == (60,) and np.all(log_density < 0)


def test_checkpoint_restores_into_gpflows_multi_class_svgp(model_class, data, tmp_path):
    model = _fitted(model_class, data)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    svgp = gpflow.models.SVGP(
        _kernel(), _svgp_likelihood(model_class), data[0][::5] + 1.0, num_latent_gps=C
    )
    tf.train.Checkpoint(model=svgp).read(path).assert_consumed()
    Xnew = np.linspace(-2, 2, 7)[:, None].repeat(2, axis=1)
    for got, want in zip(svgp.predict_f(Xnew), model.predict_f(Xnew)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert svgp.q_mu.shape == (12, C) and svgp.q_sqrt.shape == (C, 12, 12)


def test_print_summary_shows_svgp_attribute_paths(model_class, data):
    summary = gpflow.utilities.tabulate_module_summary(_fitted(model_class, data))
    for path in (".kernel.lengthscales", ".inducing_variable.Z", ".q_mu", ".q_sqrt"):
        assert f"{model_class.__name__}{path}" in summary


def test_a_natural_gradient_step_of_one_at_the_fixed_point_changes_nothing(model_class, data):
    """The closed-form (or damped) steps and the SVI step agree on the fixed point, per class."""
    model = _build(model_class, data)
    X, Y = (tf.constant(a) for a in data)
    update = tf.function(lambda: model.update_sites(1, data=(X, Y)), autograph=False)
    for _ in range(200):
        update()
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    model.natural_gradient_step((X, Y), 1.0)
    np.testing.assert_allclose(model.q_mu.numpy(), q_mu, atol=1e-5)
    np.testing.assert_allclose(model.q_sqrt.numpy(), q_sqrt, atol=1e-5)


@pytest.mark.slow
def test_gpflows_training_interface_takes_the_data_per_call(model_class, data):
    model = _build(model_class, data)
    closure = model.training_loss_closure(data)
    assert np.isfinite(closure()) and np.isfinite(model.elbo(data))
    batches = iter(tf.data.Dataset.from_tensor_slices(data).repeat().batch(20))
    closure = model.training_loss_closure(batches)
    optimizer = gpflow.keras.tf_keras.optimizers.Adam(0.01)
    for _ in range(3):
        optimizer.minimize(closure, model.trainable_variables)
    assert np.all(np.isfinite(model.q_mu.numpy())) and not np.allclose(model.q_mu.numpy(), 0.0)


def test_labels_that_are_not_classes_are_refused_by_name(model_class, data):
    X, Y = data
    model = _build(model_class, data)
    for bad in (Y + C, Y - C, Y + 0.5):
        with pytest.raises((fv.InvalidDataError, tf.errors.InvalidArgumentError)):
            fv.fit(model, (X, bad), max_iter=1)


@pytest.mark.slow
def test_fits_first_steps_in_float32_are_float64s(model_class, data):
    """Built and fitted in float32, a model is float32 throughout, and three iterations of fit
    end where float64's do (compared on predict_f: GPflow's Softmax predicts by fresh draws)."""
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    f64, _ = _fitted(model_class, data).predict_f(Xnew)
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32, jitter=1e-6)):
        model = _build(model_class, data)
        X, Y = (a.astype(np.float32) for a in data)
        trace = fv.fit(model, (X, Y), max_iter=3)
        f32, _ = model.predict_f(Xnew.astype(np.float32))
    assert model.q_mu.dtype == np.float32 and f32.dtype == np.float32
    assert np.all(np.isfinite(trace.column("objective")))
    np.testing.assert_allclose(f32.numpy(), f64.numpy(), atol=2e-3)
