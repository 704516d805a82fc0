"""
``q_diag=True``: a factorised q(u), as GPflow's SVGP takes it. Every step stores the optimum of the
factorised family (the mean field of the full optimum, in the frame q(u) is stored in), and the
objective is the sites' ELBO there: the collapsed bound less KL[q_mf ‖ q*].
"""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.gaussian import WhitenedQ, diagonal_q_sqrt, kl_between, mean_field_sqrt

from .conftest import make_binary_data
from .test_contract import FACTORIES, LOGIT

CLOSED_FORM = (fv.VIJJ, fv.VITaylor, fv.KLCorrected)
"""The models whose step is the collapsed one, with sites held by their local parameters."""


def _lower(rng, L, M):
    return np.tril(rng.normal(size=(L, M, M)), -1) + np.eye(M) * rng.uniform(0.5, 2.0, (L, M, 1))


def test_the_mean_field_has_the_reciprocal_precision_diagonal_and_kl_between_is_its_price(rng):
    L, M = 3, 6
    S = _lower(rng, L, M)
    precision = np.linalg.inv(S @ np.transpose(S, (0, 2, 1)))
    sd = mean_field_sqrt(tf.constant(S)).numpy()  # [M, L]
    np.testing.assert_allclose(sd, (1.0 / np.sqrt(np.diagonal(precision, axis1=1, axis2=2))).T)
    # A diagonal factor is its own mean field.
    np.testing.assert_allclose(mean_field_sqrt(diagonal_q_sqrt(tf.constant(sd))), sd)
    # KL[q_mf ‖ q] = ½ Σ log Λⱼⱼ − ½ log|Λ| per latent function, ≥ 0 (Hadamard).
    m = rng.normal(size=(M, L))
    gap = kl_between(WhitenedQ(tf.constant(m), diagonal_q_sqrt(sd)), WhitenedQ(m, tf.constant(S)))
    expected = 0.5 * sum(np.sum(np.log(np.diag(P))) - np.linalg.slogdet(P)[1] for P in precision)
    np.testing.assert_allclose(gap, expected, rtol=1e-10)
    assert expected > 0.0


@pytest.mark.slow
@pytest.mark.parametrize("whiten", [True, False], ids=["whitened", "unwhitened"])
@pytest.mark.parametrize("model_class", CLOSED_FORM, ids=lambda c: c.__name__)
def test_a_step_stores_the_factorised_optimum_of_its_sites_and_returns_their_elbo_there(
    model_class, whiten, data, rng
):
    X, _ = data
    likelihood = FACTORIES[model_class](data, X[:2]).likelihood
    model = model_class(
        gpflow.kernels.SquaredExponential(lengthscales=0.8),
        likelihood,
        X[::5].copy(),
        q_diag=True,
        whiten=whiten,
    )
    model.update_sites(2, data=data)
    params = model._site_parameters(data)
    bound = float(model._update_q(data, params))
    M = model.inducing_variable.num_inducing
    assert model.q_sqrt.shape == (M, 1) and np.all(model.q_sqrt.numpy() > 0)
    # The bound the step returns is the sites' ELBO at the q(u) it stored...
    np.testing.assert_allclose(model._sites_elbo(data, params), bound, rtol=1e-9)
    # ... and that q(u) is their maximum over the factorised family: every move lowers it.
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    for _ in range(4):
        model.q_mu.assign(q_mu + 1e-3 * rng.normal(size=q_mu.shape))
        model.q_sqrt.assign(q_sqrt * np.exp(1e-3 * rng.normal(size=q_sqrt.shape)))
        assert float(model._sites_elbo(data, params)) < bound
    # A full covariance does better on the same sites, by KL[q_mf ‖ q*].
    full = model_class(model.kernel, likelihood, model.inducing_variable.Z.numpy(), whiten=whiten)
    assert float(full._update_q(data, params)) > bound


def _svgp_optimum(kernel, likelihood, Z, data, *, q_diag, whiten, train_theta):
    """GPflow's SVGP trained by Scipy to convergence, its hyperparameters held or trained."""
    svgp = gpflow.models.SVGP(
        gpflow.utilities.deepcopy(kernel), likelihood, Z.copy(), q_diag=q_diag, whiten=whiten
    )
    gpflow.set_trainable(svgp.inducing_variable, False)
    if not train_theta:
        gpflow.set_trainable(svgp.kernel, False)
    gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure(data), svgp.trainable_variables, options={"maxiter": 5000}
    )
    return svgp


@pytest.mark.slow
@pytest.mark.parametrize("whiten", [True, False], ids=["whitened", "unwhitened"])
def test_vi_concave_steps_reach_svgps_factorised_optimum_at_fixed_hyperparameters(data, whiten):
    X, _ = data
    Z = X[::5].copy()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.8)
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    model = fv.VIConcave(kernel, likelihood, Z, q_diag=True, whiten=whiten)
    model.update_sites(40, data=data)
    svgp = _svgp_optimum(kernel, likelihood, Z, data, q_diag=True, whiten=whiten, train_theta=False)
    elbo, svgp_elbo = float(model.elbo(data)), float(svgp.elbo(data))
    assert elbo >= svgp_elbo - 1e-6 and abs(elbo - svgp_elbo) < 1e-4 * abs(svgp_elbo)
    np.testing.assert_allclose(model.q_mu, svgp.q_mu, atol=1e-3)
    np.testing.assert_allclose(model.q_sqrt, svgp.q_sqrt, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [None, 16], ids=["in memory", "batches"])
@pytest.mark.parametrize("whiten", [True, False], ids=["whitened", "unwhitened"])
def test_vi_concaves_factorised_gradient_is_svgps_at_its_q(data, whiten, batch_size):
    """With q_diag=True the loss's θ-gradient holds q(u) fixed where the family is defined, the
    stored frame, as SVGP's does: held in the whitened frame instead, an unwhitened factorised
    q(u) would leave its family as Kmm moved, and the gradient was another one."""
    X, _ = data
    Z = X[::5].copy()
    kernel = gpflow.kernels.Matern52(lengthscales=[0.8, 1.3])
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    model = fv.VIConcave(kernel, likelihood, Z, q_diag=True, whiten=whiten, num_data=len(X))
    model.batch_size = batch_size
    for _ in range(4):  # settled: the steps of the next loss barely move q(u)
        model.training_loss(data)
    svgp = gpflow.models.SVGP(
        gpflow.utilities.deepcopy(kernel), likelihood, Z, q_diag=True, whiten=whiten
    )
    svgp.q_mu.assign(model.q_mu)
    svgp.q_sqrt.assign(model.q_sqrt)
    gradients = []
    for m in (model, svgp):
        with tf.GradientTape() as tape:
            loss = m.training_loss(data)
        gradients.append(tape.gradient(loss, m.kernel.trainable_variables))
    for ours, theirs in zip(*gradients):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", [fv.VIConcave, fv.VITaylor], ids=lambda c: c.__name__)
def test_gpflows_scipy_recipe_with_q_diag_ends_at_svgps_elbo(model_class, rng):
    """The class swapped in a q_diag=True script trained by gpflow.optimizers.Scipy, hyperparameters
    and all, ends within 0.01 nats per point of SVGP's own answer."""
    data = make_binary_data(rng, N=120)
    Z = data[0][::8].copy()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.8)
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    model = model_class(gpflow.utilities.deepcopy(kernel), likelihood, Z.copy(), q_diag=True)
    gpflow.set_trainable(model.inducing_variable, False)
    gpflow.optimizers.Scipy().minimize(
        model.training_loss_closure(data), model.trainable_variables, options={"maxiter": 500}
    )
    assert model.q_sqrt.shape == (len(Z), 1)
    svgp = _svgp_optimum(kernel, likelihood, Z, data, q_diag=True, whiten=True, train_theta=True)
    gap = (float(svgp.elbo(data)) - float(model.elbo(data))) / len(data[0])
    assert gap < 0.01, gap


def test_predictions_and_kl_are_svgps_at_the_same_factorised_q(model_class, data, rng):
    X, _ = data
    Z = X[::5].copy()
    likelihood = FACTORIES[model_class](data, Z).likelihood
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.8)
    model = model_class(kernel, likelihood, Z, q_diag=True)
    q_mu, q_sqrt = rng.normal(size=(len(Z), 1)), rng.uniform(0.2, 1.0, size=(len(Z), 1))
    svgp = gpflow.models.SVGP(kernel, likelihood, Z, q_diag=True, q_mu=q_mu, q_sqrt=q_sqrt)
    model.q_mu.assign(q_mu)
    model.q_sqrt.assign(q_sqrt)
    np.testing.assert_allclose(model.prior_kl(), svgp.prior_kl(), rtol=1e-6)
    Xnew = rng.uniform(-2.0, 2.0, size=(7, 2))
    for ours, theirs in zip(model.posterior().predict_f(Xnew), svgp.predict_f(Xnew)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    for full_cov in (False, True):
        for ours, theirs in zip(
            model.predict_f(Xnew, full_cov=full_cov), svgp.predict_f(Xnew, full_cov=full_cov)
        ):
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-10)


@pytest.mark.slow
def test_the_stochastic_step_has_the_factorised_optimum_as_its_fixed_point(data):
    """Natural-gradient steps of size ρ < 1 on all the data, each stored as the mean field of its
    full-covariance result, settle where steps of size 1 do: the factorised family's optimum."""
    X, _ = data
    Z = X[::5].copy()
    build = lambda: fv.PolyaGammaSVGP(  # noqa: E731
        gpflow.kernels.SquaredExponential(lengthscales=0.8),
        gpflow.likelihoods.Bernoulli(**LOGIT),
        Z.copy(),
        q_diag=True,
    )
    closed, stochastic = build(), build()
    closed.update_sites(15, data=data)
    for _ in range(30):
        stochastic.natural_gradient_step(data, 0.6)
    np.testing.assert_allclose(stochastic.q_mu, closed.q_mu, atol=1e-6)
    np.testing.assert_allclose(stochastic.q_sqrt, closed.q_sqrt, atol=1e-6)


@pytest.mark.slow
def test_fit_trains_a_factorised_multi_class_model(rng):
    X = rng.normal(size=(90, 2))
    Y = np.argmax(X @ rng.normal(size=(2, 3)), axis=1)[:, None].astype(float)
    model = fv.VIConcave(
        gpflow.kernels.SquaredExponential(),
        gpflow.likelihoods.Softmax(3),
        X[::9].copy(),
        num_latent_gps=3,
        q_diag=True,
    )
    start = float(model.elbo((X, Y)))
    fv.fit(model, (X, Y), max_iter=20)
    assert model.q_sqrt.shape == (10, 3)
    assert float(model.elbo((X, Y))) > start + 10.0
    accuracy = np.mean(np.argmax(model.predict_y(X)[0], axis=1) == Y[:, 0])
    assert accuracy > 0.85


def test_q_sqrt_in_the_wrong_layout_or_not_positive_is_refused_in_svgps_terms(data):
    Z = data[0][::5].copy()
    kernel = gpflow.kernels.SquaredExponential()
    likelihood = gpflow.likelihoods.Bernoulli(**LOGIT)
    with pytest.raises(ValueError, match=r"q_sqrt must have shape \[M, L\]"):
        fv.VIJJ(kernel, likelihood, Z, q_diag=True, q_sqrt=np.tile(np.eye(len(Z)), (1, 1, 1)))
    with pytest.raises(ValueError, match="must be positive"):
        fv.VIJJ(kernel, likelihood, Z, q_diag=True, q_sqrt=-np.ones((len(Z), 1)))
    # Its columns are the latent GPs, as SVGP reads them: two outputs.
    for model_class in (fv.VIConcave, fv.VIJJ, fv.KLCorrected):
        model = model_class(kernel, likelihood, Z, q_diag=True, q_sqrt=np.ones((len(Z), 2)))
        assert model._target_columns == 2


@pytest.mark.parametrize(
    "model_class", [*CLOSED_FORM, fv.VIConcave, fv.PolyaGammaSVGP], ids=lambda c: c.__name__
)
def test_the_q_u_a_loss_stored_is_the_one_its_frame_records(model_class, data):
    """After a full-data training_loss the frame belongs to the stored q(u), so the next
    evaluation keeps or refuses its q(u) by its loss. q_sqrt's positive transform moves the last
    bit of what is assigned, and a record of the values given never matched: every evaluation,
    a line search's wild trial point too, then took over q(u)."""
    X, Y = data
    model = model_class(
        gpflow.kernels.SquaredExponential(),
        FACTORIES[model_class](data, X[:8]).likelihood,
        X[:8].copy(),
        q_diag=True,
    )
    model.training_loss(data)
    frame = model._q_frame
    assert bool(
        frame.belongs_to(tf.convert_to_tensor(model.q_mu), tf.convert_to_tensor(model.q_sqrt))
    )
