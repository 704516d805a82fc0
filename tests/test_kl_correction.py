"""The paper-reproduction job of KLCorrected: ``gpflow-fastvi kl-correction`` and its module."""

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from gpflow_fastvi.benchmarks import kl_correction
from gpflow_fastvi.benchmarks.choices import RAETSCH_SETS
from gpflow_fastvi.cli import main
from gpflow_fastvi.datasets import BENCHMARK_SETS

from .test_cli import PNG_SIGNATURE


def test_every_set_of_the_experiment_is_in_the_data_registry() -> None:
    assert {spec.benchmark for spec in RAETSCH_SETS.values()} <= set(BENCHMARK_SETS)


def test_banana_split_zero_is_realisation_one_and_later_splits_are_random() -> None:
    X, Y, X_test, Y_test = kl_correction.load_split("banana", 0)
    assert X.shape == (400, 2) and X_test.shape == (4900, 2)
    assert int(Y.sum()) == 217 and int(Y_test.sum()) == 2376 - 217
    X1, _, X1_test, _ = kl_correction.load_split("banana", 1)
    assert X1.shape == (400, 2) and X1_test.shape == (4900, 2)
    assert not np.allclose(np.sort(X1[:, 0]), np.sort(X[:, 0]))


def test_sets_that_are_not_bundled_need_a_data_directory(capsys, monkeypatch) -> None:
    monkeypatch.delenv("GPFLOW_FASTVI_DATA", raising=False)
    assert main(["kl-correction", "--datasets", "heart"]) == 1
    assert "--data-dir" in capsys.readouterr().err


def test_unknown_data_set_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["kl-correction", "--datasets", "banana,titanic"])
    assert exit_info.value.code == 2
    assert "titanic" in capsys.readouterr().err


def _heart_like(N: int = 270, D: int = 13, seed: int = 0) -> str:
    """A near-linear problem shaped like Rätsch's heart file (label ±1 last)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=N) > 0, 1.0, -1.0)
    return "\n".join(",".join(f"{v!r}" for v in x) + f",{label}" for x, label in zip(X, y)) + "\n"


@pytest.mark.slow
def test_a_short_run_writes_json_table_and_figure(tmp_path: Path, fake_benchmark) -> None:
    data_dir = fake_benchmark("heart", {"raetsch_bsvm/Processed_Heart.data": _heart_like()})
    out = tmp_path / "out"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(
            ["kl-correction", "--datasets", "heart", "--data-dir", str(data_dir)]
            + ["--splits", "2", "--max-iter", "4", "--out", str(out)]
        )
    assert status == 0
    results = json.loads((out / "results.json").read_text())
    runs = results["datasets"]["heart"]
    assert [(r["split"], r["bound"]) for r in runs] == [
        (0, "kl_corrected"),
        (0, "standard"),
        (1, "kl_corrected"),
        (1, "standard"),
    ]
    for r in runs:
        assert r["iterations"] == len(r["trace"]) <= 4
        assert 0.0 <= r["test_error"] < 0.3  # a near-linear problem: well below chance
    table = (out / "table.md").read_text()
    assert table.splitlines()[2].startswith("| heart | 2 |")
    assert (out / "figure2_heart.png").read_bytes().startswith(PNG_SIGNATURE)


def test_summary_reports_medians_and_speedups() -> None:
    def run(bound, split, iterations, seconds, error):
        return dict(
            bound=bound,
            split=split,
            iterations=iterations,
            seconds=seconds,
            converged=True,
            final_bound=-1.0,
            test_error=error,
            trace=[],
        )

    results = {
        "datasets": {
            "heart": [
                run("kl_corrected", 0, 10, 1.0, 0.10),
                run("standard", 0, 100, 20.0, 0.12),
                run("kl_corrected", 1, 20, 2.0, 0.20),
                run("standard", 1, 100, 10.0, 0.22),
            ]
        }
    }
    (row,) = kl_correction.summary_rows(results)
    np.testing.assert_allclose(row["error_klc"], (15.0, np.std([10.0, 20.0], ddof=1)))
    assert row["iteration_ratio"] == pytest.approx(7.5)  # median of 10 and 5
    assert row["speedup"] == pytest.approx(12.5)  # median of 20 and 5
    assert row["paper_speedup"] == 18.1
