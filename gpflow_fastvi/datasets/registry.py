"""
The benchmark sets: where each file lives under a data directory, its sha256, its format, and how
it is split and scaled.

Only banana ships with the package. Every other set is read from a *data directory* laid out as
the benchmark collection's MANIFEST describes (``ijcnn1/ijcnn1.trn.bz2``, ``a9a/a9a_plus_a9a.t.xz``,
``raetsch_bsvm/Processed_Heart.data``, ...), given by the ``data_dir`` argument or else by the
environment variable ``GPFLOW_FASTVI_DATA`` (:data:`DATA_DIR_VARIABLE`). Nothing is ever
downloaded: a missing file raises :class:`MissingDataError`, a file whose sha256 differs from the
MANIFEST's raises :class:`ChecksumError`, both naming the file and what to do.

:func:`load_benchmark` returns the split the benchmarks use:

* the set's own test part where it has one (svmguide1 and ijcnn1: their test files; a9a: rows
  32,562–48,842 of ``a9a_plus_a9a.t``, which are LIBSVM's ``a9a.t``);
* otherwise a seeded 80/20 split (:func:`~gpflow_fastvi.datasets.train_test_split`);

then every feature centred and scaled by the mean and standard deviation of the training part
(:func:`~gpflow_fastvi.datasets.standardise`). Labels of a binary set are {0, 1}, the larger raw
label being 1; those of a multi-class set (letter, satimage: :attr:`BenchmarkSet.num_classes` > 2)
are {0, ..., C − 1}, the raw labels in increasing order (letter's ``A`` … ``Z``, satimage's
1 … 6).
"""

import hashlib
import os
from dataclasses import dataclass
from importlib import resources
from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np

from .bundled import BANANA_SHA256
from .loaders import (
    DatasetError,
    PathLike,
    load_csv,
    load_libsvm,
    load_train_test,
)
from .preprocessing import standardise, train_test_split

DATA_DIR_VARIABLE = "GPFLOW_FASTVI_DATA"
"""The environment variable naming the data directory when no ``data_dir`` is passed."""

TEST_FRACTION = 0.2
"""Share of the rows held out for testing in a set without its own test part."""


class MissingDataError(DatasetError, FileNotFoundError):
    """A benchmark file is not where the data directory should hold it (or no directory is set)."""


class ChecksumError(DatasetError):
    """A benchmark file's sha256 differs from the MANIFEST's: it is damaged or another version."""


@dataclass(frozen=True)
class DataFile:
    """One file of a benchmark set."""

    path: str
    """Relative to the data directory, ``/``-separated."""
    sha256: str
    """Of the file as stored (compressed files: of the compressed bytes)."""


@dataclass(frozen=True)
class BenchmarkSet:
    """A benchmark set: its files and how they are read and split."""

    name: str
    description: str
    train: DataFile
    """The data file; for a set with ``test_from_row``, training and test parts both."""
    test: Optional[DataFile] = None
    """The set's own test file, if it has one."""
    test_from_row: Optional[int] = None
    """If set, rows from this (0-based) index of ``train`` are the test part."""
    format: str = "libsvm"
    """``"libsvm"`` or ``"csv"``."""
    label_column: int = 0
    """The label's column in a CSV file (negative counts from the end)."""
    n_features: Optional[int] = None
    """D, for LIBSVM files whose largest feature index may fall short of it."""
    bundled: bool = False
    """Shipped with the package: needs no data directory."""
    num_classes: int = 2
    """C: 2 for a binary set, whose labels become {0, 1}; more for a multi-class set, whose labels
    become {0, ..., C − 1}."""

    @property
    def files(self) -> Tuple[DataFile, ...]:
        return (self.train,) if self.test is None else (self.train, self.test)


def _raetsch(name: str, file: str, sha256: str, description: str) -> BenchmarkSet:
    return BenchmarkSet(
        name,
        description,
        DataFile(f"raetsch_bsvm/{file}", sha256),
        format="csv",
        label_column=-1,
    )


BENCHMARK_SETS: Dict[str, BenchmarkSet] = {
    benchmark.name: benchmark
    for benchmark in (
        BenchmarkSet(
            "banana",
            "Rätsch's banana, 5,300 × 2 (bundled; seeded 80/20 split)",
            DataFile(
                "raetsch_bsvm/banana_data.csv",
                BANANA_SHA256,
            ),
            format="csv",
            label_column=0,
            bundled=True,
        ),
        BenchmarkSet(
            "german",
            "Statlog German credit, LIBSVM german.numer, 1,000 × 24 (seeded 80/20 split)",
            DataFile(
                "german/german.numer",
                "69ffe0c4ba0bd91f936986d7c070dfca7e22064bbd5ab8e1fb925d6c86024ec8",
            ),
        ),
        BenchmarkSet(
            "svmguide1",
            "LIBSVM svmguide1, 3,089 × 4, own test file of 4,000",
            DataFile(
                "svmguide1/svmguide1",
                "672e1a467b3f59589a6f1f3d43f93940d88589675ededb52090140fc1dc83971",
            ),
            DataFile(
                "svmguide1/svmguide1.t",
                "f9c2fd4c725172aeb4476fc1e2327d537f7fbc2f53f49dfd073f80efbe1ba8f7",
            ),
        ),
        BenchmarkSet(
            "ijcnn1",
            "LIBSVM ijcnn1, 49,990 × 22, own test file of 91,701",
            DataFile(
                "ijcnn1/ijcnn1.trn.bz2",
                "b38a4198ce142d43e96fb86d17b87211feec1f909ac344fa057455c69de29de3",
            ),
            DataFile(
                "ijcnn1/ijcnn1.tst.bz2",
                "acd1db430684fdd3f0c768ecc49aa8e749d0004fc117611220c2aa576a7b6a24",
            ),
        ),
        BenchmarkSet(
            "a9a",
            "LIBSVM a9a (Adult), 32,561 × 123, own test part of 16,281",
            DataFile(
                "a9a/a9a_plus_a9a.t.xz",
                "c2d817d05914b0960975d4166e0fb853b2e3efbb16d20a0ce0de28568e9fc233",
            ),
            test_from_row=32_561,
            n_features=123,
        ),
        _raetsch(
            "breast_cancer",
            "Processed_BreastCancer.data",
            "5bfffae8f7803df00e717f81860e71c2f871f38f960f66f14b2799751f6c9ef0",
            "Rätsch's breast cancer, 263 × 9 (seeded 80/20 split)",
        ),
        _raetsch(
            "diabetis",
            "Processed_Diabetis.data",
            "62682eef145f8fabb96aba5b6cd2594fc3259103c19b825effa20bae8911ace4",
            "Rätsch's diabetis, 768 × 8 (seeded 80/20 split)",
        ),
        _raetsch(
            "heart",
            "Processed_Heart.data",
            "606c5b7f9108aef5e0725010d8bd458250512ac0ddee70d875976f488ce64583",
            "Rätsch's heart, 270 × 13 (seeded 80/20 split)",
        ),
        BenchmarkSet(
            "letter",
            "UCI letter recognition, 20,000 × 16, 26 classes (the first 16,000 rows to train, the "
            "last 4,000 to test)",
            DataFile(
                "letter/letter-recognition.data",
                "95f17440186c668ed183b0b3e0b7e15566f285571a3a035cbd17bdb9b00e1ea3",
            ),
            test_from_row=16_000,
            format="csv",
            label_column=0,
            num_classes=26,
        ),
        BenchmarkSet(
            "satimage",
            "Statlog Landsat, LIBSVM satimage.scale, 4,435 × 36, 6 classes, own test file of 2,000",
            DataFile(
                "satimage/satimage.scale.training",
                "df08755887b968a272b84247fa0b1543b8cd623442fbc1c7943144e459ef2eb6",
            ),
            DataFile(
                "satimage/satimage.scale.t",
                "b04c60323488f5a7f571d40be5d750b279e8f3bd43729b4c109b8c013fcd8196",
            ),
            n_features=36,
            num_classes=6,
        ),
        _raetsch(
            "german_raetsch",
            "Processed_German.data",
            "a9f0d55a41e2a27c6cb643f69ab04fb04d7fa2f020f64f56b6046bc75b1d8c62",
            "Rätsch's german, 1,000 × 20 (seeded 80/20 split)",
        ),
    )
}
"""Every set :func:`load_benchmark` knows, by name."""


class Split(NamedTuple):
    """A benchmark split: float64 features [N, D] / [T, D] and class labels [N, 1] / [T, 1], in
    {0, 1} or, for a multi-class set, in {0, ..., C − 1}."""

    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray


def resolve_data_dir(data_dir: Optional[PathLike] = None) -> Optional[str]:
    """``data_dir`` if given, else ``$GPFLOW_FASTVI_DATA`` if set (and not empty), else None."""
    if data_dir is not None:
        return os.fspath(data_dir)
    return os.environ.get(DATA_DIR_VARIABLE) or None


def sha256_of(path: PathLike) -> str:
    """The sha256 of the file's bytes, as a hex string."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _get(name: str) -> BenchmarkSet:
    try:
        return BENCHMARK_SETS[name]
    except KeyError:
        raise KeyError(
            f"unknown benchmark set {name!r}; the sets are {', '.join(BENCHMARK_SETS)}"
        ) from None


def benchmark_files(name: str, data_dir: Optional[PathLike] = None) -> Tuple[str, ...]:
    """
    The verified paths of the set's files: each exists and has the MANIFEST's sha256.

    :param data_dir: the data directory; default ``$GPFLOW_FASTVI_DATA``. Not needed for a bundled set.
    :raises MissingDataError: if no data directory is set, or a file is not in it.
    :raises ChecksumError: if a file's sha256 differs from the MANIFEST's.
    """
    benchmark = _get(name)
    if benchmark.bundled:
        directory = resources.files(__package__).joinpath("data")
        paths = [str(directory.joinpath(os.path.basename(f.path))) for f in benchmark.files]
    else:
        root = resolve_data_dir(data_dir)
        wanted = " and ".join(f.path for f in benchmark.files)
        if root is None:
            raise MissingDataError(
                f"The {name} set is not bundled with gpflow_fastvi. Pass --data-dir DIR (or "
                f"data_dir=..., or set {DATA_DIR_VARIABLE}=DIR) for a directory holding {wanted}. "
                "Nothing is downloaded."
            )
        paths = [os.path.join(root, *f.path.split("/")) for f in benchmark.files]
        for path in paths:
            if not os.path.isfile(path):
                raise MissingDataError(
                    f"{path}: no such file. The {name} set needs {wanted} under the data "
                    f"directory {root}. Nothing is downloaded."
                )
    for path, expected in zip(paths, benchmark.files):
        actual = sha256_of(path)
        if actual != expected.sha256:
            raise ChecksumError(
                f"{path}: sha256 is {actual}, expected {expected.sha256}. The file is damaged or "
                f"is not the version of {name} the benchmarks use; replace it with the one the "
                "MANIFEST describes."
            )
    return tuple(paths)


def _check_num_classes(benchmark: BenchmarkSet, path: str, Y: np.ndarray) -> None:
    """A verified file holds every class; this guards the registry entry against a wrong C."""
    found = int(Y.max()) + 1
    if found != benchmark.num_classes:
        raise DatasetError(
            f"{path}: holds {found} classes, but the {benchmark.name} set has "
            f"{benchmark.num_classes}"
        )


def load_rows(name: str, data_dir: Optional[PathLike] = None) -> Tuple[np.ndarray, np.ndarray]:
    """
    Every row of a single-file set, verified, unsplit and unscaled: ``X`` [N, D] and ``Y`` [N, 1]
    in {0, 1} (in {0, ..., C − 1} for a multi-class set). For jobs with splits of their own (see :mod:`gpflow_fastvi.benchmarks.kl_correction`).

    :raises ValueError: if the set comes as a training and a test file.
    :raises MissingDataError, ChecksumError: as :func:`benchmark_files`.
    """
    benchmark = _get(name)
    if benchmark.test is not None:
        raise ValueError(f"{name} comes as a training and a test file; use load_benchmark")
    (path,) = benchmark_files(name, data_dir)
    multiclass = benchmark.num_classes > 2
    if benchmark.format == "libsvm":
        X, Y = load_libsvm(path, n_features=benchmark.n_features, multiclass=multiclass)
    else:
        X, Y = load_csv(path, benchmark.label_column, header=False, multiclass=multiclass)
    _check_num_classes(benchmark, path, Y)
    return X, Y


def load_benchmark(
    name: str,
    data_dir: Optional[PathLike] = None,
    *,
    seed: int = 0,
    standardised: bool = True,
) -> Split:
    """
    The set ``name`` (a key of :data:`BENCHMARK_SETS`), verified, split and standardised as the
    module docstring describes.

    :param data_dir: the data directory; default ``$GPFLOW_FASTVI_DATA``. Banana needs none.
    :param seed: seeds the 80/20 split of sets without their own test part (ignored otherwise).
    :param standardised: scale the features by the training part's mean and standard deviation.
    :raises KeyError: for an unknown name.
    :raises MissingDataError: if a file is missing (or no data directory is set).
    :raises ChecksumError: if a file is damaged.
    """
    benchmark = _get(name)
    paths = benchmark_files(name, data_dir)
    if benchmark.test is not None:
        X_train, Y_train, X_test, Y_test = load_train_test(
            paths[0], paths[1], multiclass=benchmark.num_classes > 2
        )
        if benchmark.n_features is not None and X_train.shape[1] != benchmark.n_features:
            raise DatasetError(f"{paths[0]}: expected {benchmark.n_features} features")
        _check_num_classes(benchmark, paths[0], Y_train)
    else:
        X, Y = load_rows(name, data_dir)
        if benchmark.test_from_row is not None:
            cut = benchmark.test_from_row
            X_train, Y_train, X_test, Y_test = X[:cut], Y[:cut], X[cut:], Y[cut:]
        else:
            X_train, Y_train, X_test, Y_test = train_test_split(X, Y, TEST_FRACTION, seed)
    if standardised:
        X_train, X_test = standardise(X_train, X_test)
    return Split(X_train, Y_train, X_test, Y_test)


__all__ = [
    "BENCHMARK_SETS",
    "BenchmarkSet",
    "ChecksumError",
    "DATA_DIR_VARIABLE",
    "DataFile",
    "MissingDataError",
    "Split",
    "TEST_FRACTION",
    "benchmark_files",
    "load_benchmark",
    "load_rows",
    "resolve_data_dir",
    "sha256_of",
]
