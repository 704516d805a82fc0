"""
A model is SVGP's surface plus a site rule: the public names each model adds to
:class:`gpflow.models.SVGP`'s are few and listed (docs/architecture.md), and every override of an
SVGP method keeps GPflow's shape checks.
"""

import inspect

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from check_shapes import get_check_shapes, inherit_check_shapes
from check_shapes.exceptions import ShapeMismatchError

from gpflow_fastvi.models import ALL_MODELS, KLCorrected, PolyaGammaSVGP
from gpflow_fastvi.models.host import PartsHost
from gpflow_fastvi.models.natural_step import StepHost

SHARED = {
    "local_sites",
    "update_sites",
    "natural_gradient_step",
    "training_routes",
    "default_route",
    "batch_size",
}
"""What every model adds to SVGP's public names: its site rule, its two steps, its routes, and
the batches its passes sum over."""

OWN = {KLCorrected: {"bound", "e_step"}}
"""A model's own options, beyond :data:`SHARED`."""

MAX_PER_CLASS = 8
MAX_IN_ALL = 25

INSTANCE = {"data"}
"""Public attributes a built model has beyond a built SVGP's: its constructor's options."""


def _public(names):
    return {name for name in names if not name.startswith("_")}


def _added_names(model_class):
    return _public(dir(model_class)) - _public(dir(gpflow.models.SVGP))


def _added_methods(model_class):
    return {
        name
        for name in _added_names(model_class)
        if inspect.isfunction(inspect.getattr_static(model_class, name))
        or isinstance(inspect.getattr_static(model_class, name), (classmethod, staticmethod))
    }


@pytest.mark.parametrize("model_class", ALL_MODELS, ids=lambda c: c.__name__)
def test_a_model_adds_few_public_names_to_svgps(model_class):
    added = _added_names(model_class)
    assert added == SHARED | OWN.get(model_class, set())
    assert len(added) <= MAX_PER_CLASS
    assert len(_added_methods(model_class)) <= MAX_PER_CLASS


def test_the_model_layer_adds_at_most_25_public_names_in_all():
    added = set().union(*(_added_names(model_class) for model_class in ALL_MODELS))
    assert len(added) <= MAX_IN_ALL


@pytest.mark.parametrize("model_class", ALL_MODELS, ids=lambda c: c.__name__)
def test_a_built_model_holds_no_public_attribute_beyond_its_options(model_class, binary_data):
    X, _ = binary_data
    svgp = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        X[:5].copy(),
        num_data=len(X),
    )
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    model = model_class(
        gpflow.kernels.SquaredExponential(), likelihood, X[:5].copy(), num_data=len(X)
    )
    extra = _public(vars(model)) - _public(vars(svgp)) - _public(dir(model_class))
    expected = set() if model_class is PolyaGammaSVGP else INSTANCE
    if model_class is KLCorrected:
        expected = expected | {"beta"}
    assert extra == expected


def _shape_checks(function):
    """The function's check_shapes declaration, or ``None``."""
    try:
        return get_check_shapes(function)
    except ValueError:  # check_shapes' answer for a function that declares none
        return None


def _svgp_methods_with_shape_checks():
    names = []
    for name in dir(gpflow.models.SVGP):
        member = inspect.getattr_static(gpflow.models.SVGP, name, None)
        if inspect.isfunction(member) and _shape_checks(member) is not None:
            names.append(name)
    return names


CONSTRUCTOR = "__init__"
"""Exempt: a model's constructor checks ``q_mu`` and ``q_sqrt`` itself, naming the problem in
SVGP's terms (tests/test_svgp_options.py), then calls SVGP's, whose own shape checks run on them."""


@pytest.mark.parametrize("model_class", ALL_MODELS, ids=lambda c: c.__name__)
def test_every_override_of_an_svgp_method_checks_shapes(model_class):
    checked = _svgp_methods_with_shape_checks()
    assert {"predict_f", "predict_y", "elbo", "prior_kl", "training_loss"} <= set(checked)
    overridden = []
    for name in checked:
        if name == CONSTRUCTOR:
            continue
        ours = inspect.getattr_static(model_class, name)
        if ours is inspect.getattr_static(gpflow.models.SVGP, name):
            continue  # SVGP's own
        overridden.append(name)
        assert _shape_checks(ours) is not None, f"{model_class.__name__}.{name}"
    assert {"predict_f", "predict_y", "predict_log_density", "elbo"} <= set(overridden)


def test_gpflows_shape_contract_is_enforced_on_predictions(binary_data):
    X, Y = binary_data
    model = ALL_MODELS[0](gpflow.kernels.SquaredExponential(), None, X[:5].copy(), num_data=len(X))
    mean, var = model.predict_f(X[:3])
    assert mean.shape == var.shape == (3, 1)
    with pytest.raises(Exception, match="Xnew"):
        model.predict_f(np.ones(2))


def test_a_site_rule_is_held_to_its_shapes(binary_data):
    """The site rules declare their shapes: local parameters of the wrong shape are named where
    they are made, not found later in the algebra."""
    X, Y = binary_data
    model = ALL_MODELS[0](gpflow.kernels.SquaredExponential(), None, X[:5].copy(), num_data=len(X))
    Fmu, Fvar = model.predict_f(X)
    sites = model.local_sites(tf.constant(X), tf.constant(Y), Fmu, Fvar)
    assert sites.w.shape == (len(X), 1)

    class Flattened(type(model)):
        @inherit_check_shapes
        def _optimal_site_parameters(self, X, Y, Fmu, Fvar):
            return (tf.reshape(Fvar, [-1]),)  # [N], not [N, L]

    flat = Flattened(gpflow.kernels.SquaredExponential(), None, X[:5].copy(), num_data=len(X))
    with pytest.raises(ShapeMismatchError, match="_optimal_site_parameters"):
        flat.local_sites(tf.constant(X), tf.constant(Y), Fmu, Fvar)

    class Unchecked(type(model)):  # an override without the declaration meets the site rule's
        def _optimal_site_parameters(self, X, Y, Fmu, Fvar):
            return (tf.reshape(Fvar, [-1]),)

    unchecked = Unchecked(gpflow.kernels.SquaredExponential(), None, X[:5].copy(), num_data=len(X))
    with pytest.raises(ShapeMismatchError, match="_site_rule"):
        unchecked.local_sites(tf.constant(X), tf.constant(Y), Fmu, Fvar)
    with pytest.raises(ShapeMismatchError, match="Fvar"):
        model.local_sites(tf.constant(X), tf.constant(Y), Fmu, Fvar[:, 0])


@pytest.mark.parametrize("model_class", ALL_MODELS, ids=lambda c: c.__name__)
def test_every_model_has_what_its_parts_read_of_it(model_class, binary_data):
    """The passes, the frame of q(u) and the natural step name the model's side of their seams
    as protocols (models/host.py) instead of importing the model class: every model has it."""
    X, _ = binary_data
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    model = model_class(
        gpflow.kernels.SquaredExponential(), likelihood, X[:5].copy(), num_data=len(X)
    )
    assert isinstance(model, PartsHost) and isinstance(model, StepHost)
    assert not isinstance(
        gpflow.models.SVGP(
            gpflow.kernels.SquaredExponential(), gpflow.likelihoods.Gaussian(), X[:5].copy()
        ),
        StepHost,
    )  # SVGP alone has no site rule and no parts
