"""
What a ``tf.data`` stream may do wrong, one test per class of fault: a bad value in a later batch,
no batches, no end, another number of rows than ``num_data``; and a callback that returns
something ``fit`` cannot put in a row. Each fault is one package exception in a sentence or two,
without TensorFlow's graph trace, with the model left where ``docs/guarantees.md`` says. The full
suite runs them on every model; the fast tier on one model of each training family
(``family_model_class``) and one case of each fault.
"""

import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv

from .test_contract import FACTORIES

BATCH = 20  # 50 points: batches of 20, 20 and 10


def _stream(X, Y):
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH)


def _values(model):
    return [v.numpy().copy() for v in model.variables]


def _assert_unchanged(model, before):
    for value, was in zip(_values(model), before):
        np.testing.assert_array_equal(value, was)


def _assert_plain(error):
    """One or two lines from the package, nothing of TensorFlow's graph trace behind them."""
    message = str(error)
    assert len(message.splitlines()) <= 2, message
    assert "node" not in message and "[[" not in message, message
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


@pytest.mark.parametrize("fault", ["nan_in_X", pytest.param("label_2", marks=pytest.mark.slow)])
def test_a_bad_value_in_a_later_batch_is_named_and_leaves_the_model_as_before_fit(
    family_model_class, data, fault
):
    X, Y = (a.copy() for a in data)
    row = 2 * BATCH + 3  # in the third batch
    if fault == "nan_in_X":
        X[row, 0] = np.nan
    else:
        Y[row, 0] = 2.0
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    before = _values(model)
    # PolyaGammaSVGP takes a step on each of the first two batches before it reads the third.
    with pytest.raises(fv.InvalidDataError) as raised:
        fv.fit(model, _stream(X, Y), max_iter=3)
    what = "has NaN or inf in X" if fault == "nan_in_X" else "has labels outside {0, 1}"
    assert f"Batch 3 of the dataset {what}" in str(raised.value)
    assert "left as it was before fit" in str(raised.value)
    _assert_plain(raised.value)
    _assert_unchanged(model, before)


@pytest.mark.parametrize("length", [pytest.param("known", marks=pytest.mark.slow), "unknown"])
def test_a_dataset_without_batches_is_refused(family_model_class, data, length):
    stream = _stream(*data)
    # take(0) says it holds nothing; a filter hides its length until the stream is read.
    stream = stream.take(0) if length == "known" else stream.filter(lambda X, Y: False)
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    before = _values(model)
    with pytest.raises(fv.InvalidDataError, match="yielded no batches") as raised:
        fv.fit(model, stream, max_iter=2)
    _assert_plain(raised.value)
    _assert_unchanged(model, before)


@pytest.mark.parametrize("length", ["infinite", "unknown"])
def test_an_endless_dataset_is_refused_or_trained_for_the_time_budget(
    family_model_class, data, length
):
    stream = _stream(*data).repeat()
    if length == "unknown":
        stream = stream.filter(lambda X, Y: True)  # TensorFlow no longer knows it is endless
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    if family_model_class is fv.PolyaGammaSVGP:  # mini-batches from the stream, for the budget
        trace = fv.fit(model, stream, time_budget=1.0)
        assert trace.stop_reason == "time_budget"
        assert np.all(np.isfinite(model.q_mu.numpy()))
        return
    before = _values(model)
    # Known to be endless: refused before training. Not known: each pass stops one batch after
    # num_data rows, and the count says the stream does not match the model.
    expected = "repeats without end" if length == "infinite" else "yielded 70 rows in a pass"
    with pytest.raises(fv.InvalidDataError, match=expected) as raised:
        fv.fit(model, stream, time_budget=1.0)
    _assert_plain(raised.value)
    _assert_unchanged(model, before)


@pytest.mark.parametrize("max_iter", [3, 1])
def test_num_data_other_than_the_rows_of_a_stream_is_refused(family_model_class, data, max_iter):
    """Counted in the first pass, and refused before its last batch is used: a run of one pass
    (PolyaGammaSVGP's first iteration) is refused too."""
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    model.num_data = len(data[0]) + 10  # as if built with num_data=60 for a stream of 50
    before = _values(model)
    with pytest.raises(fv.InvalidDataError, match="yielded 50 rows in a pass") as raised:
        fv.fit(model, _stream(*data), max_iter=max_iter)
    assert "num_data is 60" in str(raised.value)
    _assert_plain(raised.value)
    _assert_unchanged(model, before)


def test_rows_known_without_reading_the_stream_are_checked_before_it_is_read(
    family_model_class, data
):
    """Batches of one size (``drop_remainder=True``) tell their rows: a mismatch is refused before
    the first batch is read, here before its NaN is found."""
    X = data[0].copy()
    X[0, 0] = np.nan
    stream = tf.data.Dataset.from_tensor_slices((X, data[1])).batch(10, drop_remainder=True)
    model = FACTORIES[family_model_class](data, data[0][::5].copy())
    model.num_data = len(X) + 10
    with pytest.raises(fv.InvalidDataError, match="yields 50 rows in a pass") as raised:
        fv.fit(model, stream, max_iter=3)
    assert "num_data is 60" in str(raised.value)
    _assert_plain(raised.value)


def test_a_callback_that_returns_no_mapping_is_refused_after_the_iteration(
    family_model_class, data
):
    Z = data[0][::5].copy()
    model, reference = FACTORIES[family_model_class](data, Z), FACTORIES[family_model_class](
        data, Z
    )
    with pytest.raises(fv.InvalidCallbackError, match="returned float 0.5") as raised:
        fv.fit(model, data, max_iter=3, callback=lambda m: 0.5)
    assert "after iteration 1" in str(raised.value)
    _assert_plain(raised.value)
    fv.fit(reference, data, max_iter=1)  # the model stays at the iteration the callback followed
    for value, expected in zip(_values(model), _values(reference)):
        np.testing.assert_allclose(value, expected, rtol=1e-9, atol=1e-12)
