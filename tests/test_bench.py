"""``gpflow-fastvi bench``, ``plot`` and ``scaling``: what they run, what they write, how they fail."""

import contextlib
import io
import json
from pathlib import Path

import gpflow
import numpy as np
import pytest

from gpflow_fastvi import VIJJ
from gpflow_fastvi.benchmarks import choices, compare, report, runs, scaling
from gpflow_fastvi.benchmarks.result import ComparisonResult
from gpflow_fastvi.cli import main
from gpflow_fastvi.datasets import BENCHMARK_SETS, DATA_DIR_VARIABLE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _no_data_dir_from_the_environment(monkeypatch):
    monkeypatch.delenv(DATA_DIR_VARIABLE, raising=False)


def _quiet_main(argv):
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        status = main(argv)
    return status, stdout.getvalue()


def test_the_default_sets_and_methods_are_ones_the_jobs_know() -> None:
    assert set(choices.BENCH_DEFAULT_SETS) <= set(BENCHMARK_SETS)
    assert set(choices.FAST_METHODS) | {choices.ADAM_NAME} <= set(runs.MODELS)


def test_svgp_adam_runs_its_grid_with_the_default_rate_always_in_it() -> None:
    methods = runs._methods(["VIJJ", "SVGP + Adam", "VIJJ"], [0.1, 0.001])
    assert methods == [
        "VIJJ",
        "SVGP + Adam (lr 0.001)",
        "SVGP + Adam (lr 0.01)",
        "SVGP + Adam (lr 0.1)",
    ]
    assert [choices.adam_learning_rate(m) for m in methods] == [None, 0.001, 0.01, 0.1]
    with pytest.raises(ValueError, match="unknown model"):
        runs._methods(["SVGP"], [0.01])
    with pytest.raises(ValueError, match="positive"):
        runs._methods(["SVGP + Adam"], [0.0])


def test_a_multi_class_set_runs_only_the_methods_that_take_its_classes(
    fake_benchmark, monkeypatch, rng
) -> None:
    X = rng.normal(size=(18, 36))  # satimage's 36 features
    labels = np.arange(18) % 6 + 1  # satimage's classes 1..6
    text = "".join(
        f"{label} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(x)) + "\n"
        for x, label in zip(X, labels)
    )
    data_dir = fake_benchmark(
        "satimage", {"satimage/satimage.scale.training": text, "satimage/satimage.scale.t": text}
    )
    seen = {}

    def fake_run_comparison(X_train, Y_train, X_test, Y_test, *, methods, on_method_done, **kw):
        seen.update(methods=methods, num_classes=kw["num_classes"], labels=np.unique(Y_train))
        for method in methods:
            on_method_done(method, [_row(0.0, 0.2, 1.8), _row(1.0, 0.8, 0.6)])

    monkeypatch.setattr(compare, "run_comparison", fake_run_comparison)
    lines = []
    results = runs.run_bench(
        ["satimage"],
        ["VIJJ", "VITaylor", "PolyaGammaSVGP", "SVGP + Scipy"],
        out=data_dir.parent / "out",
        data_dir=data_dir,
        adam_grid=[0.01],
        log=lines.append,
    )
    assert seen["methods"] == ["VITaylor", "PolyaGammaSVGP", "SVGP + Scipy"]
    assert seen["num_classes"] == 6
    np.testing.assert_array_equal(seen["labels"], np.arange(6.0))
    assert any("6 classes; skipping VIJJ (two classes only)" in line for line in lines)
    assert {run["settings"]["num_classes"] for run in results["runs"]} == {6}
    table = report.dataset_table("satimage", report.collect(results)["satimage"])
    assert "6 classes (SVGP + Scipy with GPflow's MultiClass" in table
    assert "VIJJ" not in table and "| **VITaylor** |" in table


def _row(time, accuracy, nll):
    return {"iteration": 0, "time": time, "test_accuracy": accuracy, "test_nll": nll, "elbo": -1.0}


def _results(n_train=500, repeats=1):
    """Hand-made traces: VIJJ on target at 1 s, Scipy at 4 s, Adam's best rate (0.1) at 20 s."""
    settings = {"num_inducing": 10, "time_budget": 30.0, "batch_size": 100, "n_train": n_train}
    settings.update({"n_test": 100, "d": 2, "seed": 0})
    traces = {
        "VIJJ": [_row(0, 0.5, 0.69), _row(1.0, 0.90, 0.25)],
        "SVGP + Scipy": [_row(0, 0.5, 0.69), _row(2.0, 0.80, 0.40), _row(4.0, 0.90, 0.25)],
        "SVGP + Adam (lr 0.001)": [_row(0, 0.5, 0.69), _row(30.0, 0.70, 0.55)],
        "SVGP + Adam (lr 0.01)": [_row(0, 0.5, 0.69), _row(30.0, 0.88, 0.29)],
        "SVGP + Adam (lr 0.1)": [_row(0, 0.5, 0.69), _row(20.0, 0.90, 0.25), _row(30, 0.9, 0.25)],
    }
    return {
        "format": runs.FORMAT_VERSION,
        "machine": {"cpu_count": 2, "processor": "test"},
        "runs": [
            {"dataset": "toy", "repeat": r, "method": m, "settings": settings, "rows": rows}
            for r in range(repeats)
            for m, rows in traces.items()
        ],
    }


def test_the_report_takes_the_best_adam_rate_and_computes_ratios() -> None:
    (repeat,) = report.collect(_results())["toy"]
    assert repeat.best_adam_lr == 0.1
    assert list(repeat.comparison.traces) == [
        "VIJJ",
        "SVGP + Scipy",
        report.BEST_ADAM,
        report.DEFAULT_ADAM,
    ]
    repeats = [repeat]
    assert report.ratio(repeats, "VIJJ", "SVGP + Scipy") == (pytest.approx(0.25), 1)
    assert report.ratio(repeats, "VIJJ", report.BEST_ADAM) == (pytest.approx(0.05), 1)
    # Adam at 0.01 never gets within 0.01 of the best NLL: only a bound, from its 30 s run.
    assert report.ratio(repeats, "VIJJ", report.DEFAULT_ADAM) == (None, 0)
    assert report.ratio_bound(repeats, "VIJJ", report.DEFAULT_ADAM) == pytest.approx(1.0 / 30.0)
    table = report.dataset_table("toy", repeats)
    vijj = next(line for line in table.splitlines() if line.startswith("| **VIJJ**"))
    assert vijj.split(" | ")[4:] == ["1.00", "0.25", "0.05", "< 0.0333 |"]


def test_the_goals_use_adam_on_large_sets_and_scipy_on_small_ones() -> None:
    small = report.goals_table(report.collect(_results(n_train=500)))
    assert "| toy | VIJJ | ≤ 0.5× the time of SVGP + Scipy | 0.25× | yes |" in small
    large = report.goals_table(report.collect(_results(n_train=50_000)))
    assert f"| toy | VIJJ | ≥ 10× faster than {report.BEST_ADAM} | 20× | yes |" in large


def test_repeats_give_means_and_medians() -> None:
    text = report.markdown_report(_results(repeats=3))
    assert "3 repeats; best Adam learning rate 0.1, 0.1, 0.1" in text
    assert "| **VIJJ** | 0.9000 ± 0.0000 | 0.2500 ± 0.0000 | 1.0 | 1.00 |" in text


def test_plot_without_results_says_what_to_run(tmp_path: Path, capsys) -> None:
    assert main(["plot", str(tmp_path)]) == 1
    assert "gpflow-fastvi bench" in capsys.readouterr().err
    (tmp_path / "results.json").write_text("{not json")
    assert main(["plot", str(tmp_path)]) == 1
    assert "not valid JSON" in capsys.readouterr().err


def test_bench_fails_before_training_when_data_are_missing(tmp_path: Path, capsys) -> None:
    status = main(["bench", "--datasets", "banana,ijcnn1", "--out", str(tmp_path / "out")])
    assert status == 1
    assert "--data-dir" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_interrupted_bench_leaves_valid_json_for_what_finished(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    def interrupted_after_one_method(*args, methods, on_method_done, **kwargs):
        on_method_done(methods[0], [_row(0.0, 0.5, 0.69), _row(1.0, 0.9, 0.25)])
        raise KeyboardInterrupt

    monkeypatch.setattr(compare, "run_comparison", interrupted_after_one_method)
    out = tmp_path / "out"
    status = main(["bench", "--datasets", "banana", "--models", "VIJJ,VITaylor", "--out", str(out)])
    assert status == 130
    assert "run the same command again" in capsys.readouterr().err
    results = runs.load_results(out)
    assert [(r["dataset"], r["method"]) for r in results["runs"]] == [("banana", "VIJJ")]
    assert not list(out.glob("*.partial"))


@pytest.mark.slow
def test_bench_and_plot_on_banana(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [
        "bench",
        "--datasets",
        "banana",
        "--models",
        "VIJJ,KLCorrected,SVGP + Scipy,SVGP + Adam",
    ]
    argv += ["--adam-grid", "0.1", "--inducing", "10", "--time-budget", "1", "--out", str(out)]
    status, stdout = _quiet_main(argv)
    assert status == 0, stdout
    results = json.loads((out / "results.json").read_text())
    methods = [run["method"] for run in results["runs"]]
    assert methods == [
        "VIJJ",
        "KLCorrected",
        "SVGP + Scipy",
        "SVGP + Adam (lr 0.01)",
        "SVGP + Adam (lr 0.1)",
    ]
    for run in results["runs"]:
        assert run["settings"]["n_train"] == 4240 and run["settings"]["num_inducing"] == 10
        rows = run["rows"]
        assert rows[0]["time"] == 0.0 and len(rows) >= 2
        assert all(0.0 <= row["test_accuracy"] <= 1.0 and row["test_nll"] > 0 for row in rows)
    assert results["machine"]["cpu_count"] >= 1
    # VIJJ runs at least one whole outer iteration, whatever the budget: that reaches 0.85+ here.
    assert results["runs"][0]["rows"][-1]["test_accuracy"] > 0.85

    # Running it again skips what is there; other settings into the same folder are refused.
    status, stdout = _quiet_main(argv)
    assert status == 0 and "already in the results" in stdout
    assert len(json.loads((out / "results.json").read_text())["runs"]) == len(methods)
    assert main(argv[:-4] + ["--time-budget", "2", "--out", str(out)]) == 1

    status, stdout = _quiet_main(["plot", str(out)])
    assert status == 0
    for name in ("bench.png", "banana.png"):
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE)
    table = (out / "table.md").read_text()
    assert "### banana" in table and "| **VIJJ** |" in table and "| **KLCorrected** |" in table
    assert report.BEST_ADAM in table and "### Goals" in table


def test_the_scaling_update_is_the_same_in_batches(monkeypatch) -> None:
    """Large n is processed in batches; that must not change the update."""
    whole = scaling._model(300, 12)
    monkeypatch.setattr(scaling, "POINTS_PER_BATCH", 12 * 70)
    batched = scaling._model(300, 12)
    assert whole.batch_size is None and batched.batch_size == 70
    np.testing.assert_allclose(batched.update_sites(), whole.update_sites(), rtol=1e-10)
    np.testing.assert_allclose(batched.q_sqrt.numpy(), whole.q_sqrt.numpy(), rtol=1e-8, atol=1e-12)
    assert isinstance(whole, VIJJ) and isinstance(whole.kernel, gpflow.kernels.SquaredExponential)


@pytest.mark.slow
def test_scaling_writes_times_beside_the_matmul_floor(tmp_path: Path) -> None:
    argv = ["scaling", "--n", "200,400", "--m", "8", "--fixed-m", "8", "--fixed-n", "200"]
    status, stdout = _quiet_main(argv + ["--repeats", "1", "--out", str(tmp_path)])
    assert status == 0
    result = json.loads((tmp_path / "scaling.json").read_text())
    assert result["matmul_flops_per_second"] > 1e8
    assert [(row["n"], row["m"]) for row in result["rows"]] == [(200, 8), (400, 8)]
    for row in result["rows"]:
        assert row["seconds"] > 0.0
        floor = 2.0 * row["n"] * row["m"] ** 2 / result["matmul_flops_per_second"]
        assert row["floor_seconds"] == pytest.approx(floor)
        assert row["times_floor"] == pytest.approx(row["seconds"] / floor)
    assert "| 400 | 8 |" in (tmp_path / "scaling.md").read_text()
    assert (tmp_path / "scaling.png").read_bytes().startswith(PNG_SIGNATURE)


def test_a_diverged_adam_rate_is_never_the_best_and_sets_no_target() -> None:
    results = _results()
    for run in results["runs"]:
        if run["method"] == "SVGP + Adam (lr 0.1)":
            run["rows"][-1] = _row(30.0, 0.95, float("nan"))  # NaN NLL, as Adam at 0.1 on ijcnn1
    (repeat,) = report.collect(results)["toy"]
    assert repeat.best_adam_lr == 0.01
    comparison = repeat.comparison
    assert comparison.targets == (pytest.approx(0.895), pytest.approx(0.26))
    diverged = ComparisonResult(
        traces={"VIJJ": results["runs"][0]["rows"], "SVGP + Adam": [_row(1.0, 0.95, np.nan)]}
    )
    assert diverged.targets == (pytest.approx(0.895), pytest.approx(0.26))


def test_time_to_target_is_the_first_row_at_both_targets() -> None:
    from experiments.routes import time_to_target

    curve = [
        {"time": 1.0, "test_accuracy": 0.95, "test_nll": 0.30},
        {"time": 2.0, "test_accuracy": 0.90, "test_nll": 0.10},  # NLL there, accuracy not
        {"time": 3.0, "test_accuracy": 0.96, "test_nll": 0.12},
    ]
    assert time_to_target(curve, accuracy=0.95, nll=0.15) == 3.0
    assert time_to_target(curve, accuracy=0.97, nll=0.15) is None


@pytest.mark.slow
def test_routes_comparison_runs_every_route_and_the_baseline(banana_split) -> None:
    from experiments import routes

    X, Y, X_test, Y_test = banana_split
    curves = routes.compare_routes((X[:300], Y[:300], X_test[:200], Y_test[:200]), 0.5, 1)
    assert set(curves) == {f"{m} ({r})" for m, r in routes.ROUTES} | {choices.SCIPY_NAME}
    lines = routes.summary(curves)
    assert lines[0].startswith("target") and len(lines) == 1 + len(curves)


@pytest.mark.slow
def test_swap_compares_gpflows_loops_with_fit(banana_split) -> None:
    """On a small problem Scipy on the closure reaches fit's answer (the swap's promise), and the
    table marks a loop beyond the tolerance."""
    from experiments import swap

    X, Y, X_test, Y_test = banana_split
    rows = swap.compare_loops(
        (X[:300], Y[:300]),
        (X_test[:300], Y_test[:300]),
        num_inducing=15,
        steps=5,
        batch=100,
        learning_rate=0.05,
        models=("VITaylor",),
        repeats=2,
        report=lambda line: None,
    )
    assert [row.loop for row in rows] == list(swap.LOOPS)
    assert [row.runs for row in rows] == [1, 1, 2]  # only the shuffled loop is repeated
    low, high = rows[2].accuracy_range
    assert low <= rows[2].test_accuracy <= high
    fitted, scipy = rows[0], rows[1]
    assert abs(scipy.test_accuracy - fitted.test_accuracy) <= 0.005
    assert abs(scipy.test_nll - fitted.test_nll) <= 0.01
    worse = rows[2]._replace(test_accuracy=fitted.test_accuracy - 0.01)
    table = swap.markdown([fitted, scipy, worse])
    assert "| yes |" in table[3] and "| **no** |" in table[4]
    assert all(np.isfinite(row.elbo) and row.elbo < 0 for row in rows)
    assert abs(scipy.elbo - fitted.elbo) < 1e-3  # Scipy on the closure reaches fit's ELBO
    with pytest.raises(ValueError, match="models must be among"):
        swap.compare_loops(
            (X, Y), (X, Y), num_inducing=5, steps=1, batch=10, learning_rate=0.1, models=("SVGP",)
        )
    with pytest.raises(ValueError, match="include 'fit'"):
        swap.compare_loops(
            (X, Y), (X, Y), num_inducing=5, steps=1, batch=10, learning_rate=0.1, loops=("Adam",)
        )


@pytest.mark.slow
def test_soak_runs_report_finite_values_and_the_steps_asked_for(banana_split) -> None:
    from experiments import soak

    X, Y, _, _ = banana_split
    results = soak.soak(
        (X[:400], Y[:400]),
        svi_steps=300,
        collapsed_iterations=4,
        batch=50,
        num_inducing=10,
        report=lambda line: None,
    )
    assert [r.model for r in results] == ["PolyaGammaSVGP", "VIJJ"]
    assert [r.steps for r in results] == [300, 4]
    for result in results:
        assert result.all_finite and np.isfinite(result.last_objective)
        assert result.memory_at_end_mib > 0
    assert results[1].last_objective > results[1].first_objective  # vi-JJ's bound rose
