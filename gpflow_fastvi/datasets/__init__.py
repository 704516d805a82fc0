"""
Binary-classification data for the models and the ``compare`` job.

Every loader returns ``X`` [N, D] and ``Y`` [N, 1], both float64, with ``Y`` in {0, 1} as GPflow's
:class:`~gpflow.likelihoods.Bernoulli` expects. The Rätsch banana set ships with the package
(:func:`load_banana`), with the training half of its first realisation
(:func:`load_banana_split1`), and so does the training file of ijcnn1 (:func:`load_ijcnn1`), so
demos, tutorials and tests need no download. The benchmark sets
(:data:`BENCHMARK_SETS`, :func:`load_benchmark`) are read from a data directory and verified
against their checksums.

A file larger than memory is read lazily as a ``tf.data.Dataset`` of batches by
:func:`stream_file`, which a closed-form model streams once per pass.

This module imports NumPy only; scikit-learn (for LIBSVM files) and TensorFlow (for
:func:`stream_file`) are imported when first needed.
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
    "stream_file",
    "FileStream",
    "train_test_split",
]

_STREAMING = ("stream_file", "FileStream")


def __getattr__(name: str) -> object:
    if name in _STREAMING:  # imports TensorFlow: only when asked for
        from . import streaming

        return getattr(streaming, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
