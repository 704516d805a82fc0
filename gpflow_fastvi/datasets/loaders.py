"""
Readers for classification data files: dense text (CSV and friends) and LIBSVM.

Every loader returns ``(X, Y)`` with ``X`` of shape [N, D] and ``Y`` of shape [N, 1], both
float64, and ``Y`` in {0, 1}: GPflow's :class:`~gpflow.likelihoods.Bernoulli` convention. Any two
distinct label values are accepted (±1, 0/1, 1/2, ``g``/``h``, ...); the larger one becomes 1. Label
values are compared as numbers when every label is a number, as strings otherwise. With
``multiclass=True`` a file may hold C ≥ 2 classes, which become 0, ..., C − 1 in increasing order of
their values: the integer classes GPflow's ``Softmax`` and ``MultiClass`` expect.

Files may be compressed with gzip, bzip2 or xz; the compression is recognised from the file's
first bytes, not from its name.

Problems with a file (a third class where two are expected, non-finite features, ragged rows, no data) raise
:class:`DatasetError`, a :class:`ValueError` whose message starts with the file name.
"""

import csv
import os
import re
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from .files import DatasetError, PathLike, base_suffix, check_exists, data_lines, open_binary
from .labels import RawLabels, class_labels, labels_from_strings

BENCH_INSTALL_HINT = 'pip install "gpflow-fastvi[bench]"'

# One LIBSVM line: a label, then zero or more "index:value" pairs, then an optional comment.
_LIBSVM_LINE = re.compile(r"^\s*\S+(\s+(qid:\S+|\d+:\S+))*\s*(#.*)?$")
_LIBSVM_PAIR = re.compile(r"\s\d+:\S")
_SNIFF_LINES = 20


def _check_features(X: np.ndarray, source: str) -> None:
    if X.shape[0] == 0:
        raise DatasetError(f"{source}: the file holds no data rows")
    if X.shape[1] == 0:
        raise DatasetError(f"{source}: the rows hold a label but no features")
    finite = np.isfinite(X)
    if not np.all(finite):
        row, column = (int(i) for i in np.argwhere(~finite)[0])
        raise DatasetError(
            f"{source}: feature {column} of data row {row + 1} is {X[row, column]}; "
            "features must be finite numbers (remove or impute missing values first)"
        )


# --------------------------------------------------------------------------------------------------
# Dense text (CSV, TSV, whitespace-separated)
# --------------------------------------------------------------------------------------------------


def _split_rows(path: PathLike, delimiter: Optional[str]) -> Tuple[List[List[str]], List[int]]:
    """Split the data lines of ``path`` into fields; also return each row's line number."""
    lines = list(data_lines(path))
    if not lines:
        return [], []
    numbers = [number for number, _ in lines]
    split = _line_splitter(lines[0][1], delimiter)
    return [split(text) for _, text in lines], numbers


def _line_splitter(first: str, delimiter: Optional[str]) -> Callable[[str], List[str]]:
    """
    How to split a data line into fields: at ``delimiter``, or, when it is None, at what the
    first data line suggests: ``,`` if it has a comma, else ``;`` if it has a semicolon, else any
    run of whitespace. Fields are stripped; quoted fields are read as CSV does.
    """
    if delimiter is None:
        delimiter = "," if "," in first else (";" if ";" in first else None)
    if delimiter is None or delimiter.isspace():
        return lambda text: text.split(delimiter)
    return lambda text: [field.strip() for field in next(csv.reader([text], delimiter=delimiter))]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _label_index(source: str, line: str, width: int, label_column: int) -> int:
    """The label's column in rows of ``width`` fields, or an error naming ``line`` of ``source``."""
    if width < 2:
        raise DatasetError(
            f"{source}: {line} has a single field; expected a label and at least one "
            "feature (is the delimiter right?)"
        )
    if not -width <= label_column < width:
        raise DatasetError(
            f"{source}: label column {label_column} is out of range for rows of {width} fields"
        )
    return label_column % width


def _read_dense(
    path: PathLike, label_column: int, delimiter: Optional[str], header: Optional[bool]
) -> Tuple[np.ndarray, RawLabels]:
    source = os.fspath(path)
    rows, numbers = _split_rows(path, delimiter)
    if not rows:
        raise DatasetError(f"{source}: the file holds no data rows")
    width = len(rows[0])
    label_index = _label_index(source, f"line {numbers[0]}", width, label_column)
    for row, number in zip(rows, numbers):
        if len(row) != width:
            raise DatasetError(
                f"{source}: line {number} has {len(row)} fields but line {numbers[0]} has {width}"
            )
    if header is None:
        header = not all(_is_number(f) for i, f in enumerate(rows[0]) if i != label_index)
    if header:
        rows, numbers = rows[1:], numbers[1:]
        if not rows:
            raise DatasetError(f"{source}: the file holds a header but no data rows")

    labels = labels_from_strings([row[label_index] for row in rows])
    feature_fields = [row[:label_index] + row[label_index + 1 :] for row in rows]
    try:
        X = np.asarray(feature_fields, dtype=np.float64)
    except ValueError:
        for row, number in zip(feature_fields, numbers):
            for field in row:
                if not _is_number(field):
                    raise DatasetError(
                        f"{source}: line {number} has a non-numeric feature value {field!r}"
                    ) from None
        raise
    _check_features(X, source)
    return X, labels


def load_csv(
    path: PathLike,
    label_column: int = 0,
    *,
    delimiter: Optional[str] = None,
    header: Optional[bool] = None,
    multiclass: bool = False,
) -> Tuple[np.ndarray, np.ndarray]:
    """
    Load a dense delimited text file: one row per data point, the label in one column, every other
    column a numeric feature.

    Blank lines and lines starting with ``#`` are skipped. Labels may be any two distinct values;
    the larger one (numerically, or as a string when some label is not a number) is mapped to 1,
    the smaller to 0. With ``multiclass`` any number of classes C ≥ 2 is accepted, mapped to
    0, ..., C − 1 in the same increasing order.

    :param path: the file; may be gzip, bzip2 or xz compressed.
    :param label_column: index of the label column; negative values count from the end (``-1`` is
        the last column).
    :param delimiter: field separator. None guesses from the first data line: ``,`` if it has a
        comma, else ``;`` if it has a semicolon, else any run of whitespace.
    :param header: whether the first data line is a header of column names. None guesses: it is a
        header when any of its feature fields is not a number. Pass True for an all-numeric header.
    :param multiclass: accept more than two classes.
    :return: ``X`` [N, D] and ``Y`` [N, 1] in {0, 1} (in {0, ..., C − 1} with ``multiclass``),
        both float64.
    :raises FileNotFoundError: if ``path`` does not exist.
    :raises DatasetError: if the file is empty or ragged, has a non-numeric or non-finite feature,
        or does not hold exactly two label values (two or more with ``multiclass``).
    """
    X, raw = _read_dense(path, label_column, delimiter, header)
    Y, _ = class_labels(raw, os.fspath(path), multiclass=multiclass)
    return X, Y


# --------------------------------------------------------------------------------------------------
# LIBSVM / SVMlight
# --------------------------------------------------------------------------------------------------


def _import_svmlight() -> tuple:
    try:
        from sklearn.datasets import load_svmlight_file, load_svmlight_files
    except ImportError as error:
        raise ImportError(
            "Reading LIBSVM files needs scikit-learn, which comes with the [bench] extra: "
            f"{BENCH_INSTALL_HINT}"
        ) from error
    return load_svmlight_file, load_svmlight_files


def _read_libsvm_many(
    paths: Sequence[PathLike], n_features: Optional[int]
) -> List[Tuple[np.ndarray, RawLabels]]:
    """Read LIBSVM files with a shared feature count and a shared index base (0 or 1)."""
    _, load_svmlight_files = _import_svmlight()
    sources = [os.fspath(p) for p in paths]
    for path in paths:
        check_exists(path)
        if not any(True for _ in data_lines(path)):
            raise DatasetError(f"{os.fspath(path)}: the file holds no data rows")
    files = [open_binary(p) for p in paths]
    try:
        arrays = load_svmlight_files(files, n_features=n_features, dtype=np.float64)
    except ValueError as error:
        raise DatasetError(f"{', '.join(sources)}: not a valid LIBSVM file: {error}") from error
    finally:
        for f in files:
            f.close()
    result = []
    for source, X_sparse, labels in zip(sources, arrays[0::2], arrays[1::2]):
        X = np.asarray(X_sparse.toarray(), dtype=np.float64)
        _check_features(X, source)
        result.append((X, np.asarray(labels, dtype=np.float64)))
    return result


def load_libsvm(
    path: PathLike, n_features: Optional[int] = None, *, multiclass: bool = False
) -> Tuple[np.ndarray, np.ndarray]:
    """
    Load a LIBSVM (SVMlight) file, ``label index:value index:value ...`` per line, as dense arrays.

    Reading uses scikit-learn's :func:`~sklearn.datasets.load_svmlight_file` (the ``[bench]``
    extra). Indices may be zero- or one-based (detected). The larger of the two label values is
    mapped to 1, the smaller to 0; with ``multiclass``, C ≥ 2 label values are mapped to
    0, ..., C − 1 in increasing order.

    :param path: the file; may be gzip, bzip2 or xz compressed.
    :param n_features: the number of features D. None takes the largest index in the file, which
        can be too small for a test file whose last features happen to be all zero; pass the
        training set's D then (or use :func:`load_train_test`).
    :param multiclass: accept more than two classes.
    :return: ``X`` [N, D] and ``Y`` [N, 1] in {0, 1} (in {0, ..., C − 1} with ``multiclass``),
        both float64.
    :raises ImportError: if scikit-learn is not installed.
    :raises FileNotFoundError: if ``path`` does not exist.
    :raises DatasetError: if the file is empty or malformed, has a non-finite feature, or does not
        hold exactly two label values (two or more with ``multiclass``).
    """
    ((X, raw),) = _read_libsvm_many([path], n_features)
    Y, _ = class_labels(raw, os.fspath(path), multiclass=multiclass)
    return X, Y


# --------------------------------------------------------------------------------------------------
# Choosing the format
# --------------------------------------------------------------------------------------------------


def detect_format(path: PathLike) -> str:
    """
    Guess the format of a data file: ``"csv"`` or ``"libsvm"``.

    A ``.csv`` extension (also ``.csv.gz``, ``.csv.bz2``, ``.csv.xz``) means CSV. Otherwise the file
    is LIBSVM when its first data lines all read ``label index:value ...`` and at least one of them
    has an ``index:value`` pair; anything else is read as dense delimited text.

    :raises FileNotFoundError: if ``path`` does not exist.
    """
    check_exists(path)
    if base_suffix(path) == ".csv":
        return "csv"
    sample = []
    for _, line in data_lines(path):
        sample.append(line)
        if len(sample) == _SNIFF_LINES:
            break
    looks_libsvm = (
        bool(sample)
        and all(_LIBSVM_LINE.match(line) for line in sample)
        and any(_LIBSVM_PAIR.search(line) for line in sample)
    )
    return "libsvm" if looks_libsvm else "csv"


def _check_label_column_for_libsvm(path: PathLike, label_column: int) -> None:
    if label_column != 0:
        raise DatasetError(
            f"{os.fspath(path)}: label_column={label_column} was given, but the file is in LIBSVM "
            "format, whose label is always the first field"
        )


def load_file(
    path: PathLike,
    label_column: int = 0,
    *,
    n_features: Optional[int] = None,
    return_classes: bool = False,
    multiclass: bool = False,
) -> Any:
    """
    Load a data file as CSV/dense text or LIBSVM, whichever :func:`detect_format` finds.

    :param path: the file; may be gzip, bzip2 or xz compressed.
    :param label_column: the label's column for dense text (negative counts from the end). LIBSVM
        files always carry the label first, so anything but 0 is an error for them.
    :param n_features: the number of features the data must have; for LIBSVM files, pads with
        all-zero features up to this number (see :func:`load_libsvm`).
    :param return_classes: also return the label values in the order of the classes they became:
        (negative, positive), or with ``multiclass`` the values that became 0, ..., C − 1.
    :param multiclass: accept C ≥ 2 classes, mapped to 0, ..., C − 1 in increasing order of
        their values.
    :return: ``X`` [N, D] and ``Y`` [N, 1] in {0, 1} (in {0, ..., C − 1} with ``multiclass``),
        both float64; and the classes with ``return_classes``.
    :raises DatasetError: as :func:`load_csv` and :func:`load_libsvm` do, or if ``n_features`` is
        given and does not match a dense file.
    """
    if detect_format(path) == "libsvm":
        _check_label_column_for_libsvm(path, label_column)
        ((X, raw),) = _read_libsvm_many([path], n_features)
    else:
        X, raw = _read_dense(path, label_column, None, None)
        if n_features is not None and X.shape[1] != n_features:
            raise DatasetError(
                f"{os.fspath(path)}: has {X.shape[1]} features, expected n_features={n_features}"
            )
    Y, classes = class_labels(raw, os.fspath(path), multiclass=multiclass)
    return (X, Y, classes) if return_classes else (X, Y)


def load_train_test(
    train_path: PathLike,
    test_path: PathLike,
    label_column: int = 0,
    *,
    return_classes: bool = False,
    multiclass: bool = False,
) -> Any:
    """
    Load a training file and a test file consistently.

    Unlike two calls to :func:`load_file`, the label classes come from the training file alone (so
    a test file holding a single class is fine, and a class the training file lacks is an error),
    and the test file is read with the training file's number of features (two LIBSVM files also
    share their index base). The two files may be in different formats.

    :param label_column: the label's column in the dense text file(s) (see :func:`load_file`).
        A LIBSVM file carries its label first; with two LIBSVM files, anything but 0 is an error.
    :param return_classes: also return the label values in the order of the classes they became
        (see :func:`load_file`).
    :param multiclass: accept C ≥ 2 classes in the training file (see :func:`load_file`).
    :return: ``X_train`` [N, D], ``Y_train`` [N, 1], ``X_test`` [T, D], ``Y_test`` [T, 1]; float64,
        labels in {0, 1} (in {0, ..., C − 1} with ``multiclass``); and the classes with
        ``return_classes``.
    :raises DatasetError: as :func:`load_file` does, or if the two files disagree on D.
    """
    formats = (detect_format(train_path), detect_format(test_path))
    if formats == ("libsvm", "libsvm"):
        for path in (train_path, test_path):
            _check_label_column_for_libsvm(path, label_column)
        (X_train, raw_train), (X_test, raw_test) = _read_libsvm_many([train_path, test_path], None)
    else:
        X_train, raw_train = _read_any(train_path, formats[0], label_column)
        X_test, raw_test = _read_any(test_path, formats[1], label_column, X_train.shape[1])
    if X_train.shape[1] != X_test.shape[1]:
        raise DatasetError(
            f"{os.fspath(test_path)}: has {X_test.shape[1]} features but the training file "
            f"{os.fspath(train_path)} has {X_train.shape[1]}"
        )
    Y_train, classes = class_labels(raw_train, os.fspath(train_path), multiclass=multiclass)
    Y_test, _ = class_labels(raw_test, os.fspath(test_path), classes)
    if return_classes:
        return X_train, Y_train, X_test, Y_test, classes
    return X_train, Y_train, X_test, Y_test


def _read_any(
    path: PathLike, fmt: str, label_column: int, n_features: Optional[int] = None
) -> Tuple[np.ndarray, RawLabels]:
    """One file of a mixed pair: ``label_column`` applies to a dense file, a LIBSVM file's label
    is first; a LIBSVM file is read with ``n_features`` (the other file's) when given."""
    if fmt == "libsvm":
        ((X, raw),) = _read_libsvm_many([path], n_features)
        return X, raw
    return _read_dense(path, label_column, None, None)


__all__ = [
    "detect_format",
    "load_csv",
    "load_file",
    "load_libsvm",
    "load_train_test",
]
