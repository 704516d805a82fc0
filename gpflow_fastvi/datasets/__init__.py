"""
Binary-classification data for the models and the ``compare`` job.

Every loader returns ``X`` [N, D] and ``Y`` [N, 1], both float64, with ``Y`` in {0, 1} as GPflow's
:class:`~gpflow.likelihoods.Bernoulli` expects. The Rätsch banana set ships with the package
(:func:`load_banana`), with the training half of its first realisation
(:func:`load_banana_split1`), and so does the training file of ijcnn1 (:func:`load_ijcnn1`), so
demos, tutorials and tests need no download. The benchmark sets
(:data:`BENCHMARK_SETS`, :func:`load_benchmark`) are read from a data directory and verified
against their checksums.

This module imports NumPy only; scikit-learn (for LIBSVM files) is imported when first needed.
"""

from .bundled import BANANA_SHA256, load_banana, load_banana_split1, load_ijcnn1
from .loaders import (
    DatasetError,
    detect_format,
    load_csv,
    load_file,
    load_libsvm,
    load_train_test,
)
from .preprocessing import standardise, train_test_split
from .registry import (
    BENCHMARK_SETS,
    DATA_DIR_VARIABLE,
    BenchmarkSet,
    ChecksumError,
    MissingDataError,
    Split,
    benchmark_files,
    load_benchmark,
    load_rows,
    resolve_data_dir,
)

__all__ = [
    "BANANA_SHA256",
    "BENCHMARK_SETS",
    "BenchmarkSet",
    "ChecksumError",
    "DATA_DIR_VARIABLE",
    "MissingDataError",
    "Split",
    "benchmark_files",
    "load_benchmark",
    "load_rows",
    "resolve_data_dir",
    "DatasetError",
    "detect_format",
    "load_banana",
    "load_banana_split1",
    "load_csv",
    "load_file",
    "load_ijcnn1",
    "load_libsvm",
    "load_train_test",
    "standardise",
    "train_test_split",
]
