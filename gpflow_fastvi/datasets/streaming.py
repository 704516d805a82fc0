"""
A data file as a ``tf.data.Dataset`` of batches, read lazily: for data larger than memory.

:func:`stream_file` reads a CSV or LIBSVM file (gzip, bzip2 or xz compressed too) once to learn
its number of rows, features and the two label values, checking every row as the in-memory
loaders do, and then returns a dataset that parses the file again, batch by batch, every time it
is iterated. Memory is one batch, whatever the size of the file; a closed-form model streams it
once per pass (``fv.fit(model, stream.dataset)``).

This module imports TensorFlow; :mod:`gpflow_fastvi.datasets` imports it on first use only.
"""

import math
import os
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, Set, Tuple

import numpy as np
import tensorflow as tf

from .files import PathLike, check_exists, data_lines
from .loaders import (
    DatasetError,
    _is_number,
    _label_index,
    _line_splitter,
    detect_format,
)

DEFAULT_BATCH_SIZE = 10_000
"""Rows per batch of :func:`stream_file` when none is given."""


class FileStream(NamedTuple):
    """What :func:`stream_file` returns: the dataset and what a model needs to know about it."""

    dataset: tf.data.Dataset
    """Batches ``(X [b, D], Y [b, 1])``, float64, Y in {0, 1} (in {0, ..., C − 1} for C classes);
    parsed from the file on each pass."""
    num_data: int
    """The number of data rows N (for a model's ``num_data``)."""
    num_features: int
    """The number of features D."""
    classes: Tuple[Any, ...]
    """The label values that became 0, 1, ...: in increasing order, unless given."""


Row = Tuple[List[Tuple[int, float]], str]
"""A parsed row: (column, value) pairs of its features and its label token."""


def _dense_parser(
    path: PathLike, label_column: int, delimiter: Optional[str], header: Optional[bool]
) -> Tuple[Callable[[str], List[str]], int, bool]:
    """How to split a line, the label's column index and whether the first data line is a header."""
    source = os.fspath(path)
    first = next((text for _, text in data_lines(path)), None)
    if first is None:
        raise DatasetError(f"{source}: the file holds no data rows")
    split = _line_splitter(first, delimiter)
    label_index = _label_index(source, "the first data line", len(split(first)), label_column)
    if header is None:
        fields = split(first)
        header = not all(_is_number(f) for i, f in enumerate(fields) if i != label_index)
    return split, label_index, header


def _rows(
    path: PathLike,
    file_format: str,
    label_column: int,
    delimiter: Optional[str],
    header: Optional[bool],
) -> Callable[[], Iterator[Tuple[int, Row]]]:
    """A function that yields ``(line number, row)`` for every data row of the file."""
    source = os.fspath(path)
    if file_format == "libsvm":

        def libsvm_rows() -> Iterator[Tuple[int, Row]]:
            for number, text in data_lines(path):
                label, *pairs = text.split("#", 1)[0].split()
                features = []
                for pair in pairs:
                    index, _, value = pair.partition(":")
                    if index == "qid":
                        continue
                    try:
                        features.append((int(index), float(value)))
                    except ValueError:
                        raise DatasetError(
                            f"{source}: line {number} has {pair!r}, not index:value"
                        ) from None
                yield number, (features, label)

        return libsvm_rows

    split, label_index, header = _dense_parser(path, label_column, delimiter, header)

    def dense_rows() -> Iterator[Tuple[int, Row]]:
        lines = data_lines(path)
        if header:
            next(lines)
        width = None
        for number, text in lines:
            fields = split(text)
            if width is None:
                width = len(fields)
            elif len(fields) != width:
                raise DatasetError(f"{source}: line {number} has {len(fields)} fields, not {width}")
            label = fields[label_index]
            features = []
            for column, field in enumerate(fields[:label_index] + fields[label_index + 1 :]):
                try:
                    features.append((column, float(field)))
                except ValueError:
                    raise DatasetError(
                        f"{source}: line {number} has a non-numeric feature value {field!r}"
                    ) from None
            yield number, (features, label)

    return dense_rows


def _label_key(token: str, numeric: bool) -> Any:
    return float(token) if numeric else token


def stream_file(
    path: PathLike,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    file_format: Optional[str] = None,
    label_column: int = 0,
    delimiter: Optional[str] = None,
    header: Optional[bool] = None,
    n_features: Optional[int] = None,
    classes: Optional[Tuple[Any, ...]] = None,
    multiclass: bool = False,
) -> FileStream:
    """
    A CSV or LIBSVM file as a lazily parsed ``tf.data.Dataset`` of batches; see the module
    docstring. The arguments mean what they mean for :func:`~gpflow_fastvi.datasets.load_csv`
    and :func:`~gpflow_fastvi.datasets.load_libsvm`, and the result holds the same rows.

    :param batch_size: rows per batch (the last batch holds the rest).
    :param file_format: ``"csv"`` or ``"libsvm"``; ``None`` detects it
        (:func:`~gpflow_fastvi.datasets.detect_format`).
    :param n_features: LIBSVM only: D, when the file's largest index is smaller.
    :param classes: the label values that become 0, 1, ... (for two classes: negative, positive),
        as read from the file (numbers, or strings when some label is not a number); ``None``
        takes the values in the file in increasing order, the larger of two as positive. Pass the
        training file's for a test file.
    :param multiclass: accept C ≥ 2 classes, which become 0, ..., C − 1 (the labels GPflow's
        ``Softmax`` and this package's multi-class models take).
    :raises DatasetError: if the file is empty or malformed, has a non-finite feature, or does not
        hold exactly two label values (two or more with ``multiclass``), or a label is none of
        ``classes``.
    """
    check_exists(path)
    source = os.fspath(path)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}.")
    file_format = detect_format(path) if file_format is None else file_format
    if file_format not in ("csv", "libsvm"):
        raise ValueError(f"file_format must be 'csv' or 'libsvm'; got {file_format!r}.")
    rows = _rows(path, file_format, label_column, delimiter, header)

    # The scan: every row checked once, nothing kept but counts and the label values.
    num_data, low, high = 0, None, -1
    labels_seen: Set[str] = set()
    for number, (features, label) in rows():
        num_data += 1
        if multiclass or len(labels_seen) <= 2:
            labels_seen.add(label)
        for column, value in features:
            if not math.isfinite(value):
                raise DatasetError(
                    f"{source}: line {number} has the feature value {value}; features must be "
                    "finite numbers (remove or impute missing values first)"
                )
            low = column if low is None else min(low, column)
            high = max(high, column)
    if num_data == 0:
        raise DatasetError(f"{source}: the file holds no data rows")
    offset = 0
    if file_format == "libsvm":
        offset = 0 if low == 0 else 1  # indices are one-based unless a 0 appears
        num_features = high + 1 - offset if n_features is None else n_features
        if num_features < high + 1 - offset:
            raise DatasetError(
                f"{source}: n_features={n_features} but the file has feature {high + 1 - offset}"
            )
    else:
        num_features = high + 1
    if num_features < 1:
        raise DatasetError(f"{source}: the rows hold a label but no features")

    numeric = all(_is_number(t) for t in labels_seen)
    if classes is None:
        if len(labels_seen) < 2 or (len(labels_seen) > 2 and not multiclass):
            found = sorted(labels_seen)[:6]
            raise DatasetError(
                f"{source}: binary classification needs exactly two classes; found "
                f"{len(labels_seen)}{'+' if len(labels_seen) > 2 else ''} label values {found}"
                + ("" if len(labels_seen) < 2 else "; pass multiclass=True for C classes")
            )
        classes = tuple(sorted(_label_key(t, numeric) for t in labels_seen))
    index = {value: k for k, value in enumerate(classes)}
    unknown = {t for t in labels_seen if _label_key(t, numeric) not in index}
    if unknown:
        known = ", ".join(f"{value!r} (-> {k})" for value, k in list(index.items())[:6])
        raise DatasetError(
            f"{source}: the label {sorted(unknown)[0]!r} is none of the classes {known}"
            + (", ..." if len(index) > 6 else "")
        )

    def batches() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        X = np.zeros((batch_size, num_features))
        Y = np.zeros((batch_size, 1))
        filled = 0
        for _, (features, label) in rows():
            X[filled] = 0.0
            for column, value in features:
                X[filled, column - offset] = value
            Y[filled, 0] = index[_label_key(label, numeric)]
            filled += 1
            if filled == batch_size:
                yield X.copy(), Y.copy()
                filled = 0
        if filled:
            yield X[:filled].copy(), Y[:filled].copy()

    signature = (
        tf.TensorSpec([None, num_features], tf.float64),
        tf.TensorSpec([None, 1], tf.float64),
    )
    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(-(-num_data // batch_size)))
    return FileStream(dataset.prefetch(1), num_data, num_features, classes)
