"""Loaders, label mapping, splitting and standardising in :mod:`gpflow_fastvi.datasets`."""

import bz2
import hashlib
import lzma
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from gpflow_fastvi.datasets import (
    BANANA_SHA256,
    DatasetError,
    detect_format,
    load_banana,
    load_csv,
    load_file,
    load_libsvm,
    load_train_test,
    standardise,
    train_test_split,
)


@pytest.fixture(name="rng")
def _rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


def write_dense(path: Path, X: np.ndarray, labels, label_column: int = 0, sep: str = ",") -> Path:
    """Write rows of features with the label inserted at ``label_column``."""
    lines = []
    for x, label in zip(X, labels):
        fields = [repr(float(v)) for v in x]
        position = label_column if label_column >= 0 else len(fields) + 1 + label_column
        fields.insert(position, str(label))
        lines.append(sep.join(fields))
    path.write_text("\n".join(lines) + "\n")
    return path


def libsvm_text(X: np.ndarray, labels) -> str:
    """LIBSVM lines, one-based indices, zero features left out as the format allows."""
    lines = []
    for x, label in zip(X, labels):
        pairs = [f"{j + 1}:{v!r}" for j, v in enumerate(x) if v != 0.0]
        lines.append(" ".join([str(label)] + pairs))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# The bundled banana set
# --------------------------------------------------------------------------------------------------


def test_banana_has_documented_shape_and_class_counts() -> None:
    X, Y = load_banana()
    assert X.shape == (5300, 2) and Y.shape == (5300, 1)
    assert X.dtype == np.float64 and Y.dtype == np.float64
    assert set(np.unique(Y)) == {0.0, 1.0}
    assert int(np.sum(Y == 0.0)) == 2924  # label -1 in the file
    assert int(np.sum(Y == 1.0)) == 2376  # label +1 in the file
    assert np.all(np.isfinite(X))


def test_banana_first_row_maps_minus_one_to_zero() -> None:
    X, Y = load_banana()  # the file's first line is "-1.0,-3.0898387,-0.83168647"
    np.testing.assert_array_equal(X[0], [-3.0898387, -0.83168647])
    assert Y[0, 0] == 0.0


def test_bundled_banana_file_matches_documented_checksum() -> None:
    data = resources.files("gpflow_fastvi.datasets").joinpath("data")
    digest = hashlib.sha256(data.joinpath("banana_data.csv").read_bytes()).hexdigest()
    assert digest == BANANA_SHA256
    assert BANANA_SHA256 in data.joinpath("ATTRIBUTION.md").read_text(encoding="utf-8")


def test_load_banana_returns_fresh_arrays() -> None:
    X, Y = load_banana()
    X[:] = 0.0
    Y[:] = 0.0
    X_again, Y_again = load_banana()
    assert np.any(X_again != 0.0) and np.any(Y_again != 0.0)


# --------------------------------------------------------------------------------------------------
# CSV / dense text
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("label_column", [0, 1, 3, -1, -2])
@pytest.mark.parametrize("sep", [",", " ", "\t", ";"], ids=["comma", "space", "tab", "semicolon"])
def test_csv_round_trip(
    tmp_path: Path, rng: np.random.Generator, label_column: int, sep: str
) -> None:
    X = rng.normal(size=(30, 3))
    labels = rng.choice([-1, 1], size=30)
    path = write_dense(tmp_path / "data.txt", X, labels, label_column, sep)
    X_loaded, Y_loaded = load_csv(path, label_column)
    np.testing.assert_array_equal(X_loaded, X)  # repr() round-trips float64 exactly
    np.testing.assert_array_equal(Y_loaded[:, 0], (labels == 1).astype(float))
    assert Y_loaded.shape == (30, 1)


def test_csv_header_is_detected_and_skipped(tmp_path: Path, rng: np.random.Generator) -> None:
    X = rng.normal(size=(5, 2))
    path = write_dense(tmp_path / "data.csv", X, [0, 1, 1, 0, 1], label_column=-1)
    path.write_text("x1,x2,label\n" + path.read_text())
    X_loaded, Y_loaded = load_csv(path, -1)
    np.testing.assert_array_equal(X_loaded, X)
    np.testing.assert_array_equal(Y_loaded[:, 0], [0, 1, 1, 0, 1])


def test_csv_all_numeric_header_needs_header_true(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("0,1,2\n1,0.5,0.25\n2,1.5,1.25\n")  # header "0,1,2" looks like data
    with pytest.raises(DatasetError, match="found 3 label values"):  # read as data: label 0 too
        load_csv(path)
    X, Y = load_csv(path, header=True)
    np.testing.assert_array_equal(X, [[0.5, 0.25], [1.5, 1.25]])
    np.testing.assert_array_equal(Y[:, 0], [0.0, 1.0])


def test_csv_skips_blank_and_comment_lines_and_reads_crlf(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"# a comment\r\n1,2.0\r\n\r\n-1,3.0\r\n")
    X, Y = load_csv(path)
    np.testing.assert_array_equal(X, [[2.0], [3.0]])
    np.testing.assert_array_equal(Y[:, 0], [1.0, 0.0])


@pytest.mark.parametrize(
    "raw_labels, expected",
    [
        ([-1, 1, 1, -1], [0, 1, 1, 0]),
        ([0, 1, 1, 0], [0, 1, 1, 0]),
        ([1, 2, 2, 1], [0, 1, 1, 0]),  # UCI style: the larger value (2) is the positive class
        ([5.5, -3, -3, 5.5], [1, 0, 0, 1]),
        (["g", "h", "h", "g"], [0, 1, 1, 0]),  # non-numeric labels compare as strings
        (["UP", "DOWN", "DOWN", "UP"], [1, 0, 0, 1]),
    ],
)
def test_two_label_values_map_larger_to_one(tmp_path: Path, raw_labels, expected) -> None:
    X = np.arange(8.0).reshape(4, 2)
    path = write_dense(tmp_path / "data.csv", X, raw_labels, label_column=-1)
    _, Y = load_csv(path, -1)
    np.testing.assert_array_equal(Y[:, 0], expected)


# --------------------------------------------------------------------------------------------------
# LIBSVM
# --------------------------------------------------------------------------------------------------


def test_libsvm_round_trip_with_sparse_zeros(tmp_path: Path, rng: np.random.Generator) -> None:
    X = rng.normal(size=(20, 4))
    X[rng.random(size=X.shape) < 0.4] = 0.0
    X[:, -1] = 0.0
    X[0, -1] = 1.5  # so the largest index is 4
    labels = rng.choice([-1, 1], size=20)
    path = tmp_path / "data.svm"
    path.write_text(libsvm_text(X, labels))
    X_loaded, Y_loaded = load_libsvm(path)
    np.testing.assert_array_equal(X_loaded, X)
    np.testing.assert_array_equal(Y_loaded[:, 0], (labels == 1).astype(float))
    assert X_loaded.dtype == np.float64 and isinstance(X_loaded, np.ndarray)


def test_libsvm_n_features_pads_missing_trailing_features(tmp_path: Path) -> None:
    path = tmp_path / "data.svm"
    path.write_text("+1 1:0.5\n-1 2:1.5\n")
    assert load_libsvm(path)[0].shape == (2, 2)
    X, _ = load_libsvm(path, n_features=5)
    np.testing.assert_array_equal(X, [[0.5, 0, 0, 0, 0], [0, 1.5, 0, 0, 0]])


@pytest.mark.parametrize("opener, suffix", [(bz2.open, ".bz2"), (lzma.open, ".xz")])
def test_compressed_libsvm_is_read(tmp_path: Path, opener, suffix: str) -> None:
    X = np.array([[1.0, 2.0], [3.0, 0.0], [0.0, 4.0]])
    path = tmp_path / f"data{suffix}"
    with opener(path, "wt") as f:
        f.write(libsvm_text(X, [1, -1, 1]))
    assert detect_format(path) == "libsvm"
    X_loaded, Y_loaded = load_file(path)
    np.testing.assert_array_equal(X_loaded, X)
    np.testing.assert_array_equal(Y_loaded[:, 0], [1.0, 0.0, 1.0])


def test_missing_scikit_learn_gives_install_hint(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "data.svm"
    path.write_text("+1 1:0.5\n-1 1:1.5\n")
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # makes the import fail
    with pytest.raises(ImportError, match=r'pip install "gpflow-fastvi\[bench\]"'):
        load_libsvm(path)


# --------------------------------------------------------------------------------------------------
# Format detection
# --------------------------------------------------------------------------------------------------


def test_load_file_chooses_format_by_extension_and_content(tmp_path: Path) -> None:
    X = np.array([[1.0, 2.0], [3.0, 4.0]])
    libsvm = tmp_path / "train.txt"
    libsvm.write_text(libsvm_text(X, [1, -1]))
    dense = write_dense(tmp_path / "train.data", X, [1, -1], sep=" ")
    csv = write_dense(tmp_path / "train.csv", X, [1, -1])
    assert [detect_format(p) for p in (libsvm, dense, csv)] == ["libsvm", "csv", "csv"]
    for path in (libsvm, dense, csv):
        X_loaded, Y_loaded = load_file(path)
        np.testing.assert_array_equal(X_loaded, X)
        np.testing.assert_array_equal(Y_loaded[:, 0], [1.0, 0.0])


def test_load_file_rejects_label_column_for_libsvm(tmp_path: Path) -> None:
    path = tmp_path / "train.svm"
    path.write_text("+1 1:0.5\n-1 1:1.5\n")
    with pytest.raises(DatasetError, match="LIBSVM"):
        load_file(path, label_column=-1)


def test_load_file_checks_n_features_of_dense_files(tmp_path: Path) -> None:
    path = write_dense(tmp_path / "data.csv", np.ones((2, 3)), [0, 1])
    with pytest.raises(DatasetError, match="n_features=2"):
        load_file(path, n_features=2)


# --------------------------------------------------------------------------------------------------
# Bad files
# --------------------------------------------------------------------------------------------------


def test_three_classes_are_refused(tmp_path: Path) -> None:
    path = write_dense(tmp_path / "three.csv", np.ones((3, 2)), [0, 1, 2])
    with pytest.raises(DatasetError, match="three.csv.*exactly two classes; found 3"):
        load_csv(path)


def test_three_classes_are_refused_in_libsvm(tmp_path: Path) -> None:
    path = tmp_path / "three.svm"
    path.write_text("1 1:0.5\n2 1:1.5\n3 1:2.5\n")
    with pytest.raises(DatasetError, match="three.svm.*exactly two classes; found 3"):
        load_libsvm(path)


def test_multiclass_maps_c_classes_to_0_to_c_minus_1_in_increasing_order(tmp_path: Path) -> None:
    X = np.arange(12.0).reshape(6, 2)
    path = write_dense(tmp_path / "three.csv", X, ["b", "c", "a", "c", "b", "a"])
    X_read, Y, classes = load_file(path, return_classes=True, multiclass=True)
    np.testing.assert_array_equal(X_read, X)
    np.testing.assert_array_equal(Y[:, 0], [1, 2, 0, 2, 1, 0])
    assert classes == ("a", "b", "c")
    numbers = tmp_path / "numbers.svm"
    numbers.write_text("10 1:0.5\n2 1:1.5\n7 1:2.5\n2 1:3.5\n")  # compared as numbers
    np.testing.assert_array_equal(load_libsvm(numbers, multiclass=True)[1][:, 0], [2, 0, 1, 0])
    two = write_dense(tmp_path / "two.csv", X, [-1, 1, 1, -1, 1, -1])  # two classes: as binary
    np.testing.assert_array_equal(load_csv(two, multiclass=True)[1], load_csv(two)[1])


def test_multiclass_test_labels_take_the_training_file_s_classes(tmp_path: Path) -> None:
    train = write_dense(tmp_path / "train.csv", np.ones((4, 2)), [3, 1, 2, 1])
    test = write_dense(tmp_path / "test.csv", np.ones((2, 2)), [2, 2])  # one class is fine
    *_, Y_test, classes = load_train_test(train, test, return_classes=True, multiclass=True)
    assert classes == (1.0, 2.0, 3.0)
    np.testing.assert_array_equal(Y_test[:, 0], [1, 1])
    unseen = write_dense(tmp_path / "unseen.csv", np.ones((2, 2)), [2, 5])
    with pytest.raises(DatasetError, match=r"unseen.csv: data row 2 has label 5.0.*1.0 \(-> 0\)"):
        load_train_test(train, unseen, multiclass=True)


def test_a_single_class_is_refused(tmp_path: Path) -> None:
    path = write_dense(tmp_path / "one.csv", np.ones((3, 2)), [1, 1, 1])
    with pytest.raises(DatasetError, match="one.csv.*only one class"):
        load_csv(path)


@pytest.mark.parametrize("bad_value", ["nan", "inf", "-inf"])
def test_non_finite_features_are_refused(tmp_path: Path, bad_value: str) -> None:
    path = tmp_path / "nan.csv"
    path.write_text(f"1,0.5,0.1\n-1,{bad_value},0.2\n")
    with pytest.raises(DatasetError, match="nan.csv: feature 0 of data row 2"):
        load_csv(path)


def test_non_finite_features_are_refused_in_libsvm(tmp_path: Path) -> None:
    path = tmp_path / "nan.svm"
    path.write_text("1 1:0.5\n-1 1:nan\n")
    with pytest.raises(DatasetError, match="nan.svm: feature 0 of data row 2"):
        load_libsvm(path)


def test_non_numeric_feature_is_refused_with_line_number(tmp_path: Path) -> None:
    path = tmp_path / "text.csv"
    path.write_text("1,0.5\n-1,0.7\n1,abc\n")
    with pytest.raises(
        DatasetError, match="text.csv: line 3 has a non-numeric feature value 'abc'"
    ):
        load_csv(path)


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n"])
@pytest.mark.parametrize("name", ["empty.csv", "empty.svm"])
def test_empty_files_are_refused(tmp_path: Path, content: str, name: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DatasetError, match=f"{name}: the file holds no data rows"):
        load_file(path)
    with pytest.raises(DatasetError, match=f"{name}: the file holds no data rows"):
        (load_csv if name.endswith(".csv") else load_libsvm)(path)


def test_ragged_rows_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("1,0.5,0.1\n-1,0.2\n")
    with pytest.raises(DatasetError, match="ragged.csv: line 2 has 2 fields but line 1 has 3"):
        load_csv(path)


def test_label_column_out_of_range_is_refused(tmp_path: Path) -> None:
    path = write_dense(tmp_path / "data.csv", np.ones((2, 2)), [0, 1])
    with pytest.raises(DatasetError, match="label column 3 is out of range"):
        load_csv(path, label_column=3)


@pytest.mark.parametrize("loader", [load_csv, load_libsvm, load_file, detect_format])
def test_missing_file_raises_file_not_found(tmp_path: Path, loader) -> None:
    path = tmp_path / "no_such_file.csv"
    with pytest.raises(FileNotFoundError, match="no_such_file.csv"):
        loader(path)


def test_errors_are_value_errors(tmp_path: Path) -> None:
    assert issubclass(DatasetError, ValueError)


# --------------------------------------------------------------------------------------------------
# Separate training and test files
# --------------------------------------------------------------------------------------------------


def test_train_test_files_share_the_training_classes(tmp_path: Path) -> None:
    train = write_dense(tmp_path / "train.csv", np.ones((4, 2)), [1, 2, 2, 1])
    test = write_dense(tmp_path / "test.csv", np.ones((2, 2)), [2, 2])  # a single class is fine
    X_train, Y_train, X_test, Y_test = load_train_test(train, test)
    np.testing.assert_array_equal(Y_train[:, 0], [0, 1, 1, 0])
    np.testing.assert_array_equal(Y_test[:, 0], [1, 1])
    assert X_train.shape == (4, 2) and X_test.shape == (2, 2)


def test_test_label_unknown_to_training_data_is_refused(tmp_path: Path) -> None:
    train = write_dense(tmp_path / "train.csv", np.ones((2, 2)), [-1, 1])
    test = write_dense(tmp_path / "test.csv", np.ones((2, 2)), [0, 1])
    with pytest.raises(DatasetError, match="test.csv: data row 1 has label 0.0"):
        load_train_test(train, test)


def test_libsvm_train_test_files_share_the_feature_count(tmp_path: Path) -> None:
    train = tmp_path / "train.svm"
    train.write_text("+1 1:0.5 3:1.0\n-1 2:1.5\n")
    test = tmp_path / "test.svm"
    test.write_text("+1 1:2.0\n-1 2:2.5\n")  # the largest index is 2, not 3
    _, _, X_test, _ = load_train_test(train, test)
    np.testing.assert_array_equal(X_test, [[2.0, 0.0, 0.0], [0.0, 2.5, 0.0]])


def test_train_test_files_with_different_widths_are_refused(tmp_path: Path) -> None:
    train = write_dense(tmp_path / "train.csv", np.ones((2, 2)), [0, 1])
    test = write_dense(tmp_path / "test.csv", np.ones((2, 3)), [0, 1])
    with pytest.raises(DatasetError, match="test.csv: has 3 features but the training file"):
        load_train_test(train, test)


# --------------------------------------------------------------------------------------------------
# Splitting and standardising
# --------------------------------------------------------------------------------------------------


def test_split_is_seeded_disjoint_and_complete(rng: np.random.Generator) -> None:
    N = 101
    X = np.column_stack([np.arange(N, dtype=float), rng.normal(size=N)])  # column 0 = row id
    Y = (np.arange(N) % 2).astype(float)[:, None]
    X_train, Y_train, X_test, Y_test = train_test_split(X, Y, test_fraction=0.3, seed=7)
    assert X_test.shape == (30, 2) and X_train.shape == (71, 2)
    train_ids, test_ids = X_train[:, 0].astype(int), X_test[:, 0].astype(int)
    assert not set(train_ids) & set(test_ids)
    assert sorted(np.concatenate([train_ids, test_ids])) == list(range(N))
    np.testing.assert_array_equal(Y_train[:, 0], train_ids % 2)  # rows stay paired with labels
    np.testing.assert_array_equal(Y_test[:, 0], test_ids % 2)

    again = train_test_split(X, Y, test_fraction=0.3, seed=7)
    for first, second in zip((X_train, Y_train, X_test, Y_test), again):
        np.testing.assert_array_equal(first, second)
    other = train_test_split(X, Y, test_fraction=0.3, seed=8)
    assert not np.array_equal(other[2], X_test)
    assert not np.array_equal(np.sort(X_test[:, 0]), X[:30, 0])  # shuffled, not the first rows


def test_split_leaves_caller_arrays_unchanged(rng: np.random.Generator) -> None:
    X, Y = rng.normal(size=(20, 2)), rng.integers(0, 2, size=(20, 1)).astype(float)
    X_copy, Y_copy = X.copy(), Y.copy()
    X_train, Y_train, X_test, Y_test = train_test_split(X, Y)
    X_train[:] = 0.0
    Y_test[:] = 5.0
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(Y, Y_copy)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_split_refuses_fractions_outside_0_1(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        train_test_split(np.ones((10, 1)), np.ones((10, 1)), test_fraction=fraction)


def test_split_refuses_mismatched_rows() -> None:
    with pytest.raises(ValueError, match="X has 10 rows but Y has 9"):
        train_test_split(np.ones((10, 1)), np.ones((9, 1)))


def test_standardise_uses_training_statistics_only(rng: np.random.Generator) -> None:
    X_train = rng.normal(loc=[3.0, -2.0], scale=[2.0, 0.5], size=(50, 2))
    X_test = rng.normal(loc=100.0, scale=10.0, size=(7, 2))  # far away: must not shift anything
    X_train_copy, X_test_copy = X_train.copy(), X_test.copy()
    Xs_train, Xs_test = standardise(X_train, X_test)
    np.testing.assert_allclose(Xs_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Xs_train.std(axis=0), 1.0, rtol=1e-12)
    expected = (X_test - X_train.mean(axis=0)) / X_train.std(axis=0)
    np.testing.assert_allclose(Xs_test, expected, rtol=1e-12)
    np.testing.assert_array_equal(X_train, X_train_copy)
    np.testing.assert_array_equal(X_test, X_test_copy)


def test_standardise_centres_constant_columns_without_dividing_by_zero() -> None:
    X_train = np.array([[1.0, 5.0], [3.0, 5.0]])
    X_test = np.array([[2.0, 7.0]])
    Xs_train, Xs_test = standardise(X_train, X_test)
    np.testing.assert_array_equal(Xs_train[:, 1], [0.0, 0.0])
    np.testing.assert_array_equal(Xs_test, [[0.0, 2.0]])
    assert np.all(np.isfinite(Xs_train)) and np.all(np.isfinite(Xs_test))


def test_standardise_refuses_different_widths() -> None:
    with pytest.raises(ValueError, match="X_train has 2 features but X_test has 3"):
        standardise(np.ones((3, 2)), np.ones((3, 3)))


# --------------------------------------------------------------------------------------------------
# Streaming a file lazily
# --------------------------------------------------------------------------------------------------


def _streamed(stream):
    batches = list(stream.dataset)
    return (
        np.concatenate([X.numpy() for X, _ in batches]),
        np.concatenate([Y.numpy() for _, Y in batches]),
        [int(X.shape[0]) for X, _ in batches],
    )


@pytest.mark.parametrize("opener, suffix", [(open, ""), (bz2.open, ".bz2")])
def test_a_streamed_libsvm_file_holds_the_rows_the_loader_reads(
    tmp_path: Path, rng: np.random.Generator, opener, suffix: str
) -> None:
    from gpflow_fastvi.datasets import stream_file

    X = rng.normal(size=(23, 4))
    X[rng.random(size=X.shape) < 0.4] = 0.0
    X[0, -1] = 1.5  # so the largest index is 4
    path = tmp_path / f"data.svm{suffix}"
    with opener(path, "wt") as f:
        f.write(libsvm_text(X, rng.choice([-1, 1], size=23)))
    stream = stream_file(path, batch_size=10)
    X_streamed, Y_streamed, sizes = _streamed(stream)
    X_loaded, Y_loaded = load_file(path)
    np.testing.assert_array_equal(X_streamed, X_loaded)
    np.testing.assert_array_equal(Y_streamed, Y_loaded)
    assert sizes == [10, 10, 3] and stream.num_data == 23 and stream.num_features == 4
    assert stream.classes == (-1.0, 1.0)
    assert _streamed(stream)[2] == sizes  # re-iterable: every pass reads the file again


def test_a_streamed_csv_file_holds_the_rows_the_loader_reads(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    from gpflow_fastvi.datasets import stream_file

    X = rng.normal(size=(17, 3))
    labels = rng.choice(["no", "yes"], size=17)
    path = write_dense(tmp_path / "data.csv", X, labels, label_column=-1)
    path.write_text("a,b,c,answer\n" + path.read_text())  # a header, detected and skipped
    stream = stream_file(path, batch_size=5, label_column=-1)
    X_streamed, Y_streamed, _ = _streamed(stream)
    X_loaded, Y_loaded = load_csv(path, label_column=-1)
    np.testing.assert_array_equal(X_streamed, X_loaded)
    np.testing.assert_array_equal(Y_streamed, Y_loaded)
    assert stream.classes == ("no", "yes")


def test_a_streamed_multi_class_file_holds_the_classes_the_loader_reads(tmp_path: Path) -> None:
    from gpflow_fastvi.datasets import stream_file

    X = np.arange(14.0).reshape(7, 2)
    path = write_dense(
        tmp_path / "land.csv", X, ["water", "sand", "grass", "sand", "water", "a", "b"]
    )
    stream = stream_file(path, batch_size=3, multiclass=True)
    X_streamed, Y_streamed, sizes = _streamed(stream)
    X_loaded, Y_loaded = load_csv(path, multiclass=True)
    np.testing.assert_array_equal(X_streamed, X_loaded)
    np.testing.assert_array_equal(Y_streamed, Y_loaded)
    assert stream.classes == ("a", "b", "grass", "sand", "water") and sizes == [3, 3, 1]
    test = write_dense(tmp_path / "test.csv", X[:2], ["sand", "a"])
    np.testing.assert_array_equal(
        _streamed(stream_file(test, classes=stream.classes))[1][:, 0], [3.0, 0.0]
    )
    with pytest.raises(DatasetError, match="pass multiclass=True"):
        stream_file(path)


def test_streaming_refuses_what_the_loaders_refuse(tmp_path: Path) -> None:
    from gpflow_fastvi.datasets import stream_file

    three = write_dense(tmp_path / "three.csv", np.ones((3, 2)), [0, 1, 2])
    with pytest.raises(DatasetError, match="exactly two classes"):
        stream_file(three)
    bad = write_dense(tmp_path / "bad.csv", np.array([[1.0, np.nan], [2.0, 3.0]]), [0, 1])
    with pytest.raises(DatasetError, match="finite"):
        stream_file(bad)
    with pytest.raises(DatasetError, match="none of the classes"):
        stream_file(write_dense(tmp_path / "test.csv", np.ones((2, 2)), [0, 5]), classes=(0.0, 1.0))
