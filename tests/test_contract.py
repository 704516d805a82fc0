"""
The swap contract, run over every model class: what a GPflow SVGP user may rely on whichever model
they swap in, and the protocol every model offers. A new model gets all of it by one line in
``FACTORIES``; the first test fails until that line is written.
"""

import inspect

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.models import ALL_MODELS, SiteModel

from .conftest import make_binary_data

LOGIT = dict(invlink=tf.sigmoid)


def _kernel():
    return gpflow.kernels.SquaredExponential(lengthscales=0.8)


def _vijj(data, Z):
    return fv.VIJJ(data, _kernel(), Z)


def _vitaylor(data, Z):
    return fv.VITaylor(data, _kernel(), Z)


def _klcorrected(data, Z):
    return fv.KLCorrected(data, _kernel(), inducing_variable=Z)


def _polya_gamma(data, Z):
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    return fv.PolyaGammaSVGP(_kernel(), likelihood, Z, num_data=len(data[0]))


FACTORIES = {
    fv.VIJJ: _vijj,
    fv.VITaylor: _vitaylor,
    fv.KLCorrected: _klcorrected,
    fv.PolyaGammaSVGP: _polya_gamma,
}
"""How the contract builds each model on binary data (X, Y) with inducing inputs Z."""


def _concrete_subclasses(cls):
    found = set()
    for sub in cls.__subclasses__():
        if not inspect.isabstract(sub):
            found.add(sub)
        found |= _concrete_subclasses(sub)
    return found


def test_every_model_is_in_the_contract():
    package_models = {
        c for c in _concrete_subclasses(SiteModel) if c.__module__.startswith("gpflow_fastvi.")
    }
    assert package_models == set(ALL_MODELS) == set(FACTORIES)


@pytest.fixture(params=ALL_MODELS, ids=lambda c: c.__name__)
def model_class(request):
    return request.param


@pytest.fixture
def data(rng):
    return make_binary_data(rng, N=50)


def _holds_data(model):
    return getattr(model, "data", None) is not None


def _call_data(model, data):
    """What the protocol's data argument is for this model: None if it holds its data."""
    return None if _holds_data(model) else data


def _fitted(model_class, data):
    model = FACTORIES[model_class](data, data[0][::5].copy())
    fv.fit(model, _call_data(model, data), max_iter=3)
    return model


def test_predict_y_gives_probabilities(model_class, data):
    model = _fitted(model_class, data)
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    p, var = model.predict_y(Xnew)
    assert p.shape == (9, 1) and np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(var, p * (1 - p), rtol=1e-10)
    log_density = model.predict_log_density(data)
    assert log_density.shape == (50,) and np.all(log_density < 0)


def test_checkpoint_restores_into_gpflow_svgp(model_class, data, tmp_path):
    model = _fitted(model_class, data)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    svgp = gpflow.models.SVGP(
        _kernel(),
        gpflow.likelihoods.Bernoulli(**LOGIT),
        data[0][::5] + 1.0,  # deliberately wrong: the checkpoint must carry Z
        whiten=model.whiten,
    )
    tf.train.Checkpoint(model=svgp).read(path).expect_partial()
    Xnew = np.linspace(-2, 2, 7)[:, None].repeat(2, axis=1)
    for got, want in zip(svgp.predict_f(Xnew), model.posterior().predict_f(Xnew)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_print_summary_shows_svgp_attribute_paths(model_class, data):
    model = _fitted(model_class, data)
    summary = gpflow.utilities.tabulate_module_summary(model)
    for path in (".kernel.lengthscales", ".inducing_variable.Z", ".q_mu", ".q_sqrt"):
        assert f"{model_class.__name__}{path}" in summary


def test_objective_and_yardstick_are_finite_and_a_bound_lies_below_the_yardstick(model_class, data):
    model = FACTORIES[model_class](data, data[0][::5].copy())
    call_data = _call_data(model, data)
    model.update_sites(30, data=call_data)
    # The objective reads the sites off the stored q(u), as the next closed-form step does (and
    # PolyaGammaSVGP's reports the ELBO after its step, which at the fixed point is the same).
    objective = model.objective(call_data)
    np.testing.assert_allclose(model.update_sites(1, data=call_data), objective, rtol=1e-10)
    yardstick = model.yardstick_elbo(call_data)
    assert np.isfinite(objective) and np.isfinite(yardstick)
    if model.objective_is_bound:
        assert objective <= yardstick + 1e-8


def test_a_natural_gradient_step_of_one_at_the_closed_form_fixed_point_changes_nothing(
    model_class, data
):
    """The two kinds of step of the protocol agree: the closed-form optimum is the natural step's."""
    model = FACTORIES[model_class](data, data[0][::5].copy())
    call_data = _call_data(model, data)
    if call_data is not None:
        call_data = tuple(tf.constant(a) for a in call_data)
    update = tf.function(lambda: model.update_sites(1, data=call_data))
    for _ in range(300):
        update()
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    X, Y = (tf.constant(a) for a in data)
    model.natural_gradient_step((X, Y), 1.0)
    np.testing.assert_allclose(model.q_mu.numpy(), q_mu, atol=1e-6)
    np.testing.assert_allclose(model.q_sqrt.numpy(), q_sqrt, atol=1e-6)


def test_bad_inputs_raise_errors_that_name_the_problem(model_class, data):
    X, Y = data
    bad_X = X.copy()
    bad_X[3, 0] = np.nan
    for bad, match in [((bad_X, Y), "NaN"), ((X, 2.0 * Y), "binary labels")]:
        with pytest.raises(fv.InvalidDataError, match=match):
            model = FACTORIES[model_class](bad, X[::5].copy())
            fv.fit(model, _call_data(model, bad), max_iter=1)
    model = FACTORIES[model_class](data, X[::5].copy())
    with pytest.raises(ValueError, match="method must be one of"):
        fv.fit(model, _call_data(model, data), method="newton")
    with pytest.raises(TypeError, match="training keywords are"):
        fv.fit(model, _call_data(model, data), learning_rat=0.1)
    if _holds_data(model):
        with pytest.raises(ValueError, match="holds its training data"):
            fv.fit(model, data)
    else:
        with pytest.raises(ValueError, match="without data"):
            fv.fit(model)
