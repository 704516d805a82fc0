"""
The data sets that ship with the package, so that demos, tutorials and tests need no download:
Rätsch's banana set, the training half of its first realisation, and LIBSVM's ijcnn1 training file.
Provenance, licences and checksums are in ``data/ATTRIBUTION.md``.
"""

from importlib import resources
from typing import Tuple

import numpy as np

from .loaders import DatasetError, load_csv, load_libsvm

BANANA_SHA256 = "cce745e6d8d549b50bf085564c363f6bf9357b4801f199f29c7463880d7a65ce"
"""sha256 of the bundled ``data/banana_data.csv`` (see ``data/ATTRIBUTION.md``)."""


def load_banana() -> Tuple[np.ndarray, np.ndarray]:
    """
    The Rätsch "banana" benchmark: 5300 two-dimensional points, 2924 of class 0 and 2376 of class 1.

    The file ships with the package (``gpflow_fastvi/datasets/data/banana_data.csv``, label ±1 in
    the first column); ``data/ATTRIBUTION.md`` beside it gives its provenance. Label -1 maps to 0,
    +1 to 1. The features are as distributed (already roughly standardised); the rows are in the
    file's order, so shuffle or split before use (see :func:`train_test_split`).

    :return: ``X`` [5300, 2] and ``Y`` [5300, 1] in {0, 1}, both float64.
    """
    resource = resources.files(__package__).joinpath("data").joinpath("banana_data.csv")
    with resources.as_file(resource) as path:
        return load_csv(path, label_column=0, delimiter=",", header=False)


def _bundled_text(name: str) -> np.ndarray:
    resource = resources.files(__package__).joinpath("data").joinpath(name)
    with resources.as_file(resource) as path:
        return np.loadtxt(path, dtype=np.float64, ndmin=2)


def load_banana_split1() -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """
    Realisation 1 of Rätsch's banana benchmark, the split of :cite:t:`king2006fast` (Figure 2):
    its 400 training points, shipped with the package (``data/banana_train_*_1.asc``), and as test
    set the other 4900 rows of :func:`load_banana`.

    The split's own test file is not available; every training point occurs in the bundled banana
    set (to 1e-6, with the same label), so the complement of the training rows stands in for it.

    :return: ``X_train`` [400, 2], ``Y_train`` [400, 1], ``X_test`` [4900, 2], ``Y_test`` [4900, 1],
        labels in {0, 1}, features as distributed.
    """
    X_train = _bundled_text("banana_train_data_1.asc")
    Y_train = (_bundled_text("banana_train_labels_1.asc") > 0).astype(np.float64)
    X, Y = load_banana()
    # Squared distance from every banana row to its nearest training point.
    nearest = np.min(
        np.sum(np.square(X[:, None, :] - X_train[None, :, :]), axis=-1), axis=1
    )  # [5300]
    in_train = nearest < 1e-10
    if in_train.sum() != len(X_train):
        raise DatasetError(
            f"{in_train.sum()} rows of the bundled banana set match the 400 training points of "
            "realisation 1; expected 400. The bundled files are damaged."
        )
    return X_train, Y_train, X[~in_train], Y[~in_train]


def load_ijcnn1() -> Tuple[np.ndarray, np.ndarray]:
    """
    The training file of LIBSVM's ijcnn1 (IJCNN 2001 challenge, in the winner's transformation):
    49,990 points in 22 dimensions, 4,853 of class 1. It is the largest set shipped with the
    package (``data/ijcnn1.trn.bz2``, 1.4 MB; provenance and licence in ``data/ATTRIBUTION.md``),
    so the mini-batch tutorial runs without a download. Split it yourself (see
    :func:`train_test_split`); ``load_benchmark("ijcnn1")`` pairs the same file with the set's own
    91,701-point test file from a data directory.

    Reading it needs scikit-learn (the ``[bench]`` extra), as :func:`load_libsvm` does.

    :return: ``X`` [49990, 22] and ``Y`` [49990, 1] in {0, 1}, both float64.
    """
    resource = resources.files(__package__).joinpath("data").joinpath("ijcnn1.trn.bz2")
    with resources.as_file(resource) as path:
        return load_libsvm(path)


__all__ = ["BANANA_SHA256", "load_banana", "load_banana_split1", "load_ijcnn1"]
