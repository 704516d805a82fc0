"""PolyaGammaSVGP with LogisticSoftmax(C): C latent GPs, one shared projection, per-class steps."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from scipy.special import logsumexp, roots_hermitenorm

import gpflow_fastvi as fv
from gpflow_fastvi.exceptions import IncompatibleLikelihoodError, InvalidDataError
from gpflow_fastvi.likelihoods import LogisticSoftmax

C = 3


def three_classes(rng, N=60):
    """Points in the plane labelled by the nearest of three centres, with some label noise."""
    X = rng.uniform(-2.0, 2.0, size=(N, 2))
    centres = np.array([[-1.0, -1.0], [1.0, -0.5], [0.0, 1.2]])
    labels = np.argmin(((X[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    flip = rng.uniform(size=N) < 0.05
    labels[flip] = rng.integers(0, C, flip.sum())
    return X, labels[:, None].astype(np.float64)


def make_model(data, M=10, whiten=True, **kwargs):
    X, _ = data
    return fv.PolyaGammaSVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[0.8, 0.8]),
        LogisticSoftmax(C),
        X[:M].copy(),
        num_latent_gps=C,
        num_data=X.shape[0],
        whiten=whiten,
        train_inducing=False,
        **kwargs,
    )


def random_q(model, seed=3):
    rng = np.random.default_rng(seed)
    M = model.q_mu.shape[0]
    model.q_mu.assign(rng.normal(0.0, 0.7, (M, C)))
    roots = np.tril(0.2 * rng.standard_normal((C, M, M)), -1)
    roots += np.eye(M) * rng.uniform(0.3, 1.0, (C, 1, M))
    model.q_sqrt.assign(roots)


def expected_log_density(label, mu, var, nodes=24):
    """E_q[log p(y | f)] of the logistic softmax for q(f_c) = N(mu_c, var_c), by a product
    Gauss–Hermite rule over the C dimensions."""
    x, weights = roots_hermitenorm(nodes)
    grid = np.stack(np.meshgrid(*[x] * C, indexing="ij"), -1).reshape(-1, C)
    mass = np.prod(np.stack(np.meshgrid(*[weights / weights.sum()] * C, indexing="ij"), -1), -1)
    log_sigmoid = -np.logaddexp(0.0, -(mu + np.sqrt(var) * grid))
    return np.sum(mass.ravel() * (log_sigmoid[:, label] - logsumexp(log_sigmoid, axis=1)))


def test_q_is_stored_as_gpflow_stores_c_latent_gps(rng):
    model = make_model(three_classes(rng))
    assert model.q_mu.shape == (10, C)
    assert model.q_sqrt.shape == (C, 10, 10)


@pytest.mark.parametrize("whiten", [True, False])
def test_predictions_agree_with_gpflow_svgp_at_the_same_q(rng, whiten):
    """predict_f (marginals, full covariance, full output covariance) as GPflow's SVGP gives it
    for the same q(u) and C latent GPs."""
    data = three_classes(rng)
    model = make_model(data, whiten=whiten)
    random_q(model)
    svgp = gpflow.models.SVGP(
        model.kernel,
        model.likelihood,
        model.inducing_variable,
        num_latent_gps=C,
        q_mu=model.q_mu.numpy(),
        q_sqrt=model.q_sqrt.numpy(),
        whiten=whiten,
    )
    Xnew = rng.uniform(-3.0, 3.0, size=(7, 2))
    for full_cov, full_output_cov in [(False, False), (True, False), (False, True), (True, True)]:
        ours = model.predict_f(Xnew, full_cov=full_cov, full_output_cov=full_output_cov)
        theirs = gpflow.models.SVGP.predict_f(svgp, Xnew, full_cov, full_output_cov)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("rho", [1.0, 0.3])
def test_step_agrees_with_gpflow_natural_gradient_per_class(rng, whiten, rho):
    """The closed-form step = GPflow's NaturalGradient(gamma=ρ) on the augmented ELBO over all C
    latent GPs at once; with ρ = 1, each class lands on its closed-form optimum for the local
    parameters of the starting q(u)."""
    data = three_classes(rng)
    tensors = tuple(tf.constant(a) for a in data)
    ours, theirs = make_model(data, whiten=whiten), make_model(data, whiten=whiten)
    for model in (ours, theirs):
        gpflow.set_trainable(model.kernel, False)
        random_q(model)
    fv.NaturalGradientSVI(ours, step_size=rho).step(tensors)
    gpflow.optimizers.NaturalGradient(gamma=rho).minimize(
        lambda: -theirs.maximum_log_likelihood_objective(tensors), [(theirs.q_mu, theirs.q_sqrt)]
    )
    np.testing.assert_allclose(ours.q_mu, theirs.q_mu, rtol=1e-7, atol=1e-9)
    S_ours = ours.q_sqrt @ tf.linalg.matrix_transpose(ours.q_sqrt)
    S_theirs = theirs.q_sqrt @ tf.linalg.matrix_transpose(theirs.q_sqrt)
    np.testing.assert_allclose(S_ours, S_theirs, rtol=1e-7, atol=1e-9)


def test_the_augmented_elbo_is_below_svgp_elbo_by_quadrature(rng):
    """At any q(u), the augmented ELBO (optimal local factors) ≤ SVGP's ELBO with
    LogisticSoftmax, whose expected log-likelihood is taken by quadrature over the C latent
    values of each point."""
    data = three_classes(rng, N=25)
    model = make_model(data, M=6)
    random_q(model)
    Fmu, Fvar = (t.numpy() for t in model.predict_f(data[0]))
    expected = sum(
        expected_log_density(int(label), mu, var)
        for label, mu, var in zip(data[1][:, 0], Fmu, Fvar)
    )
    svgp_elbo = expected - float(tf.reduce_sum(model.prior_kl()))
    augmented = float(model.maximum_log_likelihood_objective(data))
    assert augmented <= svgp_elbo
    assert augmented > svgp_elbo - 1.5 * len(data[0])


@pytest.mark.slow
def test_fit_learns_three_classes_and_a_checkpoint_restores_into_svgp(rng, tmp_path):
    data = three_classes(rng, N=300)
    test = three_classes(np.random.default_rng(11), N=300)
    model = make_model(data, M=20)
    fv.fit(model, data, max_iter=200)
    probabilities = model.predict_y(test[0])[0].numpy()
    assert probabilities.shape == (300, C)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)
    assert np.mean(probabilities.argmax(axis=1) == test[1][:, 0]) > 0.85

    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    svgp = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0]),
        LogisticSoftmax(C),
        np.zeros((20, 2)),
        num_latent_gps=C,
        num_data=300,
    )
    tf.train.Checkpoint(model=svgp).read(path).assert_existing_objects_matched()
    for a, b in zip(model.predict_f(test[0]), svgp.predict_f(test[0])):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_mini_batches_train_c_latent_gps(rng):
    """The SVI route on mini-batches: the steps and the batch ELBO work for C latent GPs."""
    data = three_classes(rng, N=400)
    model = make_model(data, M=15)
    trace = fv.fit(model, data, batch_size=50, max_iter=30)
    assert np.all(np.isfinite(trace.column("objective")))
    assert trace[-1]["objective"] > trace[0]["objective"]


def test_bad_construction_and_labels_raise_clear_errors(rng):
    data = three_classes(rng)
    X, Y = data
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(IncompatibleLikelihoodError, match="num_latent_gps=3"):
        fv.PolyaGammaSVGP(kernel, LogisticSoftmax(C), X[:5], num_latent_gps=1)
    # A Bernoulli with several latent GPs is several binary outputs, as in SVGP: classes in one
    # column are refused by naming the multi-class likelihood to use.
    binary_outputs = fv.PolyaGammaSVGP(
        kernel, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid), X[:5], num_latent_gps=2
    )
    with pytest.raises(InvalidDataError, match="LogisticSoftmax"):
        binary_outputs.maximum_log_likelihood_objective((X, np.minimum(Y, 1.0)))
    with pytest.raises(IncompatibleLikelihoodError, match="LogisticSoftmax"):
        fv.PolyaGammaSVGP(kernel, gpflow.likelihoods.Softmax(C), X[:5], num_latent_gps=C)
    model = make_model(data)
    for bad, words in [
        (Y + 0.5, "integer classes"),
        (Y + C, "integer classes"),
        (np.eye(C)[Y[:, 0].astype(int)], r"np.argmax"),
    ]:
        with pytest.raises(InvalidDataError, match=words):
            model.maximum_log_likelihood_objective((X, bad))
