"""The ``gpflow-fastvi`` console script, run in-process through :func:`gpflow_fastvi.cli.main`."""

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from gpflow_fastvi.benchmarks import compare
from gpflow_fastvi.benchmarks.choices import (
    ALL_METHODS,
    DEFAULT_METHODS,
    DEFAULT_MULTICLASS_METHODS,
    MULTICLASS_METHODS,
)
from gpflow_fastvi.benchmarks.result import ComparisonResult
from gpflow_fastvi.cli import build_parser, main

METHODS = DEFAULT_METHODS  # what a plain `compare` runs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_two_rings(path: Path, N: int = 300, seed: int = 0) -> Path:
    """A 2-D data set a linear classifier cannot solve: class 1 inside a circle, class 0 outside."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, size=(N, 2)) * [1.0, 10.0]  # unequal scales: tests standardising
    inside = (X[:, 0] ** 2 + (X[:, 1] / 10.0) ** 2) < 3.0
    labels = np.where(inside, 1, -1)
    rows = [f"{label},{x0!r},{x1!r}" for label, (x0, x1) in zip(labels, X)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(name="compare_run", scope="module")
def _compare_run(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, object]:
    """One short ``compare`` run (a few seconds per method), shared by the tests below."""
    folder = tmp_path_factory.mktemp("cli")
    data = write_two_rings(folder / "rings.csv")
    out = folder / "out"
    stdout = io.StringIO()  # capsys is per test; this fixture is per module
    with contextlib.redirect_stdout(stdout):
        status = main(
            ["compare", "--train", str(data), "--inducing", "10", "--time-budget", "3"]
            + ["--out", str(out)]
        )
    return {"status": status, "stdout": stdout.getvalue(), "out": out}


@pytest.mark.slow
def test_compare_succeeds_and_prints_the_data_summary(compare_run: Dict[str, object]) -> None:
    assert compare_run["status"] == 0
    assert "n_train = 240, n_test = 60, d = 2, m = 10" in str(compare_run["stdout"])


@pytest.mark.slow
def test_compare_says_which_label_is_the_positive_class(compare_run: Dict[str, object]) -> None:
    assert "labels: -1.0 -> 0, 1.0 -> 1 (the positive class)" in str(compare_run["stdout"])


@pytest.mark.slow
def test_compare_output_has_no_tensorflow_start_up_log(tmp_path: Path) -> None:
    """The console script, as a user runs it: TensorFlow's C++ notices stay out of its output."""
    data = write_two_rings(tmp_path / "rings.csv", N=60)
    result = subprocess.run(
        [sys.executable, "-m", "gpflow_fastvi.cli", "compare", "--train", str(data)]
        + ["--inducing", "5", "--time-budget", "1", "--methods", "VIJJ", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in __import__("os").environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    assert result.returncode == 0, result.stderr
    for noise in ("cuda", "oneDNN", "cpu_feature_guard"):
        assert noise not in result.stdout + result.stderr


def test_version(capsys) -> None:
    from gpflow_fastvi import __version__

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert (
        stop.value.code == 0 and capsys.readouterr().out.strip() == f"gpflow-fastvi {__version__}"
    )


def test_label_column_applies_to_the_csv_of_a_csv_and_libsvm_pair(tmp_path: Path) -> None:
    from gpflow_fastvi.datasets import load_train_test

    train = tmp_path / "train.csv"
    train.write_text("0.5,1.0,1\n-0.5,2.0,-1\n0.1,3.0,1\n")
    test = tmp_path / "test.svm"
    test.write_text("+1 1:0.2\n-1 2:1.5\n")  # its label is first
    X, Y, X_test, Y_test, classes = load_train_test(train, test, -1, return_classes=True)
    assert classes == (-1.0, 1.0) and X_test.shape == (2, 2)
    np.testing.assert_array_equal(Y_test[:, 0], [1.0, 0.0])
    np.testing.assert_array_equal(X_test, [[0.2, 0.0], [0.0, 1.5]])


@pytest.mark.slow
def test_compare_prints_a_table_row_per_method(compare_run: Dict[str, object]) -> None:
    lines = str(compare_run["stdout"]).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Method"))
    table_rows = lines[header + 2 : header + 2 + len(METHODS)]
    assert [line[: len(name)] for line, name in zip(table_rows, METHODS)] == list(METHODS)
    for line in table_rows:
        accuracy = float(line.split()[-5])  # columns: name..., acc, NLL, ELBO, time, to target
        assert 0.0 <= accuracy <= 1.0


@pytest.mark.slow
def test_compare_prints_time_ratios(compare_run: Dict[str, object]) -> None:
    stdout = str(compare_run["stdout"])
    assert "Time to target, VIConcave / SVGP + Scipy:" in stdout
    assert "Time to target, VIConcave / SVGP + Adam:" in stdout


@pytest.mark.slow
def test_compare_writes_png_and_json(compare_run: Dict[str, object]) -> None:
    out = Path(str(compare_run["out"]))
    png, js = out / "comparison.png", out / "comparison.json"
    stdout = str(compare_run["stdout"])
    assert f"Wrote {png}" in stdout and f"Wrote {js}" in stdout
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    result = json.loads(js.read_text())
    assert set(result["methods"]) == set(METHODS)
    assert result["settings"]["n_train"] == 240 and result["settings"]["num_inducing"] == 10
    for method in METHODS:
        rows = result["methods"][method]["rows"]
        assert len(rows) >= 2, method  # the start, and at least one training step
        times = [r["time"] for r in rows]
        assert times[0] == 0.0 and times == sorted(times), method
        assert {"test_accuracy", "test_nll", "elbo"} <= set(rows[-1]), method


@pytest.mark.slow
def test_compare_methods_learn_something(compare_run: Dict[str, object]) -> None:
    result = json.loads((Path(str(compare_run["out"])) / "comparison.json").read_text())
    for method in METHODS:
        rows = result["methods"][method]["rows"]
        assert rows[-1]["test_nll"] < rows[0]["test_nll"], method  # below log 2, the start


def test_test_file_without_train_file_is_a_usage_error(tmp_path: Path, capsys) -> None:
    test_file = write_two_rings(tmp_path / "test.csv", N=20)
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--test", str(test_file)])
    assert exit_info.value.code == 2
    assert "--test needs --train" in capsys.readouterr().err


def test_unreadable_data_is_reported_without_training(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "ragged.csv"
    bad.write_text("0,1.0,2.0\n1,2.0\n0,3.0,1.0\n")
    assert main(["compare", "--train", str(bad), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "gpflow-fastvi: error:" in err and "ragged.csv" in err
    assert not (tmp_path / "out").exists()


def test_missing_data_file_is_reported(tmp_path: Path, capsys) -> None:
    assert main(["compare", "--train", str(tmp_path / "absent.csv")]) == 1
    assert "No such data file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, value", [("--inducing", "0"), ("--time-budget", "-1"), ("--test-fraction", "1.5")]
)
def test_invalid_option_values_are_usage_errors(option: str, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", option, value])
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err


def test_a_command_is_required(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


def test_the_cli_and_its_help_load_no_tensorflow() -> None:
    """``gpflow-fastvi --help`` must answer at once: no TensorFlow or GPflow at import."""
    code = (
        "import sys\n"
        "from gpflow_fastvi.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = [name for name in ('tensorflow', 'gpflow') if name in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.slow
def test_subpackages_are_reachable_as_attributes_of_a_fresh_import() -> None:
    """``fv.training.svi_plan`` works whatever was imported before; unknown names still fail."""
    code = (
        "import gpflow_fastvi as fv\n"
        "assert callable(fv.training.svi_plan) and fv.datasets.load_benchmark\n"
        "try:\n"
        "    fv.no_such_name\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('fv.no_such_name resolved')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),  # resolved once the data's classes are known
        ("all", ALL_METHODS),
        (" ALL ", ALL_METHODS),
        (
            "PolyaGammaSVGP,SVGP + Adam,SVGP + NatGrad + Adam",
            ("PolyaGammaSVGP", "SVGP + Adam", "SVGP + NatGrad + Adam"),
        ),
        ("svgp + scipy , vitaylor,VITaylor", ("SVGP + Scipy", "VITaylor")),
    ],
)
def test_methods_option_is_parsed(value: object, expected: tuple) -> None:
    argv = ["compare"] + ([] if value is None else ["--methods", str(value)])
    assert build_parser().parse_args(argv).methods == expected


@pytest.mark.parametrize("value", ["VIJJ,Adam", "", "VIJJ,", "all,VIJJ"])
def test_unknown_methods_are_usage_errors(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--methods", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--methods" in err and "SVGP + NatGrad + Adam" in err  # names the valid choices


def test_help_lists_the_methods(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "--methods" in help_text and "'all'" in help_text
    assert all(name in help_text for name in ALL_METHODS)


def test_methods_reach_run_comparison(tmp_path: Path, monkeypatch, capsys) -> None:
    seen = {}

    def fake_run_comparison(*arrays, methods, **settings):
        seen["methods"] = methods
        start = {"iteration": 0, "time": 0.0, "test_accuracy": 0.5, "test_nll": 0.7, "elbo": -9.0}
        end = {**start, "iteration": 1, "time": 1.0}
        return ComparisonResult(traces={method: [start, end] for method in methods})

    monkeypatch.setattr(compare, "run_comparison", fake_run_comparison)
    data = write_two_rings(tmp_path / "rings.csv", N=40)
    argv = ["compare", "--train", str(data), "--inducing", "5", "--out", str(tmp_path / "out")]
    assert main(argv + ["--methods", "PolyaGammaSVGP,SVGP + NatGrad + Adam"]) == 0
    assert seen["methods"] == ("PolyaGammaSVGP", "SVGP + NatGrad + Adam")
    out = capsys.readouterr().out
    assert "per method (PolyaGammaSVGP, SVGP + NatGrad + Adam)" in out
    assert "Time to target, PolyaGammaSVGP / SVGP + NatGrad + Adam:" in out


class _Stream(io.StringIO):
    """A standard error that says whether it is a terminal."""

    def __init__(self, terminal: bool):
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.parametrize(
    "flags, terminal, shown",
    [
        ([], True, True),  # a person waits at a terminal: bars by default
        ([], False, False),  # a log file or a pipe: quiet
        (["--no-progress"], True, False),
        (["--progress"], False, True),
    ],
)
def test_compare_shows_progress_on_a_terminal_unless_told(
    flags, terminal, shown, tmp_path: Path, monkeypatch, capsys
) -> None:
    seen = {}

    def fake_run_comparison(*arrays, methods, progress, **settings):
        seen["progress"] = progress
        start = {"iteration": 0, "time": 0.0, "test_accuracy": 0.5, "test_nll": 0.7, "elbo": -9.0}
        end = {**start, "iteration": 1, "time": 1.0}
        return ComparisonResult(traces={method: [start, end] for method in methods})

    monkeypatch.setattr(compare, "run_comparison", fake_run_comparison)
    monkeypatch.setattr(sys, "stderr", _Stream(terminal))
    data = write_two_rings(tmp_path / "rings.csv", N=40)
    argv = ["compare", "--train", str(data), "--inducing", "5", "--out", str(tmp_path / "out")]
    assert main(argv + flags) == 0
    assert seen["progress"] is shown


@pytest.mark.slow
def test_inducing_sweep_prints_a_row_per_placement_and_m(capsys) -> None:
    """`gpflow-fastvi inducing banana`, small: every placement trains, and the greedy selection's
    trace term is below random rows' (it shrinks exactly that)."""
    status = main(["inducing", "banana", "--m", "6", "--placements", "random,greedy,greedy rounds"])
    assert status == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 6 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["random", "greedy", "greedy rounds"]
    trace = {row.split("|")[2].strip(): float(row.split("|")[3]) for row in rows}
    assert trace["greedy"] < trace["random"]
    accuracy = [float(row.split("|")[7]) for row in rows]
    assert all(a > 0.6 for a in accuracy)


def test_inducing_sweep_refuses_more_inducing_inputs_than_points(capsys) -> None:
    assert main(["inducing", "banana", "--m", "100000", "--placements", "kmeans"]) == 1
    assert "between 1 and the number of data points" in capsys.readouterr().err


def test_an_interrupted_bench_says_what_it_kept(tmp_path: Path, monkeypatch, capsys) -> None:
    from gpflow_fastvi.benchmarks import runs

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runs, "run_bench", interrupted)
    assert main(["bench", "--datasets", "banana", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "interrupted:" in err and "holds every method that finished" in err


def write_three_classes(path: Path, N: int = 60, seed: int = 0) -> Path:
    """Three classes named by strings, set by the angle of a 2-D point."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    names = np.array(["sand", "grass", "water"])[np.digitize(np.arctan2(X[:, 1], X[:, 0]), [-1, 1])]
    path.write_text("".join(f"{x0!r},{x1!r},{name}\n" for (x0, x1), name in zip(X, names)))
    return path


def _fake_comparison(seen: Dict[str, object]):
    def fake_run_comparison(X_train, Y_train, X_test, Y_test, *, methods, **settings):
        seen.update(methods=methods, labels=np.unique(Y_train), **settings)
        start = {"iteration": 0, "time": 0.0, "test_accuracy": 0.3, "test_nll": 1.1}
        end = {**start, "iteration": 1, "time": 1.0}
        return ComparisonResult(
            traces={method: [start, end] for method in methods},
            settings={"num_classes": settings["num_classes"]},
        )

    return fake_run_comparison


@pytest.fixture(name="three_class_compare")
def _three_class_compare(tmp_path: Path, monkeypatch):
    """``compare``'s arguments on a file of three classes, and what the faked comparison saw."""
    seen: Dict[str, object] = {}
    monkeypatch.setattr(compare, "run_comparison", _fake_comparison(seen))
    data = write_three_classes(tmp_path / "land.csv")
    return ["compare", "--train", str(data), "--label-column", "-1", "--inducing", "5"], seen


def test_a_file_of_three_classes_runs_the_multi_class_comparison(
    three_class_compare, tmp_path: Path, capsys
) -> None:
    argv, seen = three_class_compare
    assert main(argv + ["--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "labels: 3 classes, 'grass' -> 0, 'sand' -> 1, 'water' -> 2" in out
    assert seen["methods"] == DEFAULT_MULTICLASS_METHODS and seen["num_classes"] == 3
    np.testing.assert_array_equal(seen["labels"], [0.0, 1.0, 2.0])
    assert "Likelihoods: VIConcave: Softmax(3); SVGP + Scipy: MultiClass(3)" in out
    assert "ELBO: not shown" in out and "n/a" in out  # no ELBO column for C classes

    assert main(argv + ["--methods", "all", "--out", str(tmp_path / "all")]) == 0
    assert seen["methods"] == MULTICLASS_METHODS  # every method that takes C classes


def test_a_binary_method_on_three_classes_names_the_multi_class_ones(
    three_class_compare, tmp_path: Path, capsys
) -> None:
    argv, seen = three_class_compare
    argv = argv + ["--methods", "VIJJ,VITaylor"]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "'VIJJ' cannot take 3 classes" in err and "'PolyaGammaSVGP'" in err
    assert not seen


def test_a_class_only_in_the_random_test_part_still_counts(
    three_class_compare, tmp_path: Path, capsys
) -> None:
    """C comes from both parts, as run_comparison infers it, not from the training part alone."""
    from gpflow_fastvi.datasets import train_test_split

    argv, seen = three_class_compare
    rows = Path(argv[2]).read_text().splitlines()
    rows[-1] = rows[-1].rsplit(",", 1)[0] + ",zzz"  # a fourth class, on the last row alone
    Path(argv[2]).write_text("\n".join(rows) + "\n")
    last = np.arange(len(rows), dtype=float)[:, None]
    seed = next(
        s for s in range(100) if train_test_split(last, last, 0.2, seed=s)[3].max() == len(rows) - 1
    )
    assert main(argv + ["--seed", str(seed), "--out", str(tmp_path / "out")]) == 0
    assert seen["num_classes"] == 4 and seen["labels"].max() < 3  # not in the training part
