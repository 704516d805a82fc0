"""
The checks of a ``tf.data`` stream, the data boundary for batches that NumPy never sees: its
element structure when it is handed over (:func:`checked_dataset`), and every batch's values as
it streams (:func:`checked_stream`), by in-graph checks whose sentence
:func:`gpflow_fastvi.fit` raises as an :class:`~gpflow_fastvi.exceptions.InvalidDataError`
(:func:`in_graph_check`). :mod:`gpflow_fastvi.validation` checks arrays.
"""

import weakref
from typing import Any, Optional, Tuple

import gpflow
import tensorflow as tf

from .exceptions import FAULT_MARK, InvalidDataError


def checked_dataset(dataset: tf.data.Dataset, columns: int = 1) -> tf.data.Dataset:
    """
    ``dataset`` if it yields pairs ``(X [b, D], Y [b, P])`` of GPflow's default float, batches
    of rows, with P = ``columns``; otherwise an :class:`InvalidDataError` that says what it
    yields instead. The values are checked as they stream, by :func:`checked_stream`.
    """
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise InvalidDataError(f"The dataset must yield pairs (X, Y); it yields {spec}.")
    dtype = gpflow.config.default_float()
    for name, part, expected in (("X", spec[0], None), ("Y", spec[1], columns)):
        if not isinstance(part, tf.TensorSpec) or part.shape.rank != 2:
            raise InvalidDataError(
                f"The dataset must yield batches: {name} of rank 2 ([b, ...]); got {part}. "
                "Batch it first, e.g. dataset.batch(10_000)."
            )
        if part.dtype != dtype:
            raise InvalidDataError(
                f"The dataset's {name} must have dtype {dtype.__name__}; got {part.dtype.name}. "
                f"Cast it first, e.g. dataset.map(lambda X, Y: (tf.cast(X, tf.float64), ...))."
            )
        if expected is not None and part.shape[1] not in (None, expected):
            raise InvalidDataError(
                f"The dataset's Y must have shape [b, {expected}]; got {part.shape}."
            )
    return dataset


LabelSets = Tuple[Tuple[float, ...], ...]
"""The label encodings a stream's targets may use, each a tuple of values: a batch is valid if
all its labels lie in one of them. Empty: no label check (targets that are not labels)."""

ZERO_ONE: LabelSets = ((0.0, 1.0),)
"""GPflow's Bernoulli convention."""

ZERO_ONE_OR_SIGNS: LabelSets = ((0.0, 1.0), (-1.0, 1.0))
"""Either binary encoding, as :func:`~gpflow_fastvi.validation.checked_signed_labels` takes them."""

NO_BATCHES = "The dataset yielded no batches: a pass needs at least one."
"""What a pass over a stream with no batches says."""


def in_graph_check(condition: tf.Tensor, *sentence: Any) -> tf.Operation:
    """
    A check of values that only a compiled function sees (the later batches of a stream): if
    ``condition`` is false it fails with ``sentence``, whose parts (strings, and numbers as
    tensors in between) are marked (:data:`~gpflow_fastvi.exceptions.FAULT_MARK`) for
    :func:`gpflow_fastvi.fit` to raise as an :class:`~gpflow_fastvi.exceptions.InvalidDataError`
    without TensorFlow's graph trace (:func:`~gpflow_fastvi.exceptions.graph_fault`). The
    numbers are not formatted into a string where the check passes, where it would cost time on
    every batch (:ref:`defaults-stream-checks`).
    TensorFlow prints a quote in a string part escaped: leave quotes out of the sentence.
    """
    first, *middle, last = sentence
    return tf.debugging.Assert(condition, [FAULT_MARK + first, *middle, last + FAULT_MARK])


def _describe(labels: LabelSets) -> str:
    sets = [("{" + ", ".join(f"{v:g}" for v in values) + "}") for values in labels]
    return " or ".join(sets)


_CHECKED_STREAMS: "weakref.WeakSet[tf.data.Dataset]" = weakref.WeakSet()
"""The streams :func:`checked_stream` returned, so that checking one again returns it as it is."""


def checked_stream(
    dataset: tf.data.Dataset,
    labels: LabelSets = (),
    num_data: Optional[int] = None,
    columns: int = 1,
) -> tf.data.Dataset:
    """
    ``dataset`` (batches ``(X [b, D], Y [b, P])``, P = ``columns``, its structure checked by
    :func:`checked_dataset`) with the checks that NumPy makes on arrays made on every batch as it
    streams, each failing with a sentence that names the batch (:func:`in_graph_check`): X and Y
    finite, the labels in one of the encodings ``labels``. With ``num_data``, a stream whose rows
    TensorFlow knows without reading it is refused here if they are not ``num_data``
    (:func:`check_rows_per_pass`), and one of unknown length is cut one batch after
    ``num_data`` rows, so that an endless one cannot hold a pass forever
    (:meth:`~gpflow_fastvi.models.passes.DataPasses.sum_over_data` then finds more rows than
    ``num_data`` and says so). The checks cost a pass over each batch's values, next to a
    kernel matrix of b × M.
    """

    def check(number: tf.Tensor, batch: Tuple[tf.Tensor, tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        X, Y = batch
        batch_number = number + 1
        checks = [
            in_graph_check(
                tf.reduce_all(tf.math.is_finite(values)),
                "Batch",
                batch_number,
                f"of the dataset has NaN or inf in {name}.",
            )
            for name, values in (("X", X), ("Y", Y))
        ]
        if labels:
            valid = [
                tf.reduce_all(tf.reduce_any(Y[..., None] == tf.constant(values, Y.dtype), -1))
                for values in labels
            ]
            checks.append(
                in_graph_check(
                    tf.reduce_any(tf.stack(valid)),
                    "Batch",
                    batch_number,
                    f"of the dataset has labels outside {_describe(labels)}"
                    + (
                        " (map labels y in {-1, +1} to (y + 1) / 2)." if labels == ZERO_ONE else "."
                    ),
                )
            )
        with tf.control_dependencies(checks):
            return tf.identity(X), tf.identity(Y)

    if dataset in _CHECKED_STREAMS:  # already checked: a pass inside a compiled function
        return dataset
    dataset = checked_dataset(dataset, columns)
    check_rows_per_pass(dataset, num_data)
    if num_data is not None and static_cardinality(dataset) is None:
        bound = tf.constant(int(num_data), tf.int64)
        dataset = (
            dataset.scan(
                tf.constant(0, tf.int64),
                lambda rows, batch: (
                    rows + tf.shape(batch[0], out_type=tf.int64)[0],
                    (rows, batch),
                ),
            )
            .take_while(lambda rows_before, batch: rows_before <= bound)
            .map(lambda rows_before, batch: batch)
        )
    checked = dataset.enumerate().map(check)
    _CHECKED_STREAMS.add(checked)
    return checked


def rows_per_pass(dataset: tf.data.Dataset) -> Optional[int]:
    """
    The rows a pass over ``dataset`` yields where TensorFlow knows them without reading it: a
    finite number of single points, or of batches of one fixed size (``drop_remainder=True``);
    ``None`` otherwise (a last batch of fewer rows, a filter, a generator, no end).
    """
    batches = static_cardinality(dataset)
    spec = dataset.element_spec
    if batches is None or batches < 0 or not isinstance(spec, (tuple, list)) or not spec:
        return None
    shape = getattr(spec[0], "shape", None)
    if shape is None or shape.rank is None or shape.rank == 0:
        return None
    if shape.rank == 1:  # single points
        return batches
    size = shape[0]
    return None if size is None else batches * int(size)


def row_count_mismatch(rows: int, num_data: int, known: str = "yielded") -> str:
    """What a stream whose pass yields ``rows`` rows says to a model built for ``num_data``."""
    return (
        f"The dataset {known} {rows} rows in a pass, where num_data is {num_data} (build the "
        "model with the number of rows the dataset yields: num_data scales every mini-batch's "
        "ELBO)."
    )


def check_rows_per_pass(dataset: tf.data.Dataset, num_data: Optional[int]) -> None:
    """
    An :class:`InvalidDataError` before anything is read, where the rows of a pass are known
    (:func:`rows_per_pass`) and are not ``num_data``; nothing otherwise, the rows being counted
    as they stream.
    """
    rows = rows_per_pass(dataset)
    if num_data is not None and rows is not None and rows != int(num_data):
        raise InvalidDataError(row_count_mismatch(rows, int(num_data), "yields"))


def static_cardinality(dataset: tf.data.Dataset) -> Optional[int]:
    """
    The number of batches ``dataset`` yields, ``tf.data.INFINITE_CARDINALITY`` (−1) if it
    repeats without end, or ``None`` where that is not known before it is read (a filter, a
    generator) or not known here (inside a compiled function).
    """
    cardinality = tf.get_static_value(dataset.cardinality())
    if cardinality is None or cardinality == tf.data.UNKNOWN_CARDINALITY:
        return None
    return int(cardinality)
