"""
The swap contract, run over every model class: what a GPflow SVGP user may rely on whichever model
they swap in, and the protocol every model offers. A new model gets all of it by one line in
``FACTORIES``; the first test fails until that line is written.
"""

import inspect
import warnings

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.models import ALL_MODELS, SiteModel
from gpflow_fastvi.training.persistent import PATIENCE, TOL

LOGIT = dict(invlink=tf.sigmoid)


def _kernel():
    return gpflow.kernels.SquaredExponential(lengthscales=0.8)


PROBIT = gpflow.likelihoods.Bernoulli


def _swapped(model_class, likelihood):
    """The model built exactly as SVGP is: ``Model(kernel, likelihood, Z, num_data=N)``."""
    return lambda data, Z: model_class(_kernel(), likelihood(), Z, num_data=len(data[0]))


def _logit():
    return gpflow.likelihoods.Bernoulli(**LOGIT)


FACTORIES = {
    fv.VIJJ: _swapped(fv.VIJJ, _logit),
    fv.VITaylor: _swapped(fv.VITaylor, _logit),
    fv.KLCorrected: _swapped(fv.KLCorrected, PROBIT),
    fv.PolyaGammaSVGP: _swapped(fv.PolyaGammaSVGP, _logit),
    fv.VIConcave: _swapped(fv.VIConcave, _logit),
}
"""How the contract builds each model on binary data (X, Y) with inducing inputs Z: with SVGP's
signature, the data per call."""

HOLDING = {
    fv.VIJJ: lambda data, Z: fv.VIJJ(_kernel(), inducing_variable=Z, data=data),
    fv.VITaylor: lambda data, Z: fv.VITaylor(_kernel(), inducing_variable=Z, data=data),
    fv.KLCorrected: lambda data, Z: fv.KLCorrected(_kernel(), inducing_variable=Z, data=data),
    fv.VIConcave: lambda data, Z: fv.VIConcave(_kernel(), inducing_variable=Z, data=data),
}
"""The data-holding (SGPR-like) form, for the models that have one."""


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
    assert set(HOLDING) == {c for c in ALL_MODELS if issubclass(c, fv.GaussianSitesModel)}


def _holds_data(model):
    return getattr(model, "data", None) is not None


def _call_data(model, data):
    """What the protocol's data argument is for this model: None if it holds its data."""
    return None if _holds_data(model) else data


_FITTED = {}


def _fitted(model_class, data):
    """The model after three iterations of fit, a fresh copy at each call: the fit is deterministic,
    so it runs once per model class and data set, and no test sees another's changes."""
    key = (model_class, data[0].tobytes(), data[1].tobytes())
    if key not in _FITTED:
        model = FACTORIES[model_class](data, data[0][::5].copy())
        fv.fit(model, _call_data(model, data), max_iter=3)
        _FITTED[key] = model
    return gpflow.utilities.deepcopy(_FITTED[key])


@pytest.mark.slow
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
    # SVGP's variables and nothing else: no per-point state, no warning about unused values (but
    # KLCorrected's β, a hyperparameter of its model f = f̄ + ε that SVGP does not have).
    status = tf.train.Checkpoint(model=svgp).read(path)
    if isinstance(model, fv.KLCorrected):
        status.expect_partial()
    else:
        status.assert_consumed()
    Xnew = np.linspace(-2, 2, 7)[:, None].repeat(2, axis=1)
    for got, want in zip(svgp.predict_f(Xnew), model.posterior().predict_f(Xnew)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # The model's f is SVGP's; its y is SVGP's but for KLCorrected, whose f = f̄ + ε adds β⁻¹.
    for got, want in zip(model.predict_f(Xnew), svgp.predict_f(Xnew)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    noise = 1.0 / model.beta.numpy() if isinstance(model, fv.KLCorrected) else 0.0
    svgp_mean, svgp_var = svgp.predict_f(Xnew)
    want_y = model.likelihood.predict_mean_and_var(Xnew, svgp_mean, svgp_var + noise)
    for got, want in zip(model.predict_y(Xnew), want_y):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_print_summary_shows_svgp_attribute_paths(model_class, data):
    model = _fitted(model_class, data)
    summary = gpflow.utilities.tabulate_module_summary(model)
    for path in (".kernel.lengthscales", ".inducing_variable.Z", ".q_mu", ".q_sqrt"):
        assert f"{model_class.__name__}{path}" in summary


@pytest.mark.slow
def test_objective_and_yardstick_are_finite_and_a_bound_lies_below_the_yardstick(model_class, data):
    model = FACTORIES[model_class](data, data[0][::5].copy())
    call_data = _call_data(model, data)
    model.update_sites(30, data=call_data)
    # The objective reads the sites off the stored q(u), as the next closed-form step does (and
    # PolyaGammaSVGP's reports the ELBO after its step, which at the fixed point is the same).
    objective = model._objective(call_data)
    np.testing.assert_allclose(model.update_sites(1, data=call_data), objective, rtol=1e-10)
    yardstick = model.elbo(call_data)
    assert np.isfinite(objective) and np.isfinite(yardstick)
    if model._objective_is_bound:
        assert objective <= yardstick + 1e-8


@pytest.mark.slow
def test_a_natural_gradient_step_of_one_at_the_closed_form_fixed_point_changes_nothing(
    model_class, data
):
    """The two kinds of step of the protocol agree: the closed-form optimum is the natural step's."""
    model = FACTORIES[model_class](data, data[0][::5].copy())
    call_data = _call_data(model, data)
    if call_data is not None:
        call_data = tuple(tf.constant(a) for a in call_data)
    update = tf.function(lambda: model.update_sites(1, data=call_data), autograph=False)
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


# --------------------------------------------------------------------------------------------------
# The one-line swap: SVGP's signature, the data per call, GPflow's optimisers.

SVGP_KEYWORDS = ("mean_function", "num_latent_gps", "q_diag", "whiten", "num_data")


def test_every_model_takes_svgps_signature(model_class):
    parameters = inspect.signature(model_class.__init__).parameters
    assert list(parameters)[1:4] == ["kernel", "likelihood", "inducing_variable"]
    assert set(SVGP_KEYWORDS) | {"train_inducing"} <= set(parameters)
    # SVGP's defaults too: a checkpoint restores into an SVGP built with SVGP's defaults.
    svgp = inspect.signature(gpflow.models.SVGP.__init__).parameters
    for name in SVGP_KEYWORDS:
        assert parameters[name].default == svgp[name].default, name


def test_data_with_more_rows_than_num_data_are_refused(model_class, data):
    X, Y = data
    model = FACTORIES[model_class](data, X[::5].copy())
    model.num_data = len(X) // 2  # as if built with num_data=N/2
    for call in (model.training_loss, model.elbo, lambda d: fv.fit(model, d, max_iter=1)):
        with pytest.raises(ValueError, match="num_data"):
            call(data)
    with pytest.raises(ValueError, match="built without data|per call"):
        model.elbo()
    # Test points are not training data: there may be more of them than num_data.
    assert np.all(np.isfinite(model.predict_log_density(data)))


def test_the_data_holding_form_is_the_svgp_form_with_the_data(model_class, data):
    if model_class not in HOLDING:
        pytest.skip("PolyaGammaSVGP takes its data per call only, as SVGP does")
    Z = data[0][::5].copy()
    held, swapped = HOLDING[model_class](data, Z), FACTORIES[model_class](data, Z)
    assert held.num_data == swapped.num_data == len(data[0])
    np.testing.assert_allclose(held.update_sites(3), swapped.update_sites(3, data=data), rtol=1e-12)
    np.testing.assert_allclose(held.q_mu.numpy(), swapped.q_mu.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(held.training_loss(), swapped.training_loss(data), rtol=1e-12)
    with pytest.raises(ValueError, match="holds its training data"):
        fv.fit(held, data)


@pytest.mark.slow
def test_gpflows_training_interface_takes_the_data_per_call(family_model_class, data):
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    loss = model.training_loss(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a Scipy loop on all the data trains by the method
        closure = model.training_loss_closure(data)
    assert np.isfinite(loss) and np.isfinite(closure()) and np.isfinite(model.elbo(data))
    # An iterator of mini-batches, as in GPflow's SVGP notebooks: one trace for all batches.
    batches = iter(tf.data.Dataset.from_tensor_slices(data).repeat().batch(20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.training_loss_closure(batches, compile=False)()  # the eager form runs too
        closure = model.training_loss_closure(batches)
    # A model whose mini-batch loop ends short of fit says so once, in one sentence.
    advice = [w for w in caught if str(w.message) == family_model_class._mini_batch_closure_advice]
    assert len(advice) == (1 if family_model_class._mini_batch_closure_advice else 0)
    if advice:
        assert str(advice[0].message).count(". ") == 0 and "fit(" in str(advice[0].message)
    optimizer = gpflow.keras.tf_keras.optimizers.Adam(0.01)
    for _ in range(3):
        optimizer.minimize(closure, model.trainable_variables)
    assert np.all(np.isfinite(model.q_mu.numpy()))
    with pytest.raises(ValueError, match="built without data|per call"):
        model.training_loss()


def _adam_step(model, optimizer, data):
    """One step of GPflow's Adam loop on ``training_loss``: the loss and its gradient."""
    with tf.GradientTape() as tape:
        loss = model.training_loss(data)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss, gradients


@pytest.mark.slow
def test_a_loss_compiled_with_autograph_on_converts_none_of_the_package(model_class, data, caplog):
    """GPflow's Scipy compiles the loss it is given with AutoGraph on (``tf.function`` of
    ``model.training_loss``, as GPflow's notebooks pass it for a model that holds its data, or of
    the user's own lambda): the package's control flow is written in TensorFlow already, so none
    of its code is converted, and AutoGraph logs nothing (it used to fail on VIConcave's steps and
    say so)."""
    model = FACTORIES[model_class](data, data[0][::5].copy())
    loss = tf.function(lambda: model.training_loss(data))  # AutoGraph on, as GPflow's Scipy
    assert np.isfinite(loss().numpy())
    assert "AutoGraph" not in caplog.text


@pytest.mark.parametrize(
    "form",
    [
        pytest.param("tuple", marks=pytest.mark.slow),
        "tuple_in_batches",
        "dataset",
        pytest.param("iterator", marks=pytest.mark.slow),
    ],
)
def test_the_loss_is_differentiated_inside_a_users_own_tf_function(family_model_class, data, form):
    """
    GPflow's own loop, written by the user: the gradient of ``training_loss`` taken in their own
    ``tf.function`` and applied by Adam, with all the data as a tuple (held whole, or summed in
    batches of ``batch_size``), as a ``tf.data.Dataset`` streamed once per pass, or as an
    iterator of mini-batches. All the data give, step by step, the losses and gradients of the
    same loop run eagerly on the tuple held whole.
    """
    Z = data[0][::5].copy()
    model, reference = FACTORIES[family_model_class](data, Z), FACTORIES[family_model_class](
        data, Z
    )
    if form == "tuple_in_batches":
        if not isinstance(model, fv.GaussianSitesModel):
            pytest.skip(f"{family_model_class.__name__} takes no batch_size")
        model.batch_size = 20
    dataset = tf.data.Dataset.from_tensor_slices(data).batch(20)  # batches of 20, 20 and 10
    batches = iter(dataset.repeat())
    call_data = {"dataset": dataset}.get(form, data)
    optimizer = gpflow.keras.tf_keras.optimizers.Adam(0.01)
    reference_optimizer = gpflow.keras.tf_keras.optimizers.Adam(0.01)

    @tf.function(autograph=False)
    def step():
        return _adam_step(model, optimizer, next(batches) if form == "iterator" else call_data)

    for _ in range(2):
        loss, gradients = step()
        assert np.isfinite(loss)
        assert all(np.all(np.isfinite(g)) for g in gradients)
        assert any(np.any(g.numpy() != 0.0) for g in gradients)
        if form != "iterator":
            expected_loss, expected = _adam_step(reference, reference_optimizer, data)
            np.testing.assert_allclose(loss, expected_loss, rtol=1e-9)
            for value, wanted in zip(gradients, expected):
                np.testing.assert_allclose(value, wanted, rtol=1e-7, atol=1e-10)


def test_a_mini_batch_loss_takes_the_methods_natural_gradient_step(model_class, data):
    """
    On a mini-batch, training_loss moves q(u) by the method's own natural-gradient step (ρ =
    b / 10,000) and returns the batch's estimate at the new q(u), whose gradient reaches the
    hyperparameters only: q_mu and q_sqrt are not trainable, so Adam moves θ while q(u) follows.
    """
    X, Y = (tf.constant(a) for a in data)
    Z = data[0][::5].copy()
    model, reference = FACTORIES[model_class](data, Z), FACTORIES[model_class](data, Z)
    trainable = {id(v) for v in model.trainable_variables}
    assert not trainable & {id(v) for v in (*model.q_mu.variables, *model.q_sqrt.variables)}
    batch = (X[:20], Y[:20])
    with tf.GradientTape() as tape:
        loss = model.training_loss(batch)
    gradients = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None and np.all(np.isfinite(g)) for g in gradients)
    objective = reference.natural_gradient_step(
        batch, 20 / fv.models.step_sizes.LOSS_AVERAGED_POINTS
    )
    np.testing.assert_allclose(loss, -(objective + reference.log_prior_density()), rtol=1e-10)
    np.testing.assert_allclose(model.q_mu.numpy(), reference.q_mu.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.q_sqrt.numpy(), reference.q_sqrt.numpy(), atol=1e-12)
    assert not np.allclose(model.q_mu.numpy(), 0.0)  # the step moved q(u) from its start


@pytest.mark.slow
def test_gpflows_scipy_on_the_closure_reaches_what_fit_reaches(model_class, data):
    """GPflow's own optimiser on training_loss_closure((X, Y)) ends at the method's answer."""
    X, Y = data
    Z = X[::5].copy()
    fitted, scipy = FACTORIES[model_class](data, Z), FACTORIES[model_class](data, Z)
    # Z held: on 50 points VITaylor's best iterate by the SVGP ELBO, where fit leaves it, and the
    # optimum of its own objective, where Scipy ends, differ by 0.03 in p with Z trained.
    for model in (fitted, scipy):
        gpflow.set_trainable(model.inducing_variable, False)
    fv.fit(fitted, data, max_iter=2000, tol=1e-10)  # both to their end, to compare end points
    gpflow.optimizers.Scipy().minimize(
        scipy.training_loss_closure(data), scipy.trainable_variables, options={"maxiter": 2000}
    )
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    np.testing.assert_allclose(scipy.predict_y(Xnew)[0], fitted.predict_y(Xnew)[0], atol=0.01)
    nll = [-float(np.mean(m.predict_log_density(data))) for m in (scipy, fitted)]
    assert abs(nll[0] - nll[1]) < 0.01


@pytest.mark.slow
def test_a_trial_point_where_kmm_cannot_be_factorised_costs_inf_and_stores_nothing(
    family_model_class, data
):
    """
    +inf with a zero gradient, not NaN: SciPy's L-BFGS-B backtracks from +inf, but may accept a
    NaN trial point and, its gradient being zero, report convergence there.
    """
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    closure = model.training_loss_closure(data)
    assert np.isfinite(closure())
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    model.kernel.lengthscales.unconstrained_variable.assign(np.nan)
    with tf.GradientTape() as tape:
        loss = closure()
    gradients = tape.gradient(loss, model.trainable_variables)
    assert np.isposinf(loss)
    assert all(np.all(g.numpy() == 0.0) for g in gradients)
    np.testing.assert_array_equal(model.q_mu.numpy(), q_mu)
    np.testing.assert_array_equal(model.q_sqrt.numpy(), q_sqrt)


def test_a_dataset_of_unbatched_targets_is_refused_clearly(model_class, data):
    X, Y = data
    model = FACTORIES[model_class](data, X[::5].copy())
    flat_targets = tf.data.Dataset.from_tensor_slices((X, Y[:, 0])).batch(10)
    with pytest.raises(fv.InvalidDataError, match="must yield batches: Y of rank 2"):
        fv.fit(model, flat_targets, max_iter=1)
    with pytest.raises(fv.InvalidDataError, match="a tuple of 1 item"):
        fv.fit(model, (X,), max_iter=1)


def test_every_model_trains_its_inducing_inputs_as_svgp_does_unless_told(model_class, data):
    """An array Z is trained, as by SVGP; ``train_inducing=False`` holds it; an inducing variable
    the user built keeps its own flags, untouched."""
    Z = data[0][::5].copy()
    trains_Z = lambda model: model.inducing_variable.Z.trainable  # noqa: E731
    likelihood = FACTORIES[model_class](data, Z).likelihood
    assert trains_Z(gpflow.models.SVGP(_kernel(), likelihood, Z))
    assert trains_Z(model_class(_kernel(), likelihood, Z, num_data=len(Z)))
    assert not trains_Z(model_class(_kernel(), likelihood, Z, train_inducing=False))
    held = gpflow.inducing_variables.InducingPoints(Z.copy())
    gpflow.set_trainable(held, False)
    assert model_class(_kernel(), likelihood, held).inducing_variable is held
    assert not held.Z.trainable
    assert trains_Z(model_class(_kernel(), likelihood, held, train_inducing=True))
    with pytest.raises(TypeError, match="train_inducing must be True, False or None"):
        model_class(_kernel(), likelihood, Z, train_inducing="yes")
    if model_class in HOLDING:  # the full GP, Z = X, keeps Z fixed
        assert not trains_Z(HOLDING[model_class](data, None))


def test_what_the_models_do_not_support_is_refused_clearly(model_class, data):
    Z = data[0][::5].copy()
    likelihood = FACTORIES[model_class](data, Z).likelihood
    two_outputs = gpflow.kernels.SharedIndependent(_kernel(), output_dim=2)
    with pytest.raises(fv.UnsupportedConfigurationError, match="single-output kernel"):
        model_class(two_outputs, likelihood, Z)
    # GPflow's MultiClass is VIConcave's; the others refuse it, naming the models that take C
    # classes (VITaylor by its reason, the others by the multi-class hint).
    if model_class is not fv.VIConcave:
        with pytest.raises(fv.IncompatibleLikelihoodError, match="VIConcave"):
            model_class(_kernel(), gpflow.likelihoods.MultiClass(3), Z, num_latent_gps=3)
    if model_class in (fv.VIJJ, fv.PolyaGammaSVGP):  # the logit link only: what to use instead
        with pytest.raises(fv.IncompatibleLikelihoodError, match="probit link: use Bernoulli"):
            model_class(_kernel(), gpflow.likelihoods.Bernoulli(), Z)
        with pytest.raises(fv.IncompatibleLikelihoodError, match="another scalar likelihood"):
            model_class(_kernel(), gpflow.likelihoods.Gaussian(), Z)
    if model_class in HOLDING:
        with pytest.raises(ValueError, match="needs the data"):
            model_class(_kernel(), likelihood, 10)
        with pytest.raises(ValueError, match="num_data=7"):
            model_class(_kernel(), inducing_variable=Z, num_data=7, data=data)


@pytest.mark.slow
def test_every_model_trains_in_float32_to_the_float64_answer(model_class, data):
    """float32 (GPflow's default float set to it, as for a GPU) reaches the same model as float64:
    the predictions of the two fits agree to float32's precision, amplified by the optimisation
    (measured: 5·10⁻⁶ to 10⁻⁴ for the closed-form models, 2·10⁻³ for PolyaGammaSVGP, whose SVI
    route stops at a relative change of 10⁻⁵). VITaylor's L-BFGS-B takes the gradient at fixed
    expansion points, which is exact only at their fixed point, so float32 and float64 can stop at
    different points near it: on these 50 points 0.011 to 0.068 nats apart, 6.6·10⁻³ to 1.8·10⁻² in
    p (which of the two depends on the rounding of the run: the larger in a process of its own, the
    smaller after other tests in the same worker). Its predictions are held to 3·10⁻² and its
    objectives to four times fit's tolerance window (window × tol × N)."""
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    predictions, objectives = {}, {}
    for dtype in (np.float64, np.float32):
        with gpflow.config.as_context(gpflow.config.Config(float=dtype, jitter=1e-6)):
            model = FACTORIES[model_class](data, data[0][::5].copy())
            # Z held: trained on 50 points, it is too weakly determined for float32 to end where
            # float64 does (measured: 0.03 apart in p for VITaylor and PolyaGammaSVGP).
            gpflow.set_trainable(model.inducing_variable, False)
            X, Y = (a.astype(dtype) for a in data)
            trace = fv.fit(model, (X, Y), max_iter=300)
            p, _ = model.predict_y(Xnew.astype(dtype))
        assert model.q_mu.dtype == dtype and p.dtype == dtype
        assert trace.stop_reason == "converged", trace
        predictions[dtype] = p.numpy()
        objectives[dtype] = trace.rows[-1]["objective"]
    if model_class._objective_is_bound:
        np.testing.assert_allclose(predictions[np.float32], predictions[np.float64], atol=5e-3)
    else:
        window_tolerance = PATIENCE * TOL * len(data[0])
        assert abs(objectives[np.float32] - objectives[np.float64]) <= 4 * window_tolerance
        np.testing.assert_allclose(predictions[np.float32], predictions[np.float64], atol=3e-2)


@pytest.mark.slow
def test_every_model_takes_fits_first_steps_in_float32_as_in_float64(model_class, data):
    """The fast tier's float32 check (the converged answer is the slow test above): built and fitted
    in float32, a model is float32 throughout, and three iterations of fit from the same start end
    where float64's do, up to float32's precision (measured: 2·10⁻⁷ to 1.1·10⁻⁵)."""
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    p64, _ = _fitted(model_class, data).predict_y(Xnew)  # three iterations in float64
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32, jitter=1e-6)):
        model = FACTORIES[model_class](data, data[0][::5].copy())
        X, Y = (a.astype(np.float32) for a in data)
        trace = fv.fit(model, (X, Y), max_iter=3)
        p32, _ = model.predict_y(Xnew.astype(np.float32))
    assert model.q_mu.dtype == np.float32 and p32.dtype == np.float32
    assert len(trace.rows) == 3 and np.all(np.isfinite(trace.column("objective")))
    np.testing.assert_allclose(p32.numpy(), p64.numpy(), atol=1e-4)


@pytest.mark.slow
def test_moving_the_inducing_inputs_keeps_the_posterior(model_class, data):
    """To a permutation of Z: the same q(f) everywhere; to other inputs: the same q(f) at them.
    Up to the jitter on Kmm, which the posterior at Z carries into the new q(u): measured 6·10⁻⁵."""
    model = _fitted(model_class, data)
    Xnew = np.linspace(-2, 2, 9)[:, None].repeat(2, axis=1)
    mean, var = model.predict_f(Xnew)
    Z = model.inducing_variable.Z.numpy()
    model._move_inducing_inputs(Z[::-1])
    np.testing.assert_allclose(model.predict_f(Xnew)[0], mean, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(model.predict_f(Xnew)[1], var, rtol=1e-3, atol=1e-4)
    Z_new = data[0][1::5].copy()
    at_new = model.predict_f(Z_new, full_cov=True)
    model._move_inducing_inputs(Z_new)
    np.testing.assert_array_equal(model.inducing_variable.Z.numpy(), Z_new)
    moved = model.predict_f(Z_new, full_cov=True)
    np.testing.assert_allclose(moved[0], at_new[0], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(moved[1], at_new[1], rtol=1e-3, atol=1e-4)


def test_greedy_rounds_choose_rows_of_X_weighted_by_the_sites(family_model_class, data):
    X, Y = data
    model = FACTORIES[family_model_class](data, X[:8].copy())
    w = model._site_precisions(data)
    assert w.shape == (50,) and np.all(w > 0)
    trace = fv.fit(model, _call_data(model, data), greedy_rounds=2, max_iter=5)
    Z = model.inducing_variable.Z.numpy()
    assert all(np.any(np.all(X == z, axis=1)) for z in Z)
    assert set(trace.column("round")) == {1.0, 2.0}
    np.testing.assert_array_equal(trace.column("iteration"), np.arange(1, len(trace.rows) + 1))
    assert np.all(np.diff(trace.column("time")) >= 0)
    assert np.isfinite(model.elbo(_call_data(model, data)).numpy())
