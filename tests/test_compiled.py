"""
Training graphs traced once per signature (:mod:`gpflow_fastvi.training.compiled`): a second model
of the same shapes traces nothing and trains exactly as it would alone; a model that differs in
anything a graph bakes in traces its own; a graph that captured a caller's state is not shared.
"""

import gc
import weakref

import gpflow
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import gpflow_fastvi as fv
from gpflow_fastvi.sklearn import GPClassifier
from gpflow_fastvi.training import compiled
from gpflow_fastvi.training.compiled import CompiledStep

N, D, M = 150, 2, 12


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    Y = (np.sin(2.0 * X[:, :1]) + 0.4 * rng.normal(size=(N, 1)) > 0).astype(float)
    return X, Y


def _model(cls, seed: int, *, prior: float = 2.0):
    X, _ = _data()
    Z = X[np.random.default_rng(seed).choice(N, M, replace=False)].copy()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=np.full(D, 0.5 + 0.1 * seed))
    kernel.variance.prior = tfp.distributions.Gamma(np.float64(prior), np.float64(1.0))
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    return cls(kernel, likelihood, Z)


def _trained(cls, seed: int, **options):
    model = _model(cls, seed, **options)
    trace = fv.fit(model, _data(), max_iter=30)
    return trace.column("objective"), model.predict_y(_data(1)[0])[0].numpy()


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(fv.VIJJ, marks=pytest.mark.slow),
        pytest.param(fv.VITaylor, marks=pytest.mark.slow),
        fv.VIConcave,
        pytest.param(fv.KLCorrected, marks=pytest.mark.slow),
        pytest.param(fv.PolyaGammaSVGP, marks=pytest.mark.slow),
    ],
)
def test_a_second_model_of_the_same_shapes_traces_nothing_and_trains_as_alone(cls):
    _trained(cls, seed=0)
    before = compiled.trace_count()
    objectives, p = _trained(cls, seed=1)
    assert compiled.trace_count() == before
    with compiled.unshared():
        alone_objectives, alone_p = _trained(cls, seed=1)
    assert compiled.trace_count() > before  # alone, it traced graphs of its own
    np.testing.assert_allclose(objectives, alone_objectives, rtol=1e-12)
    np.testing.assert_allclose(p, alone_p, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("change", ["prior", "jitter"])
def test_a_model_that_differs_in_a_baked_constant_traces_its_own(change):
    cls = fv.VIConcave
    _trained(cls, seed=0)
    before = compiled.trace_count()
    options = {"prior": 5.0} if change == "prior" else {}
    jitter = 1e-5 if change == "jitter" else gpflow.config.default_jitter()
    with gpflow.config.as_context(gpflow.config.Config(jitter=jitter)):
        objectives, p = _trained(cls, seed=1, **options)
        assert compiled.trace_count() > before
        with compiled.unshared():
            alone_objectives, alone_p = _trained(cls, seed=1, **options)
    np.testing.assert_allclose(objectives, alone_objectives, rtol=1e-12)
    np.testing.assert_allclose(p, alone_p, rtol=1e-12, atol=1e-14)


def test_a_step_whose_graph_captured_a_variable_of_its_caller_is_not_shared():
    def step(hidden: tf.Variable) -> CompiledStep:
        scale = tf.Variable(2.0, dtype=tf.float64)
        # ``hidden`` is read but not among the roots: the graph captures it.
        return CompiledStep("test.hidden", lambda x: scale * x + hidden, roots=(scale,))

    first, second = step(tf.Variable(1.0, dtype=tf.float64)), step(
        tf.Variable(10.0, dtype=tf.float64)
    )
    assert float(first(tf.constant(1.0, tf.float64))) == 3.0
    assert not second.shared
    assert float(second(tf.constant(1.0, tf.float64))) == 12.0


def test_a_step_over_its_roots_alone_is_shared_and_reads_its_own_roots():
    def step(value: float) -> CompiledStep:
        scale = tf.Variable(value, dtype=tf.float64)
        return CompiledStep("test.roots", lambda x: scale * x, roots=(scale,))

    first, second = step(2.0), step(5.0)
    assert float(first(tf.constant(3.0, tf.float64))) == 6.0
    before = compiled.trace_count()
    assert second.shared
    assert float(second(tf.constant(3.0, tf.float64))) == 15.0
    assert compiled.trace_count() == before


@pytest.mark.parametrize("rows_unknown", [False, True])
def test_repeated_calls_of_shared_graphs_read_each_callers_roots_and_inputs(rows_unknown):
    """After its first call a graph is called directly (no lookup through the tf.function):
    callers alternating, inputs of new shapes (and ``None`` among them, where the rows are
    known) all get their own answer, and a known shape traces nothing."""
    extra = () if rows_unknown else (None,)

    def step(value: float) -> CompiledStep:
        scale = tf.Variable(value, dtype=tf.float64)
        return CompiledStep(
            "test.direct",
            lambda x, *nothing: scale * tf.reduce_sum(x),
            roots=(scale,),
            rows_unknown=rows_unknown,
        )

    first, second = step(2.0), step(5.0)
    rows = [np.ones((3, 2)), np.ones((3, 2)), np.ones((4, 2)), np.ones((3, 2)), np.ones((4, 2))]
    for x in map(tf.constant, rows):
        assert float(first(x, *extra)) == 2.0 * x.shape[0] * 2
        assert float(second(x, *extra)) == 5.0 * x.shape[0] * 2
    before = compiled.trace_count()
    for x in map(tf.constant, rows):
        assert float(second(x, *extra)) == 5.0 * x.shape[0] * 2
    assert compiled.trace_count() == before
    assert float(second(tf.constant(np.ones((2, 3))), *extra)) == 30.0


def test_a_strategys_variables_are_another_signature_than_plain_ones():
    """A graph is called directly on the variables of a signature: one traced on plain variables
    must not be called on a strategy's, whose reads and assignments go through the strategy."""
    plain = tf.Variable(np.ones(3))
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = tf.Variable(np.ones(3))
    assert type(mirrored) is not type(plain)
    assert compiled.walk([plain]).digest == compiled.walk([tf.Variable(np.zeros(3))]).digest
    assert compiled.walk([plain]).digest != compiled.walk([mirrored]).digest


def test_steps_of_many_signatures_trace_without_tensorflows_retracing_warning(caplog):
    """Each signature traces once, so a process that trains models of many signatures (a grid
    over the number of inducing inputs, say) gets no warning of "excessive" retracing."""
    before = compiled.trace_count()
    for size in range(1, 9):  # 8 signatures: variables of 8 shapes
        scale = tf.Variable(np.ones(size))
        step = CompiledStep("test.signatures", lambda x, s=scale: tf.reduce_sum(s * x), (scale,))
        assert float(step(tf.constant(2.0, tf.float64))) == 2.0 * size
    assert compiled.trace_count() == before + 8
    assert "retracing" not in caplog.text  # TensorFlow's logger propagates to the root logger


def test_a_large_tensor_a_graph_captured_is_not_shared():
    def step(offset: float) -> CompiledStep:
        held = tf.fill([compiled.SMALL + 1], tf.constant(offset, tf.float64))  # data held
        scale = tf.Variable(1.0, dtype=tf.float64)
        root = {"scale": scale, "held": held}
        return CompiledStep("test.large", lambda: scale * tf.reduce_sum(held), roots=(root,))

    first, second = step(1.0), step(2.0)
    assert float(first()) == compiled.SMALL + 1
    assert not second.shared
    assert float(second()) == 2.0 * (compiled.SMALL + 1)


def test_a_second_gpclassifier_fit_on_data_of_the_same_shapes_traces_nothing():
    X, Y = _data()
    first = GPClassifier(n_inducing=M, random_state=0).fit(X, Y.ravel())
    first.predict_proba(X[:7])
    before = compiled.trace_count()
    X2, Y2 = _data(seed=3)
    classifier = GPClassifier(n_inducing=M, random_state=1).fit(X2, Y2.ravel())
    p = classifier.predict_proba(X[:40])  # the prediction's graph, too, for any rows
    assert compiled.trace_count() == before
    assert classifier.score(X, Y.ravel()) > 0.8
    Xs = (X[:40] - classifier.x_mean_) / classifier.x_scale_
    np.testing.assert_allclose(p[:, 1], classifier.model_.predict_y(Xs)[0].numpy()[:, 0])


@pytest.mark.slow
def test_gpclassifier_fits_of_other_numbers_of_rows_share_one_graph_and_train_as_alone():
    # The folds of a cross-validation differ by a point, and the refit has them all: the first
    # number of rows is traced as given, the second for any number, and later ones trace nothing.
    X, Y = _data()
    for n in (120, 121):
        GPClassifier(n_inducing=M, random_state=0).fit(X[:n], Y[:n].ravel())
    before = compiled.trace_count()
    fitted = [
        GPClassifier(n_inducing=M, random_state=1).fit(X[:n], Y[:n].ravel()) for n in (137, N)
    ]
    assert compiled.trace_count() == before
    with compiled.unshared():
        alone = GPClassifier(n_inducing=M, random_state=1).fit(X, Y.ravel())
    assert alone.n_iter_ == fitted[-1].n_iter_
    np.testing.assert_allclose(fitted[-1].predict_proba(X), alone.predict_proba(X), atol=1e-9)


def test_a_gpclassifiers_compiled_prediction_does_not_keep_its_model():
    X, Y = _data()
    classifier = GPClassifier(n_inducing=M, random_state=0, max_iter=2).fit(X, Y.ravel())
    classifier.predict_proba(X[:5])
    model = weakref.ref(classifier.model_)
    del classifier
    gc.collect()
    assert model() is None
