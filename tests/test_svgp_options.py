"""
SVGP's constructor options, its methods and GPflow's model functions on every model: taken as SVGP
takes them (``q_mu=``, ``q_sqrt=``, ``prior_kl()``,
``gpflow.models.training_loss_closure(model, data)``), or refused by a check that names the case
and what to use instead. GPflow's own SVGP tests, run with each model in SVGP's place
(``python -m gpflow_suite.run``), count on both.
"""

import gpflow
import numpy as np
import pytest

import gpflow_fastvi as fv

from .test_contract import FACTORIES, HOLDING, LOGIT

SCALAR_LIKELIHOOD_MODELS = (fv.VITaylor, fv.KLCorrected, fv.VIConcave)
"""The models that take any log-concave scalar likelihood (the others take the logit only)."""


def _random_q(rng, M, L):
    q_mu = rng.normal(size=(M, L))
    q_sqrt = np.tril(rng.normal(size=(L, M, M))) + 2.0 * np.eye(M)
    return q_mu, q_sqrt


def _likelihood(model_class):
    """The binary likelihood the contract builds ``model_class`` with (:data:`FACTORIES`)."""
    return gpflow.likelihoods.Bernoulli(**({} if model_class is fv.KLCorrected else LOGIT))


def test_every_model_is_an_svgp_with_svgps_variables(model_class, data, rng):
    """Code written against SVGP takes every model: it is an instance of gpflow.models.SVGP,
    with SVGP's variables (q_mu and q_sqrt, held for the closed-form steps), and SVGP's own
    methods that the model does not change run on it."""
    X, _ = data
    Z = X[::5].copy()
    model = model_class(gpflow.kernels.SquaredExponential(), _likelihood(model_class), Z)
    assert isinstance(model, gpflow.models.SVGP)
    assert model.q_mu.shape == (len(Z), 1) and model.q_sqrt.shape == (1, len(Z), len(Z))
    assert not model.q_mu.trainable and not model.q_sqrt.trainable
    q_mu, q_sqrt = _random_q(rng, len(Z), 1)
    model.q_mu.assign(q_mu)
    model.q_sqrt.assign(q_sqrt)
    # GPflow's KL through Kuu with its jitter, the model's through training's factor of Kmm.
    np.testing.assert_allclose(gpflow.models.SVGP.prior_kl(model), model.prior_kl(), rtol=1e-6)


def test_the_model_layer_is_a_short_chain_on_svgp_with_no_metaclass_of_its_own(model_class):
    """A model is its own class on at most three of the package's (the sites' protocol, the
    closed-form steps, the constructor), then SVGP; the shared machinery is composed, not
    inherited, and the metaclass is GPflow's."""
    own = [c for c in model_class.__mro__ if c.__module__.startswith("gpflow_fastvi.")]
    assert len(own) <= 4, [c.__name__ for c in own]
    assert type(model_class) is type(gpflow.models.SVGP)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", list(HOLDING), ids=lambda c: c.__name__)
def test_the_data_first_spelling_builds_the_same_model_with_a_deprecation_warning(
    model_class, data
):
    """``Model((X, Y), kernel, x)`` is the spelling before ``data=``: it still builds the model
    that ``data=`` builds, x taken by what it is (the inducing inputs or the likelihood), and
    says what to write instead."""
    X, _ = data
    Z = X[::5].copy()
    likelihood = _likelihood(model_class)
    for after_kernel, named in (
        ((Z,), {"inducing_variable": Z}),
        ((likelihood,), {"likelihood": likelihood}),
        ((), {}),
    ):
        with pytest.warns(DeprecationWarning, match=r"data=\(X, Y\)"):
            first = model_class(data, gpflow.kernels.SquaredExponential(), *after_kernel)
        by_name = model_class(gpflow.kernels.SquaredExponential(), data=data, **named)
        np.testing.assert_array_equal(first.inducing_variable.Z, by_name.inducing_variable.Z)
        assert type(first.likelihood) is type(by_name.likelihood)
        np.testing.assert_allclose(first.training_loss(), by_name.training_loss(), rtol=1e-10)
    with pytest.raises(TypeError, match="both first and as data="):
        model_class(data, gpflow.kernels.SquaredExponential(), Z, data=data)


@pytest.mark.parametrize("whiten", [True, False])
def test_q_mu_and_q_sqrt_start_q_where_svgp_would(model_class, data, rng, whiten):
    X, _ = data
    Z = X[::5].copy()
    q_mu, q_sqrt = _random_q(rng, len(Z), 1)
    likelihood = _likelihood(model_class)
    model = model_class(
        gpflow.kernels.SquaredExponential(), likelihood, Z, q_mu=q_mu, q_sqrt=q_sqrt, whiten=whiten
    )
    svgp = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(),
        likelihood,
        Z,
        q_mu=q_mu,
        q_sqrt=q_sqrt,
        whiten=whiten,
    )
    np.testing.assert_array_equal(model.q_mu.numpy(), q_mu)
    np.testing.assert_array_equal(model.q_sqrt.numpy(), q_sqrt)
    assert not model.q_mu.trainable and not model.q_sqrt.trainable  # still set in closed form
    for ours, svgps in zip(model.posterior().predict_f(X), svgp.predict_f(X)):
        np.testing.assert_allclose(ours, svgps, rtol=1e-10, atol=1e-12)
    # KL[q(u) ‖ p(u)] by SVGP's name, equal to GPflow's own.
    np.testing.assert_allclose(model.prior_kl(), svgp.prior_kl(), rtol=1e-6)


@pytest.mark.parametrize("model_class", list(HOLDING), ids=lambda c: c.__name__)
def test_the_data_holding_form_takes_q_mu_and_q_sqrt_too(model_class, data, rng):
    X, _ = data
    Z = X[::5].copy()
    q_mu, q_sqrt = _random_q(rng, len(Z), 1)
    model = model_class(
        gpflow.kernels.SquaredExponential(),
        inducing_variable=Z,
        q_mu=q_mu,
        q_sqrt=q_sqrt,
        data=data,
    )
    np.testing.assert_array_equal(model.q_mu.numpy(), q_mu)


def test_num_latent_gps_is_read_off_q_sqrt_as_svgp_reads_it(rng):
    X = rng.normal(size=(30, 2))
    Z = X[:6].copy()
    q_mu, q_sqrt = _random_q(rng, len(Z), 3)
    for model_class, likelihood in (
        (fv.VITaylor, gpflow.likelihoods.Softmax(3)),
        (fv.VIConcave, gpflow.likelihoods.Softmax(3)),
        (fv.PolyaGammaSVGP, fv.likelihoods.LogisticSoftmax(3)),
    ):
        # num_latent_gps left at its default of 1: SVGP takes L = 3 from q_sqrt.
        model = model_class(gpflow.kernels.Matern52(), likelihood, Z, q_mu=q_mu, q_sqrt=q_sqrt)
        assert model.num_latent_gps == 3
        np.testing.assert_array_equal(model.q_sqrt.numpy(), q_sqrt)


def test_shapes_of_q_mu_and_q_sqrt_are_checked(model_class, data, rng):
    Z = data[0][::5].copy()
    M = len(Z)
    q_mu, q_sqrt = _random_q(rng, M, 1)
    likelihood = _likelihood(model_class)
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(ValueError, match=rf"q_mu must have shape \[{M}, 1\]"):
        model_class(kernel, likelihood, Z, q_mu=q_mu[:-1])
    with pytest.raises(ValueError, match=rf"q_sqrt must have shape \[1, {M}, {M}\]"):
        model_class(kernel, likelihood, Z, q_sqrt=q_sqrt[:, :-1])
    with pytest.raises(ValueError, match=r"q_sqrt must have shape \[L, M, M\]"):
        model_class(kernel, likelihood, Z, q_sqrt=q_sqrt[0])
    with pytest.raises(ValueError, match="q_mu contains NaN"):
        model_class(kernel, likelihood, Z, q_mu=np.full_like(q_mu, np.nan))


@pytest.mark.slow
def test_gpflows_model_functions_take_a_model_with_the_data(family_model_class, data):
    """gpflow.models.training_loss_closure(model, data) and its kin, as GPflow's tests call them."""
    Z = data[0][::5].copy()
    model, twin = FACTORIES[family_model_class](data, Z), FACTORIES[family_model_class](data, Z)
    loss = gpflow.models.training_loss_closure(model, data)()
    np.testing.assert_allclose(loss, twin.training_loss_closure(data)(), rtol=1e-10)
    np.testing.assert_allclose(
        gpflow.models.training_loss(model, data), twin.training_loss(data), rtol=1e-10
    )
    objective = gpflow.models.maximum_log_likelihood_objective(model, data)
    np.testing.assert_allclose(objective, twin.maximum_log_likelihood_objective(data), rtol=1e-10)
    if family_model_class in HOLDING:
        held = HOLDING[family_model_class](data, Z)
        assert np.isfinite(gpflow.models.training_loss_closure(held, data)())


def test_svgp_options_the_models_cannot_take_are_refused_by_name(model_class, data):
    X = data[0]
    Z = X[::5].copy()
    likelihood = _likelihood(model_class)
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(fv.UnsupportedConfigurationError, match="falls back to one q"):
        model_class(gpflow.kernels.SharedIndependent(kernel, output_dim=2), likelihood, Z)
    shared = gpflow.inducing_variables.SharedIndependentInducingVariables(
        gpflow.inducing_variables.InducingPoints(Z)
    )
    with pytest.raises(fv.UnsupportedConfigurationError, match="multi-output inducing variable"):
        model_class(kernel, likelihood, shared)
    # Several latent GPs with a one-output likelihood are several outputs, Y [N, L], as in
    # SVGP, whether asked for by num_latent_gps or by the leading axis of q_sqrt.
    for options in ({"num_latent_gps": 2}, {"q_sqrt": np.tile(np.eye(len(Z)), (2, 1, 1))}):
        assert model_class(kernel, likelihood, Z, **options)._target_columns == 2
    # More rows than num_data: SVGP scales them down, a model refuses them.
    model = FACTORIES[model_class](data, Z)
    model.num_data = len(X) // 2
    with pytest.raises(fv.InvalidDataError, match="more than num_data"):
        model.training_loss(data)


@pytest.mark.parametrize("model_class", SCALAR_LIKELIHOOD_MODELS, ids=lambda c: c.__name__)
def test_a_switched_likelihood_is_refused_by_name(model_class):
    switched = gpflow.likelihoods.SwitchedLikelihood(
        [gpflow.likelihoods.Gaussian(), gpflow.likelihoods.Bernoulli(**LOGIT)]
    )
    Z = np.zeros((3, 1))
    with pytest.raises(fv.IncompatibleLikelihoodError, match="SwitchedLikelihood reads each"):
        model_class(gpflow.kernels.SquaredExponential(), switched, Z)


def test_the_refusals_are_value_errors_as_svgps_checks_are():
    """Code written against SVGP's checks, ``except ValueError``, catches every refusal."""
    for error in (
        fv.UnsupportedConfigurationError,
        fv.IncompatibleLikelihoodError,
        fv.InvalidDataError,
    ):
        assert issubclass(error, ValueError)
