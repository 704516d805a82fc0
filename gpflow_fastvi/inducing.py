"""Inducing inputs: accept what a GPflow user would pass, or place them by k-means as the papers do."""

import warnings
from typing import Union

import gpflow
import numpy as np
from scipy.cluster.vq import kmeans2

from .exceptions import InvalidDataError

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
    inducing_variable: InducingSpec, X: np.ndarray, *, seed: int = 0
) -> gpflow.inducing_variables.InducingVariables:
    """
    A GPflow inducing variable from an inducing variable (used as is), an array Z [M, D], or an
    int M (k-means centres of ``X``).
    """
    if isinstance(inducing_variable, gpflow.inducing_variables.InducingVariables):
        return inducing_variable
    if isinstance(inducing_variable, (int, np.integer)) and not isinstance(inducing_variable, bool):
        return gpflow.inducing_variables.InducingPoints(
            kmeans_inducing_points(X, int(inducing_variable), seed=seed)
        )
    Z = np.array(inducing_variable, dtype=np.float64)  # a copy: the caller's array is never touched
    if Z.ndim != 2 or Z.shape[1] != X.shape[1]:
        raise InvalidDataError(
            f"Inducing inputs Z must have shape [M, D] with D = {X.shape[1]} (the columns of X); "
            f"got shape {list(Z.shape)}."
        )
    if not np.all(np.isfinite(Z)):
        raise InvalidDataError("Inducing inputs Z contain NaN or infinite values.")
    return gpflow.inducing_variables.InducingPoints(Z)
