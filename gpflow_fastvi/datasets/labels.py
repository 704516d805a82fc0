"""
Label values as read from a data file, and their mapping onto the class indices the models take:
{0, 1} for two classes (GPflow's Bernoulli convention), {0, ..., C − 1} for C classes (GPflow's
``Softmax`` and ``MultiClass``), the values in increasing order. Values are compared as numbers
when every label is a number, as strings otherwise.
"""

from typing import Optional, Sequence, Tuple

import numpy as np

from .files import DatasetError

RawLabels = np.ndarray
"""Label values as read from a file: a float64 array, or a str array for non-numeric labels."""


def labels_from_strings(tokens: Sequence[str]) -> RawLabels:
    """Labels as float64 when every token is a number, else as strings (``g``/``h``, ``UP``/...)."""
    try:
        return np.asarray([float(t) for t in tokens], dtype=np.float64)
    except ValueError:
        return np.asarray(tokens, dtype=str)


def infer_classes(raw: RawLabels, source: str, multiclass: bool) -> Tuple[object, ...]:
    """The distinct label values of ``raw``, in increasing order: exactly two, or with
    ``multiclass`` two or more."""
    if raw.dtype.kind == "f" and not np.all(np.isfinite(raw)):
        bad = int(np.flatnonzero(~np.isfinite(raw))[0])
        raise DatasetError(f"{source}: the label of data row {bad + 1} is {raw[bad]}")
    values = np.unique(raw)
    task = "classification" if multiclass else "binary classification"
    if values.size < 2:
        found = "no labels" if values.size == 0 else f"only one class ({values[0]!r})"
        raise DatasetError(f"{source}: {task} needs two classes or more; found {found}")
    if values.size > 2 and not multiclass:
        shown = ", ".join(repr(v.item()) for v in values[:6]) + (", ..." if values.size > 6 else "")
        raise DatasetError(
            f"{source}: binary classification needs exactly two classes; found {values.size} "
            f"label values ({shown}). Check --label-column / label_column, recode the labels, or "
            "pass multiclass=True for C classes."
        )
    return tuple(value.item() for value in values)


def class_labels(
    raw: RawLabels,
    source: str,
    classes: Optional[Tuple[object, ...]] = None,
    multiclass: bool = False,
) -> Tuple[np.ndarray, Tuple[object, ...]]:
    """
    Map raw labels onto class indices: ``classes[k]`` -> k. For two classes that is {0, 1}, the
    Bernoulli convention; for C classes {0, ..., C - 1}, the convention of GPflow's ``Softmax`` and
    ``MultiClass``.

    :param classes: the label values in index order; inferred from ``raw`` when None (in
        increasing order, so the larger of two values is the positive class).
    :param multiclass: when inferring, accept more than two classes.
    :return: ``Y`` [N, 1] float64 and the classes used.
    """
    if classes is None:
        classes = infer_classes(raw, source, multiclass)
    Y = np.full(raw.shape, -1.0)
    for index, value in enumerate(classes):
        Y[raw == value] = index
    unknown = Y < 0.0
    if np.any(unknown):
        bad = int(np.flatnonzero(unknown)[0])
        known = ", ".join(f"{value!r} (-> {index})" for index, value in enumerate(classes[:6]))
        raise DatasetError(
            f"{source}: data row {bad + 1} has label {raw[bad].item()!r}, which is none of the "
            f"classes of the training data: {known}{', ...' if len(classes) > 6 else ''}"
        )
    return Y[:, None], classes


__all__ = ["RawLabels", "class_labels", "infer_classes", "labels_from_strings"]
