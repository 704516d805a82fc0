"""ComparisonResult summaries on hand-made traces (no training), and run_comparison input checks."""

import json
from pathlib import Path

import numpy as np
import pytest

from gpflow_fastvi.compare import (
    ADAM_NAME,
    SCIPY_NAME,
    VIJJ_NAME,
    ComparisonResult,
    _TrainingClock,
    run_comparison,
)


def row(time: float, accuracy: float, nll: float, elbo: float = -100.0) -> dict:
    return {"iteration": 0, "time": time, "test_accuracy": accuracy, "test_nll": nll, "elbo": elbo}


@pytest.fixture(name="result")
def _result() -> ComparisonResult:
    # Best final accuracy 0.90 (VIJJ), best final NLL 0.20 (Scipy): so the target is
    # accuracy >= 0.895 and NLL <= 0.21.
    return ComparisonResult(
        traces={
            VIJJ_NAME: [row(0.0, 0.5, 0.69), row(1.0, 0.896, 0.25), row(2.0, 0.90, 0.205)],
            SCIPY_NAME: [row(0.0, 0.5, 0.69), row(4.0, 0.89, 0.20), row(8.0, 0.895, 0.20)],
            ADAM_NAME: [row(0.0, 0.5, 0.69), row(3.0, 0.85, 0.30)],
        }
    )


def test_targets_come_from_the_best_final_values_over_methods(result: ComparisonResult) -> None:
    accuracy_target, nll_target = result.targets
    assert accuracy_target == pytest.approx(0.895)
    assert nll_target == pytest.approx(0.21)


def test_time_to_target_needs_accuracy_and_nll_at_once(result: ComparisonResult) -> None:
    assert result.time_to_target(VIJJ_NAME) == 2.0  # at 1.0 s the accuracy is on target, NLL not
    assert result.time_to_target(SCIPY_NAME) == 8.0  # at 4.0 s the NLL is on target, accuracy not
    assert result.time_to_target(ADAM_NAME) is None


def test_time_ratios_divide_vijj_by_each_baseline(result: ComparisonResult) -> None:
    ratios = result.time_ratios()
    assert ratios == {SCIPY_NAME: pytest.approx(0.25), ADAM_NAME: None}


def test_table_lists_methods_finals_and_ratios(result: ComparisonResult) -> None:
    table = result.format_table()
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["Method", "Test", "acc"]
    vijj_line = next(line for line in lines if line.startswith(VIJJ_NAME))
    assert vijj_line.split() == [VIJJ_NAME, "0.9000", "0.2050", "-100.00", "2.00", "2.00"]
    assert "not reached" in next(line for line in lines if line.startswith(ADAM_NAME))
    assert f"Time to target, {VIJJ_NAME} / {SCIPY_NAME}: 0.25 (4x faster)" in table
    assert f"Time to target, {VIJJ_NAME} / {ADAM_NAME}: n/a" in table


def test_markdown_table_is_a_pipe_table(result: ComparisonResult) -> None:
    lines = result.format_table(markdown=True).splitlines()
    assert lines[0].startswith("| Method |") and lines[1].startswith("|---|")
    assert sum(line.startswith(f"| {name} |") for line in lines for name in result.traces) == 3


def test_json_holds_rows_and_summaries_with_numpy_values(tmp_path: Path) -> None:
    traces = {VIJJ_NAME: [row(0.0, 0.5, 0.69)], SCIPY_NAME: [row(0.0, 0.5, 0.69)]}
    traces[VIJJ_NAME].append({**row(1.0, 0.8, 0.4), "objective": np.float64(-3.5)})
    result = ComparisonResult(traces=traces, settings={"n_train": np.int64(10)})
    path = tmp_path / "result.json"
    result.save_json(path)
    loaded = json.loads(path.read_text())
    assert loaded["settings"] == {"n_train": 10}
    assert loaded["methods"][VIJJ_NAME]["rows"][1]["objective"] == -3.5
    assert loaded["methods"][VIJJ_NAME]["time_to_target"] == 1.0
    assert loaded["methods"][SCIPY_NAME]["time_to_target"] is None
    assert loaded["time_ratios"] == {f"{VIJJ_NAME} / {SCIPY_NAME}": None}


def test_save_writes_png_and_json(result: ComparisonResult, tmp_path: Path) -> None:
    png_path, json_path = result.save(tmp_path / "new_folder", title="test")
    assert Path(png_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(json.loads(Path(json_path).read_text())["methods"]) == set(result.traces)


def test_clock_leaves_out_paused_time() -> None:
    clock = _TrainingClock()
    with clock.paused():
        sum(range(3_000_000))  # takes well over the clock's resolution
    outside = clock.elapsed()
    assert 0.0 <= outside < 0.01


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(num_inducing=0), "num_inducing"),
        (dict(time_budget=0.0), "time_budget"),
        (dict(adam_lr=-1.0), "adam_lr"),
        (dict(batch_size=0), "batch_size"),
    ],
)
def test_run_comparison_refuses_bad_settings(change: dict, message: str) -> None:
    X = np.zeros((10, 2))
    Y = np.zeros((10, 1))
    with pytest.raises(ValueError, match=message):
        run_comparison(X, Y, X, Y, **{"num_inducing": 5, **change})


def test_run_comparison_refuses_labels_outside_0_1() -> None:
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="train labels must be 0 or 1"):
        run_comparison(X, np.array([[-1.0], [1.0], [1.0], [-1.0]]), X, np.zeros((4, 1)))
