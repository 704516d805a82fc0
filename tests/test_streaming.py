"""
Data per call and data larger than memory: a closed-form model streams a ``tf.data.Dataset`` once
per pass, reaching what it reaches with the same data in memory, in memory that does not grow
with the number of points.
"""

import json
import subprocess
import sys
import textwrap

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv

from .conftest import make_binary_data

MODELS = {
    "VIJJ": lambda Z, N: fv.VIJJ(gpflow.kernels.SquaredExponential(), None, Z, num_data=N),
    "VITaylor": lambda Z, N: fv.VITaylor(gpflow.kernels.SquaredExponential(), None, Z, num_data=N),
    "KLCorrected": lambda Z, N: fv.KLCorrected(
        gpflow.kernels.SquaredExponential(), None, Z, num_data=N
    ),
}


@pytest.fixture
def data(rng):
    return make_binary_data(rng, N=230)


def _dataset(data, batch=64):
    return tf.data.Dataset.from_tensor_slices(data).batch(batch)  # a last batch of 38 rows


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.slow
def test_a_streamed_evaluation_equals_the_in_memory_one(data, name):
    X, Y = data
    model = MODELS[name](X[::10].copy(), len(X))
    model.update_sites(2, data=data)
    results = []
    for call_data in (data, _dataset(data)):
        with tf.GradientTape() as tape:
            stepped = model._stepped_sites(2, call_data)
        gradient = tape.gradient(stepped.objective, model.trainable_variables)
        results.append((stepped.objective, stepped.q_mu, gradient, model.elbo(call_data)))
    (o1, q1, g1, e1), (o2, q2, g2, e2) = results
    np.testing.assert_allclose(o2, o1, rtol=1e-10)
    np.testing.assert_allclose(q2, q1, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(e2, e1, rtol=1e-10)
    for a, b in zip(g2, g1):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_fit_streams_a_dataset_to_the_in_memory_result(data):
    X, Y = data
    in_memory, streamed = (MODELS["VIJJ"](X[::10].copy(), len(X)) for _ in range(2))
    a = fv.fit(in_memory, data, max_iter=6, tol=0.0).column("objective")
    b = fv.fit(streamed, _dataset(data), max_iter=6, tol=0.0).column("objective")
    np.testing.assert_allclose(b, a, rtol=1e-8)
    # GPflow's closure takes the dataset as all the data, streamed at every call (each call
    # steps q(u), so the two closures run on copies of the same state).
    twin = gpflow.utilities.deepcopy(streamed)
    np.testing.assert_allclose(
        streamed.training_loss_closure(_dataset(data))(),
        twin.training_loss_closure(data)(),
        rtol=1e-10,
    )


def test_datasets_that_cannot_be_streamed_get_clear_errors(data):
    X, Y = data
    model = MODELS["VIJJ"](X[::10].copy(), len(X))
    unbatched = tf.data.Dataset.from_tensor_slices(data)
    with pytest.raises(fv.InvalidDataError, match="must yield batches"):
        fv.fit(model, unbatched)
    with pytest.raises(fv.InvalidDataError, match="dtype float64"):
        fv.fit(model, _dataset((X.astype(np.float32), Y)))
    with pytest.raises(ValueError, match="needs the data as arrays"):
        fv.fit(model, _dataset(data), method="analytic")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels outside \{0, 1\}"):
        model.update_sites(1, data=_dataset((X, 2 * Y - 1)))


PEAK_MEMORY_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import gpflow, numpy as np, tensorflow as tf
    import gpflow_fastvi as fv

    N, batch = int(sys.argv[1]), 20_000
    def points(index):  # deterministic features from the row index: nothing held in memory
        i = tf.cast(index, tf.float64)[:, None]
        X = tf.concat([tf.sin(0.37 * i), tf.cos(1.13 * i)], axis=1)
        return X, tf.cast(X[:, :1] * X[:, 1:] > 0.0, tf.float64)
    dataset = tf.data.Dataset.range(N).batch(batch).map(points)
    Z = np.stack([np.sin(0.37 * np.arange(30)), np.cos(1.13 * np.arange(30))], axis=1)
    model = fv.VIJJ(gpflow.kernels.SquaredExponential(), None, Z, num_data=N)

    @tf.function(autograph=False)
    def evaluation():
        with tf.GradientTape() as tape:
            stepped = model._stepped_sites(2, dataset)
        return stepped.objective, tape.gradient(stepped.objective, model.trainable_variables)

    objective, _ = evaluation()
    print(json.dumps({"rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "objective": float(objective)}))
    """)


def _peak(N):
    result = subprocess.run(
        [sys.executable, "-c", PEAK_MEMORY_SCRIPT, str(N)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_peak_memory_stays_flat_when_the_streamed_data_grow_tenfold():
    """
    2·10⁵ and then 2·10⁶ points of a lazily generated dataset, one evaluation (two passes and the
    gradient's stream) at m = 30. In memory, the second would hold X (32 MB) and A = L⁻¹Kmn
    (480 MB); streamed, the peak is the same to within a few batches' worth.
    """
    small, large = _peak(200_000), _peak(2_000_000)
    assert np.isfinite(small["objective"]) and np.isfinite(large["objective"])
    growth_mib = (large["rss_kib"] - small["rss_kib"]) / 1024
    assert growth_mib < 60, f"peak memory grew by {growth_mib:.0f} MiB"
