"""
Splitting and scaling of ``(X, Y)`` data. Both functions return new arrays and never modify their
arguments.
"""

from typing import Tuple

import numpy as np


def _check_pair(X: np.ndarray, Y: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X)
    Y = np.asarray(Y)
    if X.ndim != 2:
        raise ValueError(f"X must have shape [N, D]; got shape {X.shape}")
    if Y.ndim != 2:
        raise ValueError(f"Y must have shape [N, 1]; got shape {Y.shape}")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
    return X, Y


def train_test_split(
    X: np.ndarray, Y: np.ndarray, test_fraction: float = 0.2, seed: int = 0
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """
    Split ``(X, Y)`` at random into a training part and a held-out test part.

    The rows are shuffled by a :func:`numpy.random.default_rng` permutation of ``seed``, so the same
    seed gives the same split. The test part has ``round(N * test_fraction)`` rows, at least one,
    and at least one row is left for training. The split is not stratified.

    :param X: inputs [N, D].
    :param Y: labels [N, 1].
    :param test_fraction: share of the rows held out, strictly between 0 and 1.
    :param seed: seed of the permutation.
    :return: ``X_train``, ``Y_train``, ``X_test``, ``Y_test`` (new arrays, in that order: the order
        :func:`gpflow_fastvi.benchmarks.compare.run_comparison` takes them in).
    """
    X, Y = _check_pair(X, Y)
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1; got {test_fraction}")
    N = X.shape[0]
    if N < 2:
        raise ValueError(f"cannot split {N} row(s) into a training and a test part")
    num_test = min(max(int(round(N * test_fraction)), 1), N - 1)
    permutation = np.random.default_rng(seed).permutation(N)
    test_rows, train_rows = permutation[:num_test], permutation[num_test:]
    return X[train_rows], Y[train_rows], X[test_rows], Y[test_rows]


def standardise(X_train: np.ndarray, X_test: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """
    Centre and scale each feature by the mean and standard deviation of the *training* part.

    The test part is transformed with the training statistics, so nothing about it leaks into
    training. A feature that is constant on the training part is only centred (its scale is left
    at 1 rather than divided by zero).

    :param X_train: training inputs [N, D].
    :param X_test: test inputs [T, D].
    :return: the standardised ``X_train`` and ``X_test``, as new float64 arrays.
    """
    X_train = np.asarray(X_train, dtype=np.float64)
    X_test = np.asarray(X_test, dtype=np.float64)
    if X_train.ndim != 2 or X_test.ndim != 2:
        raise ValueError(
            f"X_train and X_test must have shape [N, D]; got {X_train.shape} and {X_test.shape}"
        )
    if X_train.shape[1] != X_test.shape[1]:
        raise ValueError(
            f"X_train has {X_train.shape[1]} features but X_test has {X_test.shape[1]}"
        )
    if X_train.shape[0] == 0:
        raise ValueError("X_train has no rows to take the mean and standard deviation from")
    mean = X_train.mean(axis=0)
    scale = X_train.std(axis=0)
    scale = np.where(scale > 0.0, scale, 1.0)  # constant feature: centre only, never divide by 0
    return (X_train - mean) / scale, (X_test - mean) / scale


__all__ = ["standardise", "train_test_split"]
