"""
``gpflow-fastvi bench``: every model of the package and the GPflow baselines, on the benchmark sets,
for the same wall-clock budget each, traced into one JSON file.

Each (data set, repeat) is one :func:`gpflow_fastvi.benchmarks.compare.run_comparison`: the same
kernel start, the same k-means inducing inputs (trained by every method, or held fixed by every
method) and the logit link for every method (see
:mod:`gpflow_fastvi.benchmarks.methods`). Repeat ``r`` uses seed ``r`` for the 80/20 split of sets without
their own test part, for k-means and for the mini-batch order.

``"SVGP + Adam"`` in ``models`` runs SVGP + Adam at every learning rate of ``adam_grid`` (which
always holds the default 0.01); the report picks the best of the grid and also shows the default
(see :mod:`gpflow_fastvi.benchmarks.report`).

The file ``results.json`` is rewritten (atomically) after every finished method, so an interrupted
or killed run leaves valid JSON for what finished, and running the same command again skips what is
already there.
"""

import argparse
import json
import os
import platform
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..datasets import BENCHMARK_SETS
from ..datasets.loaders import PathLike
from .choices import (
    ADAM_GRID,
    ADAM_NAME,
    BATCH_SIZE,
    BENCH_INDUCING,
    DEFAULT_ADAM_LR,
    MULTICLASS_METHODS,
    TIME_BUDGET,
    adam_learning_rate,
    adam_method,
)
from .choices import BENCH_DEFAULT_SETS as DEFAULT_DATASETS
from .choices import BENCH_MODELS as MODELS
from .cli_args import shows_progress
from .result import LearningCurve, json_ready

RESULTS_FILE = "results.json"
FORMAT_VERSION = 1

Record = Dict[str, Any]


def _methods(models: Sequence[str], adam_grid: Sequence[float]) -> List[str]:
    """The method names to run: ``"SVGP + Adam"`` becomes one method per grid rate."""
    unknown = [model for model in models if model not in MODELS]
    if unknown:
        raise ValueError(
            f"unknown model(s) {', '.join(map(repr, unknown))}; choose from {', '.join(MODELS)}"
        )
    if not models:
        raise ValueError(f"models is empty; choose from {', '.join(MODELS)}")
    if any(not rate > 0.0 for rate in adam_grid):
        raise ValueError(f"Adam learning rates must be positive; got {list(adam_grid)}")
    rates = sorted(set(adam_grid) | {DEFAULT_ADAM_LR})
    methods: List[str] = []
    for model in dict.fromkeys(models):
        methods += [adam_method(rate) for rate in rates] if model == ADAM_NAME else [model]
    return methods


def _takes(method: str, num_classes: int) -> bool:
    """Whether ``method`` can run on ``num_classes`` classes."""
    return (
        num_classes == 2 or method in MULTICLASS_METHODS or adam_learning_rate(method) is not None
    )


def machine_description() -> Dict[str, Any]:
    """What the runs ran on: CPU count, processor, TensorFlow devices and versions."""
    import gpflow
    import tensorflow as tf

    return {
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "devices": [device.name for device in tf.config.list_logical_devices()],
        "gpus": [
            tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")
        ],
        "tensorflow": tf.__version__,
        "gpflow": gpflow.__version__,
        "python": platform.python_version(),
    }


def load_results(out: PathLike) -> Dict[str, Any]:
    """
    The contents of ``out/results.json``: ``{"format", "machine", "runs"}``, where each run is
    ``{"dataset", "repeat", "method", "settings", "rows"}`` (rows as in
    :mod:`gpflow_fastvi.benchmarks.result`).

    :raises FileNotFoundError: if there is no results file in ``out``.
    :raises ValueError: if the file is not a results file of this format.
    """
    path = os.path.join(out, RESULTS_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: no such file; run `gpflow-fastvi bench --out {os.fspath(out)}` first"
        )
    with open(path, encoding="utf-8") as f:
        try:
            results = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(results, dict) or results.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: not a gpflow-fastvi bench results file (format {FORMAT_VERSION})"
        )
    return results


def _save(results: Dict[str, Any], out: PathLike) -> None:
    """Write ``results`` to ``out/results.json`` via a temporary file, so it is never half-written."""
    path = os.path.join(out, RESULTS_FILE)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    os.replace(partial, path)


_COMPARABLE = ("num_inducing", "time_budget", "batch_size", "n_train", "n_test", "train_inducing")
"""The settings a run already in the results file must share with this one; a record without
``train_inducing`` was made when every method held the inducing inputs fixed."""


def run_bench(
    datasets: Sequence[str] = DEFAULT_DATASETS,
    models: Sequence[str] = MODELS,
    *,
    out: PathLike,
    num_inducing: int = BENCH_INDUCING,
    time_budget: float = TIME_BUDGET,
    repeats: int = 1,
    data_dir: Optional[PathLike] = None,
    adam_grid: Sequence[float] = ADAM_GRID,
    batch_size: int = BATCH_SIZE,
    progress: bool = False,
    train_inducing: bool = True,
    log: Callable[[str], None] = lambda _: None,
) -> Dict[str, Any]:
    """
    Run ``models`` on ``datasets``, ``repeats`` times each, and keep ``out/results.json`` up to
    date after every method (see the module docstring). Runs already in that file are skipped.

    :param datasets: names from :data:`gpflow_fastvi.datasets.BENCHMARK_SETS`.
    :param models: names from :data:`MODELS` (that is,
        :data:`~gpflow_fastvi.benchmarks.choices.BENCH_MODELS`). On a multi-class set (letter,
        satimage) only those of :data:`~gpflow_fastvi.benchmarks.choices.MULTICLASS_METHODS` run,
        each with its C-class likelihood; the others are skipped with a line of ``log``.
    :param num_inducing: M, k-means inducing inputs (fewer if the training set is smaller).
    :param time_budget: training seconds per method and run.
    :param data_dir: the data directory (default ``$GPFLOW_FASTVI_DATA``; banana needs none).
    :param adam_grid: SVGP + Adam's learning rates (0.01 is always added).
    :param batch_size: the mini-batch size of the stochastic methods.
    :param log: called with a line of progress text.
    :return: the results, as written.
    :raises ValueError: for unknown names, bad settings, or a results file in ``out`` made with
        other settings.
    :raises MissingDataError, ChecksumError: before any training, if a set's files are missing or
        damaged.
    """
    from ..datasets import load_benchmark
    from .compare import run_comparison

    methods = _methods(models, adam_grid)
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1; got {repeats}")
    if not time_budget > 0.0:
        raise ValueError(f"time_budget must be positive; got {time_budget}")
    splits = {}
    for name in dict.fromkeys(datasets):  # fail on missing or damaged files before training
        splits[name] = load_benchmark(name, data_dir, seed=0)

    os.makedirs(out, exist_ok=True)
    if os.path.isfile(os.path.join(out, RESULTS_FILE)):
        results = load_results(out)
    else:
        results = {"format": FORMAT_VERSION, "machine": machine_description(), "runs": []}
    done = {(run["dataset"], run["repeat"], run["method"]): run for run in results["runs"]}

    for name in splits:
        for repeat in range(repeats):
            split = splits[name] if repeat == 0 else load_benchmark(name, data_dir, seed=repeat)
            N = split.X_train.shape[0]
            m = min(num_inducing, N)
            settings = {
                "num_inducing": m,
                "time_budget": float(time_budget),
                "batch_size": batch_size,
                "n_train": N,
                "n_test": split.X_test.shape[0],
                "d": split.X_train.shape[1],
                "seed": repeat,
                "train_inducing": train_inducing,
                "num_classes": BENCHMARK_SETS[name].num_classes,
            }
            for method in methods:
                previous = done.get((name, repeat, method))
                if previous is not None and any(
                    previous["settings"].get(key, False) != settings[key] for key in _COMPARABLE
                ):
                    raise ValueError(
                        f"{os.path.join(out, RESULTS_FILE)} holds {method} on {name} (repeat "
                        f"{repeat}) with other settings ({previous['settings']}); choose another "
                        "--out, or delete that file, to run with these"
                    )
            num_classes = BENCHMARK_SETS[name].num_classes
            runnable = [method for method in methods if _takes(method, num_classes)]
            if repeat == 0 and len(runnable) < len(methods):
                log(
                    f"{name}: {num_classes} classes; skipping "
                    f"{', '.join(m for m in methods if m not in runnable)} (two classes only)"
                )
            todo = [method for method in runnable if (name, repeat, method) not in done]
            if not todo:
                log(f"{name}, repeat {repeat}: all {len(runnable)} methods already in the results")
                continue
            log(
                f"{name}, repeat {repeat}: n = {N}, n_test = {settings['n_test']}, "
                f"d = {settings['d']}, m = {settings['num_inducing']}, "
                f"{time_budget:g} s each for {', '.join(todo)}"
            )

            def finished(
                method: str,
                rows: LearningCurve,
                name: str = name,
                repeat: int = repeat,
                settings: Dict[str, Any] = settings,
            ) -> None:
                record: Record = {
                    "dataset": name,
                    "repeat": repeat,
                    "method": method,
                    "settings": settings,
                    "rows": json_ready(rows),
                }
                results["runs"].append(record)
                done[(name, repeat, method)] = record
                _save(results, out)
                final = rows[-1]
                log(
                    f"  {method}: accuracy {final['test_accuracy']:.4f}, NLL "
                    f"{final['test_nll']:.4f} after {final['time']:.1f} s"
                    + (f" (failed at {final['failed']})" if "failed" in final else "")
                )

            run_comparison(
                *split,
                methods=todo,
                num_inducing=m,
                time_budget=time_budget,
                adam_lr=DEFAULT_ADAM_LR,
                batch_size=batch_size,
                seed=repeat,
                progress=progress,
                train_inducing=train_inducing,
                num_classes=num_classes,
                on_method_done=finished,
            )
    _save(results, out)
    return results


def command(args: argparse.Namespace) -> int:
    """
    ``gpflow-fastvi bench``: :func:`run_bench` with the command's arguments. Interrupted, it says
    that the results file holds every method that finished.
    """
    try:
        run_bench(
            args.datasets,
            args.models,
            out=args.out,
            num_inducing=args.inducing,
            time_budget=args.time_budget,
            repeats=args.repeats,
            data_dir=args.data_dir,
            adam_grid=args.adam_grid,
            batch_size=args.batch_size,
            progress=shows_progress(args.progress),
            train_inducing=not args.fixed_inducing,
            log=lambda line: print(line, flush=True),
        )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"{os.path.join(args.out, RESULTS_FILE)} holds every method that finished; run the "
            "same command again to go on"
        ) from None
    path = os.path.join(args.out, RESULTS_FILE)
    print(f"Wrote {path}; draw it with: gpflow-fastvi plot {args.out}")
    return 0


__all__ = [
    "ADAM_GRID",
    "DEFAULT_ADAM_LR",
    "DEFAULT_DATASETS",
    "MODELS",
    "RESULTS_FILE",
    "command",
    "load_results",
    "machine_description",
    "run_bench",
]
