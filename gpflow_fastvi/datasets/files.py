"""
Opening data files: gzip, bzip2 and xz recognised by their first bytes, not by their names, and
the data lines of a text file (neither blank nor a ``#`` comment).
"""

import bz2
import gzip
import io
import lzma
import os
from typing import IO, Iterator, Tuple, Union, cast

from ..exceptions import InvalidDataError

PathLike = Union[str, "os.PathLike[str]"]
"""A file-system path, as a string or a :class:`os.PathLike`."""

_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".lzma")


def check_exists(path: PathLike) -> None:
    """A ``FileNotFoundError`` or ``IsADirectoryError`` naming ``path`` unless it is a file."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such data file: {os.fspath(path)}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"Expected a data file, got a directory: {os.fspath(path)}")


def open_binary(path: PathLike) -> IO[bytes]:
    """Open ``path`` for reading bytes; gzip, bzip2 and xz are recognised by magic bytes."""
    check_exists(path)
    with open(path, "rb") as probe:
        head = probe.read(6)
    if head.startswith(_GZIP_MAGIC):
        return cast(IO[bytes], gzip.open(path, "rb"))
    if head.startswith(_BZIP2_MAGIC):
        return cast(IO[bytes], bz2.open(path, "rb"))
    if head.startswith(_XZ_MAGIC):
        return cast(IO[bytes], lzma.open(path, "rb"))
    return open(path, "rb")


def open_text(path: PathLike) -> IO[str]:
    """Open ``path`` for reading UTF-8 text, decompressed as :func:`open_binary` decompresses it."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8", newline="")


def data_lines(path: PathLike) -> Iterator[Tuple[int, str]]:
    """Yield ``(line_number, line)`` for each line that is neither blank nor a ``#`` comment."""
    with open_text(path) as f:
        for number, line in enumerate(f, start=1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                yield number, stripped


def base_suffix(path: PathLike) -> str:
    """The file-name extension, looking through a compression suffix (``a.csv.xz`` -> ``.csv``)."""
    root, suffix = os.path.splitext(os.fspath(path))
    if suffix.lower() in _COMPRESSED_SUFFIXES:
        suffix = os.path.splitext(root)[1]
    return suffix.lower()


class DatasetError(InvalidDataError):
    """A data file that cannot be read as a classification data set (re-exported by
    :mod:`gpflow_fastvi.datasets` and :mod:`~gpflow_fastvi.datasets.loaders`)."""
