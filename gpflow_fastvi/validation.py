"""
The data boundary: every check on what a user hands the package, and the one label conversion.

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
    IncompatibleLikelihoodError,
    InvalidDataError,
    UnsupportedConfigurationError,
)
from .likelihoods import MULTI_CLASS_LIKELIHOODS

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


def check_data(data: Any) -> Tuple[np.ndarray, np.ndarray]:
    """
    ``data`` as float copies ``(X [N, D], Y [N, 1])`` with N > 0 and every value finite, or an
    :class:`InvalidDataError` that says which of these fails. Targets are not yet checked against a
    likelihood (:func:`targets_for_likelihood` does that).
    """
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise InvalidDataError(
            f"data must be a tuple (X, Y) with X [N, D] and Y [N, 1]; got {describe_container(data)}."
        )
    X = as_float_array(data[0], "X")
    Y = as_float_array(data[1], "Y")
    if Y.shape[1] != 1:
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
    inducing inputs Z (an inducing variable without ``Z`` is not checked).
    """
    Z = getattr(inducing_variable, "Z", None)
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
    Check targets [N, 1] against what ``likelihood`` can score and return them in its convention:
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


# --------------------------------------------------------------------------------------------------
# Likelihoods


def is_logit_bernoulli(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` is a Bernoulli whose inverse link is the logistic sigmoid (checked numerically)."""
    if not isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        return False
    t = tf.constant(np.linspace(-30.0, 30.0, 61), dtype=gpflow.config.default_float())
    return bool(
        np.allclose(likelihood.invlink(t).numpy(), tf.sigmoid(t).numpy(), rtol=1e-10, atol=0)
    )


MULTI_CLASS_HINT = (
    "For C classes use VIConcave or VITaylor with gpflow.likelihoods.Softmax(C), or "
    "PolyaGammaSVGP with gpflow_fastvi.likelihoods.LogisticSoftmax(C), and num_latent_gps=C."
)
"""What the errors of the binary and scalar models say to use for a multi-class problem."""


def check_svgp_options(
    model: str,
    kernel: gpflow.kernels.Kernel,
    inducing_variable: Any,
    q_diag: bool,
) -> None:
    """
    Raise :class:`UnsupportedConfigurationError` for the options of :class:`gpflow.models.SVGP`
    that the closed-form steps cannot take: ``q_diag=True`` (each step gives q(u) a full
    covariance) and a multi-output kernel or inducing variable (the latent functions share one
    single-output kernel and one set of inducing inputs, as in SVGP(num_latent_gps=C)).
    """
    if q_diag:
        raise UnsupportedConfigurationError(
            f"{model} needs q_diag=False: its closed-form steps give q(u) a full covariance, "
            "which q_diag=True cannot hold. Leave q_diag out (SVGP's default), or use "
            "gpflow.models.SVGP for a diagonal q(u)."
        )
    if isinstance(kernel, gpflow.kernels.MultioutputKernel):
        raise UnsupportedConfigurationError(
            f"{model} takes a single-output kernel, shared by its latent functions as in GPflow's "
            f"SVGP(num_latent_gps=C); got the multi-output kernel {type(kernel).__name__}. Use "
            "gpflow.models.SVGP for multi-output kernels."
        )
    if isinstance(inducing_variable, gpflow.inducing_variables.MultioutputInducingVariables):
        raise UnsupportedConfigurationError(
            f"{model} takes one set of inducing inputs shared by its latent functions (an array "
            "Z [M, D] or InducingPoints); got the multi-output inducing variable "
            f"{type(inducing_variable).__name__}. Use gpflow.models.SVGP for multi-output "
            "inducing variables."
        )


def svgp_num_latent_gps(num_latent_gps: int, q_sqrt: Any) -> int:
    """
    The number of latent GPs as :class:`gpflow.models.SVGP` takes it: the leading axis L of
    ``q_sqrt`` [L, M, M] when one is given, else ``num_latent_gps``.
    """
    if q_sqrt is None:
        return num_latent_gps
    shape = np.shape(q_sqrt)
    if len(shape) != 3:
        raise ValueError(
            f"q_sqrt must have shape [L, M, M] (L latent GPs, M inducing points; q_diag=False); "
            f"got shape {list(shape)}."
        )
    return int(shape[0])


def svgp_initial_q(q_mu: Any, q_sqrt: Any, M: int, L: int) -> Tuple[np.ndarray, np.ndarray]:
    """
    q(u)'s starting point as :class:`gpflow.models.SVGP` takes it: ``q_mu`` [M, L] (zeros when
    ``None``) and ``q_sqrt`` [L, M, M] (identities when ``None``), copied in GPflow's default float
    and checked for their shapes and finite values. As in SVGP, the triangular transform of
    ``q_sqrt`` keeps its lower triangle.
    """
    dtype = gpflow.config.default_float()
    initial = {
        "q_mu": (q_mu, (M, L), np.zeros((M, L))),
        "q_sqrt": (q_sqrt, (L, M, M), np.tile(np.eye(M), (L, 1, 1))),
    }
    arrays = []
    for name, (value, shape, default) in initial.items():
        array: np.ndarray = np.array(default if value is None else value, dtype=dtype)
        if array.shape != shape:
            raise ValueError(
                f"{name} must have shape {list(shape)} (M = {M} inducing points, L = {L} latent "
                f"GPs); got shape {list(array.shape)}."
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite values.")
        arrays.append(array)
    return arrays[0], arrays[1]


def check_latent_functions(
    model: str,
    likelihood: gpflow.likelihoods.Likelihood,
    num_latent_gps: int,
    latent: int,
) -> None:
    """
    Raise :class:`IncompatibleLikelihoodError` unless ``num_latent_gps`` is ``latent``, the number
    of latent functions ``model`` has with ``likelihood``: one per class for C classes, else 1.
    """
    if num_latent_gps == latent:
        return
    if latent > 1:
        raise IncompatibleLikelihoodError(
            f"{model} with {type(likelihood).__name__}({latent}) needs one latent GP per class, "
            f"num_latent_gps={latent}, as GPflow's SVGP does; got num_latent_gps={num_latent_gps}."
        )
    raise IncompatibleLikelihoodError(
        f"{model} with {type(likelihood).__name__} has one latent GP, num_latent_gps=1, and "
        f"targets Y [N, 1]; got num_latent_gps={num_latent_gps} (from q_sqrt's leading axis where "
        f"it is given, as in SVGP). GPflow's SVGP with L latent GPs and a one-output likelihood "
        f"fits L independent outputs, Y [N, L], which {model} does not: fit one model per column "
        f"of Y, or use gpflow.models.SVGP. {MULTI_CLASS_HINT}"
    )


def check_logit_bernoulli(likelihood: gpflow.likelihoods.Likelihood, needed_by: str) -> None:
    """Raise :class:`IncompatibleLikelihoodError` unless ``likelihood`` is a logit Bernoulli."""
    if is_logit_bernoulli(likelihood):
        return
    needed = (
        f"{needed_by} needs gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid) (binary "
        f"classification, the logit link); got {type(likelihood).__name__}"
    )
    if isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        link = likelihood.invlink
        raise IncompatibleLikelihoodError(
            f"{needed} with invlink={getattr(link, '__name__', link)}. GPflow's default "
            "Bernoulli() is the probit link: use Bernoulli(invlink=tf.sigmoid), or VITaylor, "
            "KLCorrected or VIConcave, which take the probit link."
        )
    if not isinstance(likelihood, gpflow.likelihoods.ScalarLikelihood):
        raise IncompatibleLikelihoodError(
            f"{needed}. {MULTI_CLASS_HINT} Multi-output likelihoods are not supported."
        )
    raise IncompatibleLikelihoodError(
        f"{needed}. For another scalar likelihood use VITaylor, KLCorrected or VIConcave "
        "(VIConcave: log-concave ones)."
    )


def check_scalar_likelihood(likelihood: gpflow.likelihoods.Likelihood, model: str) -> None:
    """
    Raise :class:`IncompatibleLikelihoodError` unless ``likelihood`` factorises over points with
    targets Y [N, 1]: GPflow's ``SwitchedLikelihood``, a scalar likelihood too, reads the index of
    each point's likelihood from a second column of Y.
    """
    if isinstance(likelihood, gpflow.likelihoods.SwitchedLikelihood):
        raise IncompatibleLikelihoodError(
            f"{model} takes targets Y [N, 1] and one likelihood for every point; "
            "SwitchedLikelihood reads each point's likelihood from a second column of Y. Fit one "
            "model per group of points, or use gpflow.models.SVGP."
        )
    if not isinstance(likelihood, gpflow.likelihoods.ScalarLikelihood):
        multi_class = (
            f" {MULTI_CLASS_HINT}" if isinstance(likelihood, MULTI_CLASS_LIKELIHOODS) else ""
        )
        raise IncompatibleLikelihoodError(
            f"{model} needs a likelihood that factorises over data points with one latent function "
            f"(a gpflow.likelihoods.ScalarLikelihood, such as Bernoulli, Poisson or Gaussian); got "
            f"{type(likelihood).__name__}.{multi_class}"
        )


LOG_CONCAVE_LIKELIHOODS: Tuple[type, ...] = (
    gpflow.likelihoods.Gaussian,
    gpflow.likelihoods.Bernoulli,
    gpflow.likelihoods.Poisson,
    gpflow.likelihoods.Exponential,
    gpflow.likelihoods.Gamma,
    gpflow.likelihoods.Ordinal,
)
"""GPflow's likelihoods whose log-density is concave in f with their default links."""

NOT_LOG_CONCAVE_LIKELIHOODS: Tuple[type, ...] = (
    gpflow.likelihoods.StudentT,
    gpflow.likelihoods.Beta,
)
"""GPflow's likelihoods whose log-density is not concave in f: a Gaussian site cannot stand in."""


def check_log_concave(likelihood: gpflow.likelihoods.Likelihood, model: str) -> None:
    """
    Refuse a likelihood known not to be log-concave in f (Student-t, Beta) with an
    :class:`IncompatibleLikelihoodError`; warn for one this package does not know, whose
    concavity it cannot check. A site rule that needs curvature w ≥ 0 would otherwise clip it at
    points where log p bends upwards (outliers under Student-t) and could settle far from any
    sensible posterior without a word.
    """
    if isinstance(likelihood, NOT_LOG_CONCAVE_LIKELIHOODS):
        raise IncompatibleLikelihoodError(
            f"{model} needs a likelihood whose log-density is concave in f; "
            f"{type(likelihood).__name__}'s is not (it bends upwards away from the data, where "
            "the sites' curvature would have to be negative). Use gpflow.models.SVGP for it, or a "
            "log-concave likelihood such as Gaussian, Bernoulli, Poisson, Exponential or Gamma."
        )
    if not isinstance(likelihood, LOG_CONCAVE_LIKELIHOODS):
        warnings.warn(
            f"{model} cannot check that {type(likelihood).__name__} is log-concave in f; it "
            "assumes so. Where log p(y | f) is not concave the sites' curvature is clipped at 0 "
            "and the result may be poor: compare with gpflow.models.SVGP.",
            UserWarning,
            stacklevel=3,
        )
