"""The benchmark registry: checksums, splits, standardisation, and the errors for missing data."""

import os
import socket
from pathlib import Path

import numpy as np
import pytest

from gpflow_fastvi.datasets import (
    BANANA_SHA256,
    BENCHMARK_SETS,
    DATA_DIR_VARIABLE,
    ChecksumError,
    DatasetError,
    MissingDataError,
    benchmark_files,
    load_banana,
    load_benchmark,
    load_ijcnn1,
    resolve_data_dir,
)
from gpflow_fastvi.datasets.registry import sha256_of

# n_train, n_test, d of each set, as the MANIFEST gives them (80/20 sets: round(0.2 n) held out).
MANIFEST_SHAPES = {
    "banana": (4240, 1060, 2),
    "german": (800, 200, 24),
    "svmguide1": (3089, 4000, 4),
    "ijcnn1": (49_990, 91_701, 22),
    "a9a": (32_561, 16_281, 123),
    "breast_cancer": (210, 53, 9),
    "diabetis": (614, 154, 8),
    "heart": (216, 54, 13),
    "german_raetsch": (800, 200, 20),
    "letter": (16_000, 4_000, 16),
    "satimage": (4_435, 2_000, 36),
}
MANIFEST_CLASSES = {"letter": 26, "satimage": 6}
"""The multi-class sets and their C; every other set is binary."""

REAL_DATA_DIR = os.environ.get(DATA_DIR_VARIABLE) or None
"""The real benchmark files, if the environment names them (the tests below unset the variable)."""


@pytest.fixture(autouse=True)
def _no_data_dir_from_the_environment(monkeypatch):
    monkeypatch.delenv(DATA_DIR_VARIABLE, raising=False)


def _libsvm_text(X: np.ndarray, labels: np.ndarray) -> str:
    return "".join(
        f"{label:g} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(x) if v != 0.0) + "\n"
        for x, label in zip(X, labels)
    )


def test_the_registry_holds_the_issue_sets_with_sha256_checksums() -> None:
    assert set(MANIFEST_SHAPES) == set(BENCHMARK_SETS)
    for name, benchmark in BENCHMARK_SETS.items():
        assert benchmark.name == name
        for data_file in benchmark.files:
            assert len(data_file.sha256) == 64 and int(data_file.sha256, 16) >= 0
            assert not os.path.isabs(data_file.path) and "\\" not in data_file.path
    assert BENCHMARK_SETS["banana"].train.sha256 == BANANA_SHA256


def test_bundled_ijcnn1_is_the_benchmark_training_file_with_the_manifest_counts() -> None:
    from importlib import resources

    bundled = resources.files("gpflow_fastvi.datasets").joinpath("data", "ijcnn1.trn.bz2")
    with resources.as_file(bundled) as path:
        assert sha256_of(path) == BENCHMARK_SETS["ijcnn1"].train.sha256
    X, Y = load_ijcnn1()
    assert X.shape == (49_990, 22) and X.dtype == np.float64 and Y.shape == (49_990, 1)
    assert set(np.unique(Y)) == {0.0, 1.0} and int(Y.sum()) == 4_853  # MANIFEST: +1: 4,853


def test_banana_is_bundled_verified_split_80_20_and_standardised_on_train() -> None:
    (path,) = benchmark_files("banana")  # no data directory needed
    assert sha256_of(path) == BANANA_SHA256
    X_train, Y_train, X_test, Y_test = load_benchmark("banana")
    assert (X_train.shape, X_test.shape) == ((4240, 2), (1060, 2))
    np.testing.assert_allclose(X_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X_train.std(axis=0), 1.0, rtol=1e-12)
    assert np.abs(X_test.mean(axis=0)).max() > 1e-3  # scaled by the training part only
    # The split is a partition of the bundled rows, fixed by the seed.
    X, Y = load_banana()
    raw = load_benchmark("banana", standardised=False)
    assert len(raw.X_train) + len(raw.X_test) == len(X)
    together = np.sort(np.concatenate([raw.X_train, raw.X_test]), axis=0)
    np.testing.assert_array_equal(together, np.sort(X, axis=0))
    np.testing.assert_array_equal(load_benchmark("banana", seed=0).X_test, X_test)
    assert not np.array_equal(load_benchmark("banana", seed=1).X_test, X_test)
    assert set(np.unique(Y_train)) == {0.0, 1.0}


def test_a_set_that_is_not_bundled_needs_a_data_directory_and_never_downloads(
    monkeypatch,
) -> None:
    def no_network(*args, **kwargs):
        raise AssertionError("a data loader tried to open a network connection")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(MissingDataError, match="--data-dir") as error:
        load_benchmark("ijcnn1")
    assert DATA_DIR_VARIABLE in str(error.value) and "ijcnn1/ijcnn1.trn.bz2" in str(error.value)
    assert isinstance(error.value, FileNotFoundError)


def test_a_missing_file_is_named_with_the_data_directory(tmp_path: Path) -> None:
    with pytest.raises(MissingDataError) as error:
        load_benchmark("svmguide1", tmp_path)
    message = str(error.value)
    assert os.path.join(str(tmp_path), "svmguide1", "svmguide1") in message
    assert "svmguide1/svmguide1.t" in message and "Nothing is downloaded" in message


def test_the_environment_variable_names_the_data_directory(monkeypatch, tmp_path) -> None:
    assert resolve_data_dir() is None
    monkeypatch.setenv(DATA_DIR_VARIABLE, str(tmp_path))
    assert resolve_data_dir() == str(tmp_path)
    assert resolve_data_dir(tmp_path / "other") == str(tmp_path / "other")  # the argument wins
    with pytest.raises(MissingDataError, match=str(tmp_path)):
        load_benchmark("heart")


def test_a_damaged_file_fails_its_checksum(fake_benchmark, rng) -> None:
    X = rng.normal(size=(50, 3))
    text = "\n".join(",".join(map(repr, x)) + f",{s}" for x, s in zip(X, [1, -1] * 25)) + "\n"
    data_dir = fake_benchmark("heart", {"raetsch_bsvm/Processed_Heart.data": text})
    assert load_benchmark("heart", data_dir).X_train.shape == (40, 3)
    path = data_dir / "raetsch_bsvm" / "Processed_Heart.data"
    path.write_text(text.replace("1\n", "-1\n", 1))  # one label flipped
    with pytest.raises(ChecksumError, match="sha256 is [0-9a-f]{64}, expected") as error:
        load_benchmark("heart", data_dir)
    assert str(path) in str(error.value)


def test_an_own_test_file_is_the_test_part_and_is_scaled_by_the_training_part(
    fake_benchmark, rng
) -> None:
    X_train = rng.normal(loc=3.0, scale=2.0, size=(40, 4))
    X_test = rng.normal(loc=5.0, scale=1.0, size=(30, 4))
    data_dir = fake_benchmark(
        "svmguide1",
        {
            "svmguide1/svmguide1": _libsvm_text(X_train, rng.integers(0, 2, 40)),
            "svmguide1/svmguide1.t": _libsvm_text(X_test, rng.integers(0, 2, 30)),
        },
    )
    split = load_benchmark("svmguide1", data_dir, seed=7)  # the seed plays no part
    mean, scale = X_train.mean(axis=0), X_train.std(axis=0)
    np.testing.assert_allclose(split.X_train, (X_train - mean) / scale, rtol=1e-12)
    np.testing.assert_allclose(split.X_test, (X_test - mean) / scale, rtol=1e-12)
    np.testing.assert_array_equal(
        load_benchmark("svmguide1", data_dir, seed=0).X_test, split.X_test
    )


def test_a_set_whose_test_part_follows_its_training_rows(fake_benchmark, rng, monkeypatch) -> None:
    import dataclasses

    X = rng.normal(size=(25, 3))
    data_dir = fake_benchmark("a9a", {"a9a/a9a_plus_a9a.t.xz": _libsvm_text(X, [1, -1] * 12 + [1])})
    monkeypatch.setitem(
        BENCHMARK_SETS, "a9a", dataclasses.replace(BENCHMARK_SETS["a9a"], test_from_row=20)
    )
    split = load_benchmark("a9a", data_dir, standardised=False)  # rows 20: are the test part
    assert split.X_train.shape == (20, 123)  # padded to a9a's 123 features
    np.testing.assert_array_equal(split.X_train[:, :3], X[:20])
    np.testing.assert_array_equal(split.X_test[:, :3], X[20:])
    assert not split.X_train[:, 3:].any()


def test_unknown_names_list_the_sets() -> None:
    with pytest.raises(KeyError, match="banana"):
        load_benchmark("titanic")


@pytest.mark.skipif(
    REAL_DATA_DIR is None, reason=f"needs the benchmark files (${DATA_DIR_VARIABLE})"
)
@pytest.mark.parametrize("name", sorted(MANIFEST_SHAPES))
def test_the_real_files_verify_and_have_the_manifest_shapes(name: str) -> None:
    split = load_benchmark(name, REAL_DATA_DIR)
    n_train, n_test, d = MANIFEST_SHAPES[name]
    assert split.X_train.shape == (n_train, d) and split.X_test.shape == (n_test, d)
    C = MANIFEST_CLASSES.get(name, 2)
    assert BENCHMARK_SETS[name].num_classes == C
    assert set(np.unique(split.Y_train)) == set(range(C))


@pytest.mark.skipif(
    REAL_DATA_DIR is None, reason=f"needs the benchmark files (${DATA_DIR_VARIABLE})"
)
def test_the_multi_class_sets_have_the_manifest_class_counts() -> None:
    satimage = load_benchmark("satimage", REAL_DATA_DIR)  # MANIFEST: train counts per class
    np.testing.assert_array_equal(
        np.bincount(satimage.Y_train[:, 0].astype(int)), [1072, 479, 961, 415, 470, 1038]
    )
    letter = load_benchmark("letter", REAL_DATA_DIR)  # 734-813 rows per letter in all 20,000
    counts = np.bincount(np.concatenate([letter.Y_train, letter.Y_test])[:, 0].astype(int))
    assert counts.size == 26 and counts.min() == 734 and counts.max() == 813


def test_a_multi_class_set_maps_its_labels_in_increasing_order(
    fake_benchmark, rng, monkeypatch
) -> None:
    import dataclasses

    X = rng.normal(size=(30, 2))
    text = "".join(f"{c},{x0!r},{x1!r}\n" for c, (x0, x1) in zip("CAB" * 10, X))
    data_dir = fake_benchmark("letter", {"letter/letter-recognition.data": text})
    monkeypatch.setitem(
        BENCHMARK_SETS,
        "letter",
        dataclasses.replace(BENCHMARK_SETS["letter"], test_from_row=24, num_classes=3),
    )
    split = load_benchmark("letter", data_dir, standardised=False)
    np.testing.assert_array_equal(split.Y_train[:3, 0], [2.0, 0.0, 1.0])  # C, A, B
    np.testing.assert_array_equal(split.X_test, X[24:])


def test_a_set_with_another_number_of_classes_than_its_entry_is_refused(
    fake_benchmark, rng
) -> None:
    X = rng.normal(size=(6, 2))
    text = "".join(f"{c},{x0!r},{x1!r}\n" for c, (x0, x1) in zip("ABABAB", X))
    data_dir = fake_benchmark("letter", {"letter/letter-recognition.data": text})
    with pytest.raises(DatasetError, match="holds 2 classes, but the letter set has 26"):
        load_benchmark("letter", data_dir)
