"""
The data boundary: every check on the data a user hands the package, and the one label
conversion (what a model accepts at construction is checked by :mod:`gpflow_fastvi.model_checks`).

Models, :func:`gpflow_fastvi.fit`, the training loops and the loaders all come through here, so a
bad input gets the same clear :class:`~gpflow_fastvi.exceptions.InvalidDataError` (or
:class:`~gpflow_fastvi.exceptions.IncompatibleLikelihoodError`) wherever it enters, and nothing the
user gave is modified in place.

Binary labels: GPflow's Bernoulli uses {0, 1}, the site formulas use y ∈ {−1, +1}. Targets are
stored in the likelihood's convention ({0, 1}) and turned into signs only where a site formula
needs them (:func:`signed_labels`, or :func:`checked_signed_labels` for batches that NumPy never
sees).
"""

import warnings
from typing import Any, Optional, Tuple, overload

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from .exceptions import (
    InvalidDataError,
)
from .likelihoods import MULTI_CLASS_HINT, MULTI_CLASS_LIKELIHOODS

# --------------------------------------------------------------------------------------------------
# Arrays


def as_float_array(value: Any, name: str) -> np.ndarray:
    """
    A rank-2, finite copy of ``value`` (a NumPy array, a list, a pandas frame, an eager tensor) in
    GPflow's default float, or an error naming ``name``. Real numbers of any dtype are converted
    (float32 and integers exactly); complex values are refused, not cut to their real part.
    """
    if np.iscomplexobj(value) or (tf.is_tensor(value) and value.dtype.is_complex):
        raise InvalidDataError(f"{name} must be real; got complex values.")
    try:
        array: np.ndarray = np.array(value, dtype=gpflow.config.default_float())
    except (TypeError, ValueError) as error:
        raise InvalidDataError(f"{name} must be a numeric array; {error}") from error
    if array.ndim != 2:
        raise InvalidDataError(f"{name} must be a rank-2 array; got shape {list(array.shape)}.")
    if not np.all(np.isfinite(array)):
        bad = int(np.sum(~np.all(np.isfinite(array), axis=1)))
        raise InvalidDataError(f"{name} contains NaN or infinite values (in {bad} rows).")
    return array


def describe_container(data: Any) -> str:
    """What ``data`` is, for an error message: its type, and its length if it is a tuple or list."""
    if isinstance(data, (tuple, list)):
        return f"a {type(data).__name__} of {len(data)} item{'' if len(data) == 1 else 's'}"
    return type(data).__name__


def check_data(data: Any, columns: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """
    ``data`` as float copies ``(X [N, D], Y [N, P])`` with N > 0, P = ``columns`` (one per
    output: L independent outputs of a one-output likelihood, else 1) and every value finite, or
    an :class:`InvalidDataError` that says which of these fails. Targets are not yet checked
    against a likelihood (:func:`targets_for_likelihood` does that).
    """
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise InvalidDataError(
            f"data must be a tuple (X, Y) with X [N, D] and Y [N, {columns}]; got "
            f"{describe_container(data)}."
        )
    X = as_float_array(data[0], "X")
    Y = as_float_array(data[1], "Y")
    if Y.shape[1] != columns:
        if columns > 1:
            classes = (
                " If Y holds the classes of one multi-class output, the likelihood must be a "
                f"multi-class one. {MULTI_CLASS_HINT}"
                if Y.shape[1] == 1
                else ""
            )
            raise InvalidDataError(
                f"Y must have shape [N, {columns}], one column per output (num_latent_gps="
                f"{columns}); got {list(Y.shape)}.{classes}"
            )
        one_hot = np.all((Y == 0.0) | (Y == 1.0)) and np.all(Y.sum(axis=1) == 1.0)
        hint = (
            " These look like one-hot rows: pass the classes, np.argmax(Y, axis=1)[:, None], as "
            "GPflow's multi-class likelihoods take them."
            if one_hot
            else ""
        )
        raise InvalidDataError(f"Y must have shape [N, 1]; got {list(Y.shape)}.{hint}")
    if X.shape[0] != Y.shape[0]:
        raise InvalidDataError(
            f"X and Y must have the same number of rows; got {X.shape[0]} and {Y.shape[0]}."
        )
    if X.shape[0] == 0:
        raise InvalidDataError("data is empty: X and Y have no rows.")
    return X, Y


def batch_tensors(batch: Any) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    A mini-batch ``(X, Y)`` as tensors of GPflow's default float, for a compiled step with a fixed
    input signature: integer labels are cast (they are exact in floating point), any other dtype
    is refused rather than silently converted.
    """
    X, Y = batch
    dtype = gpflow.config.default_float()
    X = tf.convert_to_tensor(X)
    Y = tf.convert_to_tensor(Y)
    if X.dtype != dtype:
        raise InvalidDataError(f"X must have dtype {dtype.__name__}; got {X.dtype.name}.")
    if Y.dtype.is_integer:
        Y = tf.cast(Y, dtype)
    elif Y.dtype != dtype:
        raise InvalidDataError(f"Y must have dtype {dtype.__name__}; got {Y.dtype.name}.")
    return X, Y


@overload
def positive_int(value: Any, name: str) -> int: ...


@overload
def positive_int(value: Any, name: str, *, optional: bool) -> Optional[int]: ...


def positive_int(value: Any, name: str, *, optional: bool = False) -> Optional[int]:
    """
    ``value`` as an int, or a ValueError naming ``name`` unless it is a positive integer (``None``
    too, where ``optional``). Booleans are refused, not read as 0 and 1.
    """
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        allowed = "a positive integer or None" if optional else "a positive integer"
        raise ValueError(f"{name} must be {allowed}; got {value!r}.")
    return int(value)


def is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a symbolic tensor (traced in a compiled function): no values to check."""
    return tf.is_tensor(value) and not hasattr(value, "numpy")


def inducing_inputs(value: Any) -> np.ndarray:
    """Inducing inputs Z given as an array: a finite float copy [M, D] with M ≥ 1, or an error."""
    Z = as_float_array(value, "inducing inputs Z")
    if Z.shape[0] == 0 or Z.shape[1] == 0:
        raise InvalidDataError(
            f"inducing inputs Z must have at least one row and one column; got {list(Z.shape)}."
        )
    return Z


def checked_inputs(
    Xnew: Any, inducing_variable: gpflow.inducing_variables.InducingVariables, name: str = "Xnew"
) -> tf.Tensor:
    """
    Inputs to predict at, checked and converted as training inputs are (:func:`as_float_array`,
    :func:`check_input_columns`), as a tensor. A symbolic tensor (inside a compiled function) is
    taken as it is: its values are not known until it runs.
    """
    if is_symbolic(Xnew):
        return Xnew
    X = as_float_array(Xnew, name)
    check_input_columns(X, inducing_variable, name)
    return tf.constant(X)


def non_negative_float(
    value: Any, name: str, *, optional: bool = False, positive: bool = False
) -> Optional[float]:
    """
    ``value`` as a float, or a ValueError naming ``name`` unless it is a finite real number ≥ 0
    (> 0 where ``positive``; ``None`` too, where ``optional``). Booleans are refused.
    """
    if optional and value is None:
        return None
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float, np.integer, np.floating))
        and np.isfinite(value)
        and (value > 0 if positive else value >= 0)
    )
    if not ok:
        allowed = "a finite number " + ("> 0" if positive else ">= 0")
        raise ValueError(
            f"{name} must be {allowed}{' or None' if optional else ''}; got {value!r}."
        )
    return float(value)


def check_input_columns(
    X: np.ndarray, inducing_variable: gpflow.inducing_variables.InducingVariables, what: str
) -> None:
    """
    An :class:`InvalidDataError` naming ``what`` unless X [N, D] has as many columns as the
    inducing inputs Z (those shared by the outputs for GPflow's
    ``SharedIndependentInducingVariables``, the first output's for
    ``SeparateIndependentInducingVariables``; an inducing variable without ``Z`` is not checked).
    """
    inner = getattr(inducing_variable, "inducing_variable_list", [inducing_variable])[0]
    Z = getattr(getattr(inner, "inducing_variable", inner), "Z", None)
    if Z is not None and X.shape[1] != Z.shape[-1]:
        raise InvalidDataError(
            f"{what} have {X.shape[1]} features; the model's inducing inputs have {Z.shape[-1]}."
        )


def check_num_data(num_data: Any, rows: int) -> int:
    """``num_data`` for a model that holds ``rows`` points: ``rows`` itself, or an error if it differs."""
    if num_data is not None and (isinstance(num_data, bool) or num_data != rows):
        raise ValueError(
            f"num_data={num_data!r} but the data given to the model have {rows} rows; leave "
            "num_data out when the model holds its data."
        )
    return rows


# --------------------------------------------------------------------------------------------------
# Labels and targets


def one_of(value: Any, choices: Tuple[str, ...], name: str) -> str:
    """``value`` if it is one of ``choices``; otherwise a ``ValueError`` naming ``name``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}.")
    return value


class OneOf:
    """
    An attribute that holds one of ``choices``: setting anything else is a ``ValueError``
    naming the attribute (:func:`one_of`), at construction and after it alike.
    """

    def __init__(self, choices: Tuple[str, ...], doc: str):
        self.choices = choices
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: Optional[type] = None) -> Any:
        if instance is None:
            return self
        try:
            return instance.__dict__[self.name]
        except KeyError:  # not set yet: as for any attribute, an AttributeError
            raise AttributeError(self.name) from None

    def __set__(self, instance: Any, value: str) -> None:
        instance.__dict__[self.name] = one_of(value, self.choices, self.name)


def binary_labels_to_01(Y: np.ndarray, name: str = "Y") -> np.ndarray:
    """
    Check that ``Y`` holds binary labels in {0, 1} or {−1, +1} and return a new array in {0, 1}, of
    ``Y``'s float type (float64 for integer labels).

    A single class present (all 0, or all +1) is accepted; any other value raises
    :class:`~gpflow_fastvi.exceptions.InvalidDataError` naming the offending values.
    """
    Y = np.asarray(Y)
    dtype = Y.dtype if np.issubdtype(Y.dtype, np.floating) else np.float64
    values = np.unique(Y)
    if values.size and not np.all(np.isfinite(values.astype(np.float64))):
        raise InvalidDataError(f"{name} contains NaN or infinite labels.")
    if set(values.tolist()) <= {0.0, 1.0}:
        return Y.astype(dtype, copy=True)
    if set(values.tolist()) <= {-1.0, 1.0}:
        return (Y > 0).astype(dtype)
    shown = ", ".join(str(v) for v in values[:6].tolist()) + (", ..." if values.size > 6 else "")
    raise InvalidDataError(
        f"{name} must hold binary labels, either {{0, 1}} (GPflow's Bernoulli convention) or "
        f"{{-1, +1}}; found the values {{{shown}}}."
    )


def targets_for_likelihood(likelihood: gpflow.likelihoods.Likelihood, Y: np.ndarray) -> np.ndarray:
    """
    Check targets [N, P] against what ``likelihood`` can score and return them in its convention:
    binary labels ({0, 1} or {−1, +1}, stored as {0, 1}) for Bernoulli, integer classes in
    {0, …, C − 1} for a likelihood of C classes, non-negative integer counts for Poisson, anything
    finite otherwise.
    """
    if isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        return binary_labels_to_01(Y)
    if isinstance(likelihood, MULTI_CLASS_LIKELIHOODS):
        return class_labels(Y, likelihood.num_classes)
    if isinstance(likelihood, gpflow.likelihoods.Poisson):
        bad = (Y < 0) | (Y != np.round(Y))
        if np.any(bad):
            raise InvalidDataError(
                "Y must hold non-negative integer counts for a Poisson likelihood; found "
                f"{np.unique(Y[bad])[:6].tolist()}."
            )
    return Y


def class_labels(Y: np.ndarray, num_classes: int) -> np.ndarray:
    """
    Labels [N, 1] (shape checked by :func:`check_data`) of a C-class likelihood, as GPflow's
    ``Softmax`` takes them: integer classes in {0, …, C − 1}, held as integers or as floats with
    integer values (returned as they are).
    """
    Y = np.asarray(Y)
    bad = (Y != np.round(Y)) | (Y < 0) | (Y >= num_classes)
    if np.any(bad):
        raise InvalidDataError(
            f"Y must hold integer classes in {{0, …, {num_classes - 1}}} for a likelihood of "
            f"{num_classes} classes; found {np.unique(Y[bad])[:6].tolist()}."
        )
    return Y


def warn_of_absent_classes(likelihood: gpflow.likelihoods.Likelihood, Y: Any) -> None:
    """
    Warn where a class of a C-class likelihood has no point among the training labels ``Y``
    (arrays; a stream is not counted): the latent GP of such a class is fitted to the others'
    points alone, where it is pushed down, and the model gives the class little probability
    anywhere, which may or may not be what the data mean.
    """
    if not isinstance(likelihood, MULTI_CLASS_LIKELIHOODS) or Y is None:
        return
    present = set(np.unique(np.asarray(Y)).astype(int).tolist())
    absent = [c for c in range(likelihood.num_classes) if c not in present]
    if absent:
        shown = ", ".join(map(str, absent[:10])) + (", …" if len(absent) > 10 else "")
        warnings.warn(
            f"{len(absent)} of the {likelihood.num_classes} classes have no training point "
            f"(classes {shown}): their latent GPs learn only to be low. Check the labels "
            "(classes 0 … C − 1) and num_classes.",
            UserWarning,
            stacklevel=3,
        )


@check_shapes("Y: [N, L]", "return: [N, L]")
def signed_labels(Y: tf.Tensor) -> tf.Tensor:
    """Map labels in {0, 1} to y = 2Y − 1 in {−1, +1}, the convention of the site formulas."""
    return 2.0 * Y - 1.0


@check_shapes("Y: [N, L]", "return: [N, L]")
def checked_signed_labels(Y: tf.Tensor, model: str) -> tf.Tensor:
    """
    Binary labels in {0, 1} or {−1, +1} as y ∈ {−1, +1}, with an in-graph check for mini-batches
    that a ``tf.data`` pipeline delivers and NumPy never sees; the error names ``model``.
    """
    zero_one = tf.reduce_all((Y == 0.0) | (Y == 1.0))
    plus_minus = tf.reduce_all((Y == -1.0) | (Y == 1.0))
    check = tf.debugging.assert_equal(
        zero_one | plus_minus,
        True,
        message=f"{model} needs binary labels Y, either all in {{0, 1}} (GPflow's Bernoulli "
        "convention) or all in {-1, +1}",
    )
    with tf.control_dependencies([check]):
        return tf.where(Y == 1.0, tf.ones_like(Y), -tf.ones_like(Y))
