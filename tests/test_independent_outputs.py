"""
L independent outputs of a one-output likelihood, Y [N, L] with ``num_latent_gps=L``, as GPflow's
SVGP takes them: one latent function and one column of sites per output, every output's q(u_l)
from the one projection of the data.
"""

import warnings

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv

MODELS = (fv.VITaylor, fv.VIConcave)
"""The models whose site rules read one column of Y per latent function, for any likelihood."""
BINARY_MODELS = (*MODELS, fv.VIJJ, fv.PolyaGammaSVGP, fv.KLCorrected)
"""...and every model for the logit Bernoulli: VIJJ's Jaakkola–Jordan sites, PolyaGammaSVGP's
Pólya-Gamma ones and KLCorrected's PPA sites too."""


def _outputs(rng, N=80, L=3):
    X = rng.uniform(-3.0, 3.0, size=(N, 1))
    F = np.hstack([np.sin(X), np.cos(2.0 * X), X / 3.0])[:, :L]
    return X, F


@pytest.mark.parametrize("model_class", MODELS, ids=lambda c: c.__name__)
def test_gaussian_outputs_give_sgprs_bound_in_one_step(model_class, rng):
    """With a Gaussian likelihood the sites are exact, so one step lands on the optimal q(u) of
    every output, and the ELBO is SGPR's collapsed bound, which sums over Y's columns."""
    X, F = _outputs(rng)
    Y = F + 0.2 * rng.normal(size=F.shape)
    Z = np.linspace(-3.0, 3.0, 9)[:, None]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.9)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.05)
    model = model_class(kernel, likelihood, Z, num_latent_gps=3)
    model.update_sites(1, data=(X, Y))
    sgpr = gpflow.models.SGPR((X, Y), kernel, Z, noise_variance=0.05)
    np.testing.assert_allclose(model.elbo((X, Y)), sgpr.elbo(), rtol=1e-8)
    mean, var = model.predict_f(X[:5])
    sgpr_mean, sgpr_var = sgpr.predict_f(X[:5])
    np.testing.assert_allclose(mean, sgpr_mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var, sgpr_var, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", BINARY_MODELS, ids=lambda c: c.__name__)
def test_binary_outputs_are_the_sum_of_one_model_per_column(model_class, rng):
    """The outputs share the kernel and Z and nothing else: the model's ELBO and predictions are
    those of one model per column of Y, each trained by the same steps."""
    X, F = _outputs(rng, L=2)
    Y = (F + 0.3 * rng.normal(size=F.shape) > 0.0).astype(float)
    Z = np.linspace(-3.0, 3.0, 9)[:, None]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.9)
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    model = model_class(kernel, likelihood, Z, num_latent_gps=2)
    model.update_sites(8, data=(X, Y))
    singles = []
    for column in range(2):
        single = model_class(kernel, likelihood, Z)
        single.update_sites(8, data=(X, Y[:, column : column + 1]))
        singles.append(single)
    np.testing.assert_allclose(
        model.elbo((X, Y)),
        sum(s.elbo((X, Y[:, c : c + 1])) for c, s in enumerate(singles)),
        rtol=1e-8,
    )
    np.testing.assert_allclose(
        model.predict_y(X[:5])[0],
        np.hstack([s.predict_y(X[:5])[0] for s in singles]),
        rtol=1e-6,  # VIConcave's steps end at a tolerance, on the sum over the outputs
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "likelihood",
    [
        gpflow.likelihoods.Gaussian(0.1),
        gpflow.likelihoods.Poisson(),
        gpflow.likelihoods.Bernoulli(),
    ],
    ids=lambda likelihood: type(likelihood).__name__,
)
def test_kl_corrected_outputs_are_the_sum_of_one_model_per_column(likelihood, rng):
    """KLCorrected's PPA sites, their tilted moments (GPflow's closed forms, read per output, and
    the quadrature at the tilted mode), both bounds, the ELBO and the predictions of f̄ in every
    covariance layout are those of one model per column of Y."""
    X, F = _outputs(rng, L=2)
    if isinstance(likelihood, gpflow.likelihoods.Poisson):
        Y = rng.poisson(np.exp(1.5 * F)).astype(float)
    elif isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        Y = (F + 0.3 * rng.normal(size=F.shape) > 0.0).astype(float)
    else:
        Y = F + 0.3 * rng.normal(size=F.shape)
    Z = np.linspace(-3.0, 3.0, 9)[:, None]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.9)

    def trained(Y, **options):
        model = fv.KLCorrected(kernel, likelihood, Z, beta=2.0, **options)
        model.update_sites(4, data=(X, Y))
        return model

    model = trained(Y, num_latent_gps=2)
    singles = [trained(Y[:, c : c + 1]) for c in range(2)]
    for bound in ("kl_corrected", "standard"):
        for m in (model, *singles):
            m.bound = bound
        np.testing.assert_allclose(
            model._objective((X, Y)),
            sum(s._objective((X, Y[:, c : c + 1])) for c, s in enumerate(singles)),
            rtol=1e-9,
        )
    np.testing.assert_allclose(
        model.elbo((X, Y)),
        sum(s.elbo((X, Y[:, c : c + 1])) for c, s in enumerate(singles)),
        rtol=1e-9,
    )
    Xnew = X[:4]
    mean, var = model.predict_f(Xnew)
    single_var = np.hstack([s.predict_f(Xnew)[1] for s in singles])
    np.testing.assert_allclose(var, single_var, rtol=1e-9)
    _, output_cov = model.predict_f(Xnew, full_output_cov=True)  # [N, L, L], diagonal in L
    np.testing.assert_allclose(np.diagonal(output_cov, axis1=1, axis2=2), single_var, rtol=1e-9)
    np.testing.assert_allclose(output_cov[:, 0, 1], 0.0, atol=1e-12)
    _, full = model.predict_f(Xnew, full_cov=True)  # [L, N, N]
    for c, single in enumerate(singles):
        np.testing.assert_allclose(full[c], single.predict_f(Xnew, full_cov=True)[1][0], rtol=1e-9)
    _, both = model.predict_f(Xnew, full_cov=True, full_output_cov=True)  # [N, L, N, L]
    np.testing.assert_allclose(both[:, 0, :, 0], full[0], rtol=1e-9)
    np.testing.assert_allclose(both[:, 0, :, 1], 0.0, atol=1e-12)


def test_targets_must_have_a_column_per_output(rng):
    X, F = _outputs(rng)
    model = fv.VIConcave(
        gpflow.kernels.SquaredExponential(), gpflow.likelihoods.Gaussian(), X[::8], num_latent_gps=3
    )
    with pytest.raises(fv.InvalidDataError, match=r"Y must have shape \[N, 3\], one column per"):
        model.elbo((X, F[:, :1]))
    dataset = tf.data.Dataset.from_tensor_slices((X, F[:, :2])).batch(20)
    with pytest.raises(fv.InvalidDataError, match=r"Y must have shape \[b, 3\]"):
        model.elbo(dataset)


def _shared_parts(Z, outputs):
    return (
        gpflow.kernels.SharedIndependent(gpflow.kernels.Matern52(), outputs),
        gpflow.inducing_variables.SharedIndependentInducingVariables(
            gpflow.inducing_variables.InducingPoints(Z.copy())
        ),
    )


@pytest.mark.parametrize("model_class", MODELS, ids=lambda c: c.__name__)
def test_gpflows_shared_multi_output_spelling_is_the_same_model(model_class, rng):
    """SharedIndependent with SharedIndependentInducingVariables is GPflow's multi-output spelling
    of one kernel and one Z for every output: the model's bound is SGPR's, and its predictions,
    full covariances included, are GPflow's SVGP's at the same q(u)."""
    X, F = _outputs(rng)
    Y = F + 0.2 * rng.normal(size=F.shape)
    Z = np.linspace(-3.0, 3.0, 9)[:, None]
    kernel, inducing_variable = _shared_parts(Z, 3)
    model = model_class(
        kernel, gpflow.likelihoods.Gaussian(0.1), inducing_variable, num_latent_gps=3
    )
    model.update_sites(1, data=(X, Y))
    sgpr = gpflow.models.SGPR((X, Y), gpflow.kernels.Matern52(), Z, noise_variance=0.1)
    np.testing.assert_allclose(model.elbo((X, Y)), sgpr.elbo(), rtol=1e-8)
    svgp_kernel, svgp_inducing = _shared_parts(Z, 3)
    svgp = gpflow.models.SVGP(
        svgp_kernel,
        gpflow.likelihoods.Gaussian(0.1),
        svgp_inducing,
        q_mu=model.q_mu.numpy(),
        q_sqrt=model.q_sqrt.numpy(),
    )
    _assert_predictions_equal(model, svgp, X[:4])


def _assert_predictions_equal(model, svgp, X):
    """predict_f of ``model`` and of GPflow's ``svgp`` agree at X for all four covariance options."""
    for full_cov in (False, True):
        for full_output_cov in (False, True):
            ours = model.predict_f(X, full_cov=full_cov, full_output_cov=full_output_cov)
            theirs = svgp.predict_f(X, full_cov=full_cov, full_output_cov=full_output_cov)
            for a, b in zip(ours, theirs):
                np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-12)


def _assert_at_svgps_optimum(model, kernel, inducing_variable, X, Y):
    """GPflow's SVGP on the model's prior (a second ``kernel`` and ``inducing_variable`` of the
    same kind) and at its q(u) has the model's ELBO, the same gradient in the kernel's
    parameters and the same predictions in all four covariance layouts; and a natural-gradient
    step of size 1 moves its ELBO by nothing: the model's q(u) is SVGP's optimum."""
    svgp = gpflow.models.SVGP(
        kernel,
        gpflow.likelihoods.Gaussian(float(model.likelihood.variance.numpy())),
        inducing_variable,
        num_latent_gps=model.num_latent_gps,
        whiten=model.whiten,
        q_mu=model.q_mu.numpy(),
        q_sqrt=model.q_sqrt.numpy(),
    )
    elbo = float(svgp.elbo((X, Y)))
    np.testing.assert_allclose(float(model.elbo((X, Y))), elbo, rtol=1e-10)
    with tf.GradientTape() as ours:
        our_elbo = model.elbo((X, Y))
    with tf.GradientTape() as theirs:
        their_elbo = svgp.elbo((X, Y))
    our_gradients = ours.gradient(our_elbo, model.kernel.trainable_variables)
    their_gradients = theirs.gradient(their_elbo, svgp.kernel.trainable_variables)
    assert len(our_gradients) == len(their_gradients) > 0
    for a, b in zip(our_gradients, their_gradients):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)
    _assert_predictions_equal(model, svgp, X[:4])
    gpflow.set_trainable(svgp.q_mu, False)
    gpflow.set_trainable(svgp.q_sqrt, False)
    gpflow.optimizers.NaturalGradient(1.0).minimize(
        svgp.training_loss_closure((X, Y)), [(svgp.q_mu, svgp.q_sqrt)]
    )
    np.testing.assert_allclose(float(svgp.elbo((X, Y))), elbo, rtol=1e-8)


def _separate_parts(kind, Z, P):
    """GPflow's independent multi-output priors with a part of each output's own: a kernel per
    output, a Z per output, or both (the kernels' lengthscales differ, the Z are shifted)."""
    kernels = [gpflow.kernels.Matern52(lengthscales=0.7 + 0.3 * p) for p in range(P)]
    points = [gpflow.inducing_variables.InducingPoints(Z + 0.1 * p) for p in range(P)]
    if kind == "kernels":
        return (
            gpflow.kernels.SeparateIndependent(kernels),
            gpflow.inducing_variables.SharedIndependentInducingVariables(points[0]),
        )
    if kind == "inducing":
        return (
            gpflow.kernels.SharedIndependent(gpflow.kernels.Matern52(), output_dim=P),
            gpflow.inducing_variables.SeparateIndependentInducingVariables(points),
        )
    return (
        gpflow.kernels.SeparateIndependent(kernels),
        gpflow.inducing_variables.SeparateIndependentInducingVariables(points),
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kernels", "inducing", "both"])
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("model_class", MODELS, ids=lambda c: c.__name__)
def test_separate_priors_step_to_svgps_optimum_and_predict_as_svgp(model_class, whiten, kind, rng):
    """With a kernel or a Z of each output's own and a Gaussian likelihood, one step lands on
    SVGP's optimal q(u): GPflow's natural-gradient step of size 1 from there moves SVGP's ELBO by
    nothing, the ELBO and its θ-gradient are SVGP's at the same q(u), and so are the predictions
    for all four covariance options."""
    X, F = _outputs(rng)
    Y = F + 0.2 * rng.normal(size=F.shape)
    Z = np.linspace(-3.0, 3.0, 7)[:, None]
    model_kernel, model_inducing = _separate_parts(kind, Z, 3)
    model = model_class(
        model_kernel,
        gpflow.likelihoods.Gaussian(0.1),
        model_inducing,
        num_latent_gps=3,
        whiten=whiten,
    )
    model.update_sites(1, data=(X, Y))
    _assert_at_svgps_optimum(model, *_separate_parts(kind, Z, 3), X, Y)


@pytest.mark.slow
def test_a_kernel_per_class_trains_by_fit_to_a_higher_softmax_elbo_than_one_kernel(rng):
    """Multi-class with a kernel of each class's own (GPflow's SeparateIndependent), the
    classification user's case of separate priors: fit trains it, each class's lengthscale its
    own, and it converges."""
    N, C = 150, 3
    X = rng.normal(size=(N, 2))
    Y = np.argmax(X @ rng.normal(size=(2, C)) + 0.5 * rng.normal(size=(N, C)), axis=1)[:, None]
    Z = gpflow.inducing_variables.SharedIndependentInducingVariables(
        gpflow.inducing_variables.InducingPoints(X[::15].copy())
    )
    kernel = gpflow.kernels.SeparateIndependent(
        [gpflow.kernels.SquaredExponential() for _ in range(C)]
    )
    model = fv.VIConcave(kernel, gpflow.likelihoods.Softmax(C), Z, num_latent_gps=C)
    start = float(model.elbo((X, Y.astype(float))))
    trace = fv.fit(model, (X, Y.astype(float)), max_iter=60)
    assert trace.stop_reason == "converged"
    assert float(model.elbo((X, Y.astype(float)))) > start + 10.0
    lengthscales = [float(k.lengthscales.numpy()) for k in model.kernel.kernels]
    assert len(set(np.round(lengthscales, 6))) == C


def test_multi_output_configurations_that_are_not_independent_outputs_are_refused_by_name(rng):
    Z = np.linspace(-3.0, 3.0, 9)[:, None]
    likelihood = gpflow.likelihoods.Gaussian()
    kernel, inducing_variable = _shared_parts(Z, 3)
    with pytest.raises(fv.UnsupportedConfigurationError, match=r"has 3 outputs"):
        fv.VIConcave(kernel, likelihood, inducing_variable, num_latent_gps=2)
    mixed = gpflow.kernels.LinearCoregionalization(
        [gpflow.kernels.Matern52() for _ in range(2)], W=np.ones((3, 2))
    )
    for model_class in (fv.VIJJ, fv.PolyaGammaSVGP, fv.KLCorrected):
        # A closed-form step needs one site per latent function: the error names VIConcave.
        binary = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        with pytest.raises(fv.UnsupportedConfigurationError, match="mixes them.*Use VIConcave"):
            model_class(mixed, binary, inducing_variable, num_latent_gps=2)
    with pytest.raises(fv.UnsupportedConfigurationError, match="without a mean function"):
        fv.VIConcave(
            mixed,
            likelihood,
            inducing_variable,
            num_latent_gps=2,
            mean_function=gpflow.mean_functions.Constant(),
        )
    with pytest.raises(fv.UnsupportedConfigurationError, match="a kernel per class"):
        fv.VIConcave(mixed, gpflow.likelihoods.Softmax(2), inducing_variable, num_latent_gps=2)
    with pytest.raises(fv.UnsupportedConfigurationError, match="falls back to one q"):
        fv.VIConcave(kernel, likelihood, Z, num_latent_gps=3)
    uneven = gpflow.inducing_variables.SeparateIndependentInducingVariables(
        [gpflow.inducing_variables.InducingPoints(Z[: 9 - p]) for p in range(3)]
    )
    with pytest.raises(fv.UnsupportedConfigurationError, match="as many inducing inputs"):
        fv.VIConcave(kernel, likelihood, uneven, num_latent_gps=3)
    separate, per_output = _separate_parts("both", Z, 3)
    model = fv.VIConcave(separate, likelihood, per_output, num_latent_gps=3)
    X = np.linspace(-3.0, 3.0, 30)[:, None]
    with pytest.raises(fv.UnsupportedConfigurationError, match="greedy_rounds selects one"):
        fv.fit(model, (X, np.zeros((30, 3))), greedy_rounds=2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, model_class, route",
    [
        ("shared", fv.VIConcave, "scipy"),
        ("mixed", fv.VIConcave, "scipy"),
        ("mixed", fv.VITaylor, "fit"),
    ],
    ids=["shared-VIConcave", "mixed-VIConcave", "mixed-VITaylor"],
)
def test_gpflows_multi_output_notebook_case_swapped_ends_at_svgps_elbo(case, model_class, route):
    """GPflow's multi-output notebook, its first independent case (one kernel and one Z for all
    outputs) and its mixed case (two latent functions mixed into the three outputs by
    LinearCoregionalization, W drawn at random), Z trained, with the class swapped, ends within
    0.01 nats per point of SVGP's ELBO under gpflow.optimizers.Scipy: VIConcave by the notebook's
    own Scipy call, VITaylor by fit, as its docstring says (under Scipy its gradient holds the
    expansion points fixed, and on the mixed case L-BFGS-B can stop short)."""
    rng = np.random.default_rng(1)
    N, M, P, L = 100, 15, 3, 2
    X = rng.uniform(-5.0, 5.0, size=(N, 1))
    G = np.hstack((0.5 * np.sin(3 * X) + X, 3.0 * np.cos(X) - X))
    F = G @ np.array([[0.5, -0.3, 1.5], [-0.4, 0.43, 0.0]])
    Y = F + 0.2 * rng.normal(size=F.shape)

    W = rng.normal(size=(P, L))

    def trained(model_class):
        if case == "shared":
            kernel = gpflow.kernels.SharedIndependent(
                gpflow.kernels.SquaredExponential() + gpflow.kernels.Linear(), output_dim=P
            )
        else:
            kernel = gpflow.kernels.LinearCoregionalization(
                [gpflow.kernels.SquaredExponential() + gpflow.kernels.Linear() for _ in range(L)],
                W=W.copy(),
            )
        inducing_variable = gpflow.inducing_variables.SharedIndependentInducingVariables(
            gpflow.inducing_variables.InducingPoints(np.linspace(-5.0, 5.0, M)[:, None])
        )
        model = model_class(
            kernel,
            gpflow.likelihoods.Gaussian(),
            inducing_variable=inducing_variable,
            num_latent_gps=P if case == "shared" else L,
        )
        if route == "fit" and model_class is not gpflow.models.SVGP:
            fv.fit(model, (X, Y))
        else:
            gpflow.optimizers.Scipy().minimize(
                model.training_loss_closure((X, Y)),
                model.trainable_variables,
                options={"maxiter": 2000},
            )
        return float(model.elbo((X, Y)))

    assert (trained(gpflow.models.SVGP) - trained(model_class)) / N < 0.01


def test_a_scipy_closure_of_vitaylor_over_mixed_outputs_sends_the_user_to_fit(rng):
    """VITaylor's full-data closure over outputs mixed by LinearCoregionalization warns once,
    naming fit (L-BFGS-B can stop short on it); VIConcave's does not, nor VITaylor's over
    independent outputs."""
    X = rng.uniform(-3.0, 3.0, size=(40, 1))
    Y = rng.normal(size=(40, 3))
    Z = np.linspace(-3.0, 3.0, 7)[:, None]

    def advice(model_class, mixed):
        if mixed:
            kernel = gpflow.kernels.LinearCoregionalization(
                [gpflow.kernels.SquaredExponential() for _ in range(2)], W=rng.normal(size=(3, 2))
            )
        else:
            kernel = gpflow.kernels.SharedIndependent(gpflow.kernels.SquaredExponential(), 3)
        inducing_variable = gpflow.inducing_variables.SharedIndependentInducingVariables(
            gpflow.inducing_variables.InducingPoints(Z)
        )
        model = model_class(
            kernel,
            gpflow.likelihoods.Gaussian(),
            inducing_variable=inducing_variable,
            num_latent_gps=2 if mixed else 3,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.training_loss_closure((X, Y))
            model.training_loss_closure((X, Y))
        return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]

    (message,) = advice(fv.VITaylor, mixed=True)
    assert "gpflow.optimizers.Scipy" in message and "gpflow_fastvi.fit(model, data)" in message
    assert advice(fv.VIConcave, mixed=True) == []
    assert advice(fv.VITaylor, mixed=False) == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kernels", "inducing", "both"])
def test_kl_corrected_with_separate_priors_is_one_model_per_output(kind, rng):
    """KLCorrected with a kernel or a Z of each output's own: its KL-corrected bound after the
    E-steps, and its predictive, are those of one model per output with that output's kernel
    and Z."""
    X, F = _outputs(rng)
    Y = F + 0.2 * rng.normal(size=F.shape)
    Z = np.linspace(-3.0, 3.0, 7)[:, None]
    kernel, inducing_variable = _separate_parts(kind, Z, 3)
    model = fv.KLCorrected(
        kernel, gpflow.likelihoods.Gaussian(0.1), inducing_variable, num_latent_gps=3, beta=4.0
    )
    model.update_sites(3, data=(X, Y))
    total, variances = 0.0, []
    for p in range(3):
        kernels, points = _separate_parts(kind, Z, 3)
        own_kernel = kernels.kernels[p] if kind != "inducing" else kernels.kernel
        own_Z = points.inducing_variable_list[p] if kind != "kernels" else points.inducing_variable
        single = fv.KLCorrected(own_kernel, gpflow.likelihoods.Gaussian(0.1), own_Z, beta=4.0)
        single.update_sites(3, data=(X, Y[:, p : p + 1]))
        total += float(single._objective((X, Y[:, p : p + 1])))
        variances.append(single.predict_f(X[:4])[1])
    np.testing.assert_allclose(float(model._objective((X, Y))), total, rtol=1e-9)
    np.testing.assert_allclose(model.predict_f(X[:4])[1], np.hstack(variances), rtol=1e-9)


def _mixed_parts(kind, Z, W):
    """GPflow's LinearCoregionalization of W.shape[1] latent functions into W.shape[0] outputs,
    with one Z for all of them or a Z of each latent function's own."""
    kernel = gpflow.kernels.LinearCoregionalization(
        [gpflow.kernels.Matern52(lengthscales=0.7 + 0.4 * g) for g in range(W.shape[1])],
        W=W.copy(),
    )
    points = [gpflow.inducing_variables.InducingPoints(Z + 0.1 * g) for g in range(W.shape[1])]
    if kind == "shared":
        return kernel, gpflow.inducing_variables.SharedIndependentInducingVariables(points[0])
    return kernel, gpflow.inducing_variables.SeparateIndependentInducingVariables(points)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["shared", "separate"])
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("model_class", [fv.VIConcave, fv.VITaylor], ids=lambda c: c.__name__)
def test_mixed_outputs_step_to_svgps_optimum(model_class, kind, whiten, rng):
    """Outputs f = W g mixed from independent latent functions (GPflow's
    LinearCoregionalization): VIConcave's sites on each latent function are the derivatives of
    the expected log-likelihood in its marginals, through W; VITaylor's, the expansion of the
    outputs' log-likelihood in the latent values, exact for a Gaussian. Their steps end at SVGP's
    optimal q(u), where GPflow's natural-gradient step moves SVGP's ELBO by nothing; there the
    ELBO, its gradient in the kernels and in W, and the predictions in all four covariance
    layouts are SVGP's."""
    X, F = _outputs(rng, L=2)
    W = np.array([[1.0, 0.3], [-0.5, 1.2], [0.8, 0.8]])
    Y = F @ W.T + 0.2 * rng.normal(size=(len(X), 3))
    Z = np.linspace(-3.0, 3.0, 7)[:, None]
    kernel, inducing_variable = _mixed_parts(kind, Z, W)
    likelihood = gpflow.likelihoods.Gaussian(0.05)
    model = model_class(kernel, likelihood, inducing_variable, num_latent_gps=2, whiten=whiten)
    model.update_sites(200, data=(X, Y))
    _assert_at_svgps_optimum(model, *_mixed_parts(kind, Z, W), X, Y)


class _JacobiTaylor(fv.VITaylor):
    """VITaylor stepping through its own sites, the exact diagonal of the Hessian in each latent
    function, at every step: the Jacobi iteration its step rule replaces."""

    def _step_rule(self, X, Y, xi):
        return self._site_rule(X, Y, xi)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", [fv.VITaylor, _JacobiTaylor], ids=["steps", "jacobi"])
def test_vi_taylor_steps_converge_where_the_latent_functions_are_mixed_alike(model_class, rng):
    """Three latent functions mixed into three outputs by columns of W whose cosines are 0.8, a
    Gaussian of small noise: the expansion's Hessian in the latent values is far from diagonal.
    VITaylor's steps, through the Hessian's absolute row sums, still reach SVGP's optimal q(u);
    through its diagonal alone (its last step's sites) every step would overshoot, by more each
    time."""
    X, F = _outputs(rng, N=40, L=3)
    W = np.linalg.cholesky(0.2 * np.eye(3) + 0.8).T  # Wᵀ W: ones, and 0.8 off the diagonal
    Y = F @ W.T + 0.05 * rng.normal(size=(len(X), 3))
    Z = np.linspace(-3.0, 3.0, 6)[:, None]
    kernel, inducing_variable = _mixed_parts("shared", Z, W)
    model = model_class(
        kernel, gpflow.likelihoods.Gaussian(0.01), inducing_variable, num_latent_gps=3
    )
    model.update_sites(200, data=(X, Y))
    if model_class is _JacobiTaylor:
        assert not np.isfinite(model.q_mu.numpy()).all() or np.abs(model.q_mu.numpy()).max() > 1e6
        return
    _assert_at_svgps_optimum(model, *_mixed_parts("shared", Z, W), X, Y)


@pytest.mark.slow
def test_vi_concave_trains_mixed_binary_outputs_as_svgp_does(rng):
    """Three binary outputs mixed from two latent functions, Z held: VIConcave's fit (W and the
    kernels trained) ends within 0.01 nats a point of SVGP's ELBO trained by GPflow's Scipy."""
    X, F = _outputs(rng, N=150, L=2)
    W = np.array([[1.5, 0.2], [-0.4, 1.3], [0.9, -0.9]])
    Y = (F @ W.T + 0.3 * rng.normal(size=(len(X), 3)) > 0.0).astype(float)
    Z = np.linspace(-3.0, 3.0, 8)[:, None]
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)

    def built(model_class):
        kernel, inducing_variable = _mixed_parts("shared", Z, np.ones((3, 2)) * 0.5)
        model = model_class(kernel, likelihood, inducing_variable, num_latent_gps=2)
        gpflow.set_trainable(model.inducing_variable, False)
        return model

    model = built(fv.VIConcave)
    fv.fit(model, (X, Y))
    svgp = built(gpflow.models.SVGP)
    gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure((X, Y)), svgp.trainable_variables, options={"maxiter": 5000}
    )
    ours, theirs = float(model.elbo((X, Y))), float(svgp.elbo((X, Y)))
    assert ours > theirs - 0.01 * len(X)
