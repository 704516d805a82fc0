"""
Data are checked once, where they enter (``fit``, a GPflow closure), and passed down checked; the
traced graphs take them as inputs, so a graph's size does not grow with the number of points.
"""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.models import passes
from gpflow_fastvi.types import CheckedData


def _data(N: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    Y = (np.sin(2.0 * X[:, :1]) + 0.4 * rng.normal(size=(N, 1)) > 0).astype(float)
    return X, Y


def _model(cls=fv.VIJJ, Z_rows: int = 8):
    Z = np.linspace(-2.0, 2.0, 2 * Z_rows).reshape(Z_rows, 2)
    return cls(gpflow.kernels.SquaredExponential(), None, Z)


@pytest.fixture
def checks(monkeypatch):
    """Counts the NumPy checks of training data and the wrappings of a stream in the checks."""
    counted = {"arrays": 0, "streams": 0}
    check_data, checked_stream = passes.check_data, passes.checked_stream

    def counting_check(*args, **kwargs):
        counted["arrays"] += 1
        return check_data(*args, **kwargs)

    def counting_stream(*args, **kwargs):
        counted["streams"] += 1
        return checked_stream(*args, **kwargs)

    monkeypatch.setattr(passes, "check_data", counting_check)
    monkeypatch.setattr(passes, "checked_stream", counting_stream)
    return counted


@pytest.mark.slow
@pytest.mark.parametrize("cls", [fv.VIJJ, fv.VIConcave], ids=lambda c: c.__name__)
def test_fit_checks_arrays_once(cls, checks):
    fv.fit(_model(cls), _data(120), max_iter=3)
    assert checks == {"arrays": 1, "streams": 0}


@pytest.mark.slow
def test_fit_wraps_a_stream_in_its_checks_once(checks):
    X, Y = _data(120)
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(50)
    model = _model()
    model.num_data = 120
    fv.fit(model, dataset, max_iter=2)
    assert checks == {"arrays": 0, "streams": 1}


def test_a_closure_checks_its_data_once_and_calls_take_checked_data_as_they_are(checks):
    model = _model()
    closure = model.training_loss_closure(_data(120))
    for _ in range(3):
        closure()
    assert checks["arrays"] == 1
    checked = model._passes.training_data(_data(120))
    assert isinstance(checked, CheckedData) and checks["arrays"] == 2
    assert model._passes.training_data(checked) is checked
    model.training_loss(checked)
    assert checks["arrays"] == 2


def test_checked_data_are_the_likelihoods_targets():
    model = _model()
    X, Y = _data(40)
    checked = model._passes.training_data((X, 2.0 * Y - 1.0))  # labels ±1 are taken as {0, 1}
    np.testing.assert_array_equal(checked.Y.numpy(), Y)


def _graph(N: int):
    """The graph of a full-data training-loss closure on N points: its nodes and bytes."""
    closure = _model().training_loss_closure(_data(N))
    graph = closure.get_concrete_function().graph.as_graph_def()
    return len(graph.node), graph.ByteSize()


def test_a_traced_loss_does_not_grow_with_the_data():
    """The data enter the graph as inputs, not as constants: 40 times the points (80 kB of
    inputs more) leave the graph's nodes as they were and its bytes within a few hundred."""
    small, large = _graph(100), _graph(4000)
    assert small[0] == large[0]
    assert abs(large[1] - small[1]) < 1000
