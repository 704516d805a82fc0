"""Inducing inputs: accept what a GPflow user would pass, or place them by k-means as the papers do."""

import warnings
from typing import Optional, Union

import gpflow
import numpy as np
from scipy.cluster.vq import kmeans2

from .exceptions import InvalidDataError
from .validation import inducing_inputs

InducingSpec = Union[int, np.ndarray, gpflow.inducing_variables.InducingVariables]


def kmeans_inducing_points(X: np.ndarray, num_inducing: int, *, seed: int = 0) -> np.ndarray:
    """
    ``num_inducing`` k-means centres of the rows of ``X`` (k-means++ start, SciPy's ``kmeans2``),
    the placement used by :cite:t:`izmailov2017faster`. Deterministic for a given ``seed``.
    """
    X = np.asarray(X, dtype=np.float64)
    if not 1 <= num_inducing <= X.shape[0]:
        raise InvalidDataError(
            f"The number of inducing points must be between 1 and the number of data points "
            f"N = {X.shape[0]}; got M = {num_inducing}."
        )
    if num_inducing == X.shape[0]:
        return X.copy()
    with warnings.catch_warnings():
        # An empty cluster keeps its k-means++ seed, which is a data point: harmless here.
        warnings.filterwarnings("ignore", message="One of the clusters is empty")
        centres, _ = kmeans2(X, num_inducing, minit="++", seed=np.random.default_rng(seed))
    return centres


def make_inducing_variable(
    inducing_variable: InducingSpec, X: Optional[np.ndarray] = None, *, seed: int = 0
) -> gpflow.inducing_variables.InducingVariables:
    """
    A GPflow inducing variable from an inducing variable (used as is), an array Z [M, D] (copied,
    checked: M ≥ 1, finite, and as many columns as ``X`` when ``X`` is given), or an int M (k-means
    centres of ``X``, which it then needs).
    """
    if isinstance(inducing_variable, gpflow.inducing_variables.InducingVariables):
        return inducing_variable
    if isinstance(inducing_variable, (int, np.integer)) and not isinstance(inducing_variable, bool):
        if X is None:
            raise ValueError(
                "An int M of inducing points (k-means centres) needs the data X; pass the "
                "inducing inputs as an array Z [M, D] or a GPflow inducing variable instead."
            )
        return gpflow.inducing_variables.InducingPoints(
            kmeans_inducing_points(X, int(inducing_variable), seed=seed)
        )
    Z = inducing_inputs(inducing_variable)
    if X is not None and Z.shape[1] != X.shape[1]:
        raise InvalidDataError(
            f"Inducing inputs Z must have shape [M, D] with D = {X.shape[1]} (the columns of X); "
            f"got shape {list(Z.shape)}."
        )
    return gpflow.inducing_variables.InducingPoints(Z)
