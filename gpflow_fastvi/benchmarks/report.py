"""
``gpflow-fastvi plot``: figures and a Markdown table from a ``bench`` results folder.

For each data set and repeat the learning curves become a
:class:`~gpflow_fastvi.benchmarks.result.ComparisonResult`,
which defines the target (within 0.5 accuracy points of the best final test accuracy and within
0.01 of the best final test NLL, over the methods shown) and each method's time to reach it.

SVGP + Adam appears twice: at the best learning rate of its grid (:data:`BEST_ADAM`: the rate
with the lowest final test NLL, per repeat, which is the paper's protocol and favours the baseline,
since it is chosen on the test set) and at the plain default 0.01. The other rates of the grid stay
in ``results.json`` but take no part in the target.

With several repeats, accuracy and NLL are means (± standard deviation) and times and ratios are
medians over the repeats in which the method reached the target; ``k/R`` says in how many it did.
"""

import argparse
import os
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..datasets.loaders import PathLike
from .choices import (
    BASELINE_PREFIX,
    DEFAULT_ADAM_LR,
    FAST_METHODS,
    SCIPY_NAME,
    adam_learning_rate,
    adam_method,
)
from .figures import draw_traces, matplotlib_figure
from .result import ComparisonResult
from .runs import load_results

BEST_ADAM = "SVGP + Adam (best lr)"
"""The name under which the best rate of SVGP + Adam's grid is shown."""
DEFAULT_ADAM = adam_method(DEFAULT_ADAM_LR)
"""SVGP + Adam at its plain default learning rate."""

LARGE_N = 10_000
"""Training sets at least this large count as large for the goals (see :func:`goals_table`)."""
SPEEDUP_GOAL_LARGE = 10.0
"""Goal on large sets: the fast models reach the target ≥ 10× sooner than SVGP + Adam (best lr)."""
RATIO_GOAL_SMALL = 0.5
"""Goal on small sets: the fast models need ≤ 0.5× the time of SVGP + Scipy."""


def _final_score(rows: List[Dict[str, Any]]) -> Tuple[float, float]:
    """Sort key of a trace's end: lowest test NLL first (NaN or inf last), then best accuracy."""
    nll = rows[-1]["test_nll"]
    return (nll if np.isfinite(nll) else np.inf), -rows[-1]["test_accuracy"]


class Repeat:
    """One repeat on one data set: the methods shown, their comparison, and the best Adam rate."""

    def __init__(self, runs: List[Dict[str, Any]]):
        self.settings: Dict[str, Any] = runs[0]["settings"]
        grid = {
            rate: run["rows"]
            for run in runs
            if (rate := adam_learning_rate(run["method"])) is not None
        }
        self.best_adam_lr: Optional[float] = None
        traces: Dict[str, List[Dict[str, Any]]] = {}
        for run in runs:
            rate = adam_learning_rate(run["method"])
            if rate is None:
                traces[run["method"]] = run["rows"]
            elif rate == min(grid):  # the grid's place in the order of methods
                if len(grid) > 1:
                    self.best_adam_lr = min(grid, key=lambda r: _final_score(grid[r]))
                    traces[BEST_ADAM] = grid[self.best_adam_lr]
                if DEFAULT_ADAM_LR in grid:
                    traces[DEFAULT_ADAM] = grid[DEFAULT_ADAM_LR]
        self.comparison = ComparisonResult(traces=traces, settings=self.settings)


def collect(results: Dict[str, Any]) -> Dict[str, List[Repeat]]:
    """The results by data set (in the order they were run), each a list of repeats."""
    grouped: Dict[str, Dict[int, List[Dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in results["runs"]:
        grouped[run["dataset"]][run["repeat"]].append(run)
    return {
        name: [Repeat(runs) for _, runs in sorted(repeats.items())]
        for name, repeats in grouped.items()
    }


def _median_reached(values: Sequence[Optional[float]]) -> Tuple[Optional[float], int]:
    reached = [value for value in values if value is not None]
    return (float(np.median(reached)) if reached else None), len(reached)


def _cell(value: Optional[float], reached: int, total: int, digits: str = ".2f") -> str:
    if value is None:
        return "not reached"
    text = f"{value:{digits}}"
    return text if reached == total else f"{text} ({reached}/{total})"


def _mean(values: Sequence[float], digits: str) -> str:
    if len(values) == 1:
        return f"{values[0]:{digits}}"
    return f"{np.mean(values):{digits}} ± {np.std(values, ddof=1):{digits}}"


def _methods(repeats: List[Repeat]) -> List[str]:
    return list(dict.fromkeys(m for repeat in repeats for m in repeat.comparison.traces))


def _baselines(methods: Sequence[str]) -> List[str]:
    return [method for method in methods if method.startswith(BASELINE_PREFIX)]


def ratio(repeats: List[Repeat], fast: str, baseline: str) -> Tuple[Optional[float], int]:
    """
    The median over repeats of ``fast``'s time to target divided by ``baseline``'s (below 1:
    ``fast`` is sooner), and in how many repeats both reached it.
    """
    values = []
    for repeat in repeats:
        comparison = repeat.comparison
        if fast in comparison.traces and baseline in comparison.traces:
            values.append(comparison.time_ratios(fast).get(baseline))
    return _median_reached(values)


def ratio_bound(repeats: List[Repeat], fast: str, baseline: str) -> Optional[float]:
    """
    Where ``fast`` reached the target in every repeat and ``baseline`` in none: the largest over
    repeats of ``fast``'s time to target divided by the time ``baseline`` trained without reaching
    it, an upper bound on the ratio. None otherwise.
    """
    bounds = []
    for repeat in repeats:
        comparison = repeat.comparison
        if fast not in comparison.traces or baseline not in comparison.traces:
            return None
        own, theirs = comparison.time_to_target(fast), comparison.time_to_target(baseline)
        if own is None or theirs is not None or comparison.total_time(baseline) <= 0.0:
            return None
        bounds.append(own / comparison.total_time(baseline))
    return max(bounds) if bounds else None


def _ratio_cell(repeats: List[Repeat], fast: str, baseline: str, total: int) -> str:
    value, both = ratio(repeats, fast, baseline)
    if value is not None:
        return _cell(value, both, total, ".3g")
    bound = ratio_bound(repeats, fast, baseline)
    return "—" if bound is None else f"< {bound:.3g}"


def dataset_table(name: str, repeats: List[Repeat]) -> str:
    """The Markdown section of one data set: settings line and one row per method."""
    settings = repeats[0].settings
    methods = _methods(repeats)
    baselines = _baselines(methods)
    R = len(repeats)
    heading = (
        f"### {name}\n\nn = {settings['n_train']:,}, n_test = {settings['n_test']:,}, "
        f"d = {settings['d']}, m = {settings['num_inducing']}, {settings['time_budget']:g} s per "
        f"method, {R} repeat{'s' if R > 1 else ''}"
    )
    if settings.get("num_classes", 2) > 2:
        heading += (
            f"; {settings['num_classes']} classes (SVGP + Scipy with GPflow's MultiClass, "
            "PolyaGammaSVGP with LogisticSoftmax, every other method with GPflow's Softmax)"
        )
    best_rates = [repeat.best_adam_lr for repeat in repeats if repeat.best_adam_lr is not None]
    if best_rates:
        heading += f"; best Adam learning rate {', '.join(f'{r:g}' for r in best_rates)}"
    header = ["method", "test acc", "test NLL", "time used [s]", "time to target [s]"]
    header += [f"÷ {baseline}" for baseline in baselines]
    lines = [
        heading,
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
    ]
    for method in methods:
        present = [repeat.comparison for repeat in repeats if method in repeat.comparison.traces]
        finals = [comparison.final(method) for comparison in present]
        time_to_target, reached = _median_reached([c.time_to_target(method) for c in present])
        used = float(np.median([c.total_time(method) for c in present]))
        failed = sum("failed" in row for row in finals)
        cells = [
            f"**{method}**" if method in FAST_METHODS else method,
            _mean([row["test_accuracy"] for row in finals], ".4f"),
            _mean([row["test_nll"] for row in finals], ".4f"),
            f"{used:.1f}" + (f" (failed {failed}/{len(present)})" if failed else ""),
            _cell(time_to_target, reached, len(present)),
        ]
        for baseline in baselines:
            if method in FAST_METHODS:
                cells.append(_ratio_cell(repeats, method, baseline, len(present)))
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goals_table(collected: Dict[str, List[Repeat]]) -> str:
    """
    The goals: on large sets (n ≥ :data:`LARGE_N`) each fast model's speed-up over SVGP + Adam at
    its best rate should be ≥ :data:`SPEEDUP_GOAL_LARGE`; on small sets its time ratio to
    SVGP + Scipy should be ≤ :data:`RATIO_GOAL_SMALL`.
    """
    lines = [
        "| data set | model | goal | measured | met |",
        "|---|---|---|---:|---|",
    ]
    for name, repeats in collected.items():
        large = repeats[0].settings["n_train"] >= LARGE_N
        baseline = BEST_ADAM if large else SCIPY_NAME
        methods = _methods(repeats)
        if baseline not in methods:
            continue
        for fast in (method for method in methods if method in FAST_METHODS):
            value, _ = ratio(repeats, fast, baseline)
            bound = ratio_bound(repeats, fast, baseline) if value is None else None
            if large:
                goal = f"≥ {SPEEDUP_GOAL_LARGE:g}× faster than {baseline}"
                if value is not None:
                    speedup = np.inf if value == 0 else 1.0 / value
                    met, shown = speedup >= SPEEDUP_GOAL_LARGE, f"{speedup:.3g}×"
                elif bound is not None:
                    speedup = np.inf if bound == 0 else 1.0 / bound
                    met, shown = speedup >= SPEEDUP_GOAL_LARGE, f"> {speedup:.3g}× (baseline never)"
                else:
                    met, shown = False, "model did not reach the target"
            else:
                goal = f"≤ {RATIO_GOAL_SMALL:g}× the time of {baseline}"
                if value is not None:
                    met, shown = value <= RATIO_GOAL_SMALL, f"{value:.3g}×"
                elif bound is not None:
                    met, shown = bound <= RATIO_GOAL_SMALL, f"< {bound:.3g}× (baseline never)"
                else:
                    met, shown = False, "model did not reach the target"
            lines.append(f"| {name} | {fast} | {goal} | {shown} | {'yes' if met else 'no'} |")
    return "\n".join(lines)


def markdown_report(
    results: Dict[str, Any], collected: Optional[Dict[str, List[Repeat]]] = None
) -> str:
    """
    The whole Markdown table file: machine, one section per data set, the goals.

    :param collected: ``collect(results)``, if the caller has it already.
    """
    collected = collect(results) if collected is None else collected
    machine = results.get("machine", {})
    parts = [
        "## Results",
        "",
        f"Machine: {machine.get('cpu_count', '?')} CPU cores ({machine.get('processor', '?')}), "
        + (f"GPU {', '.join(machine['gpus'])}" if machine.get("gpus") else "no GPU")
        + f", TensorFlow {machine.get('tensorflow', '?')}, GPflow {machine.get('gpflow', '?')}.",
        "",
        "Time to target: first time within 0.5 accuracy points of the best final test accuracy "
        "and within 0.01 of the best final test NLL. `÷ baseline`: the model's time to target "
        "divided by the baseline's (below 1: the model is sooner); `< r` where the baseline "
        "never reached the target (r: the model's time over the baseline's whole run); `—` where "
        "the model did not reach it.",
    ]
    for name, repeats in collected.items():
        parts += ["", dataset_table(name, repeats)]
    parts += ["", "### Goals", "", goals_table(collected)]
    return "\n".join(parts) + "\n"


def plot_overview(
    results: Dict[str, Any],
    path: PathLike,
    collected: Optional[Dict[str, List[Repeat]]] = None,
) -> None:
    """
    One figure like the papers': test accuracy (top) and test NLL (bottom) against training time,
    one column per data set, one line per method (the first repeat), targets dashed.

    :param collected: ``collect(results)``, if the caller has it already.
    """
    Figure = matplotlib_figure()
    collected = collect(results) if collected is None else collected
    columns = max(1, len(collected))
    figure = Figure(figsize=(4.2 * columns, 7.0), layout="constrained")
    axes = figure.subplots(2, columns, squeeze=False)
    for column, (name, repeats) in enumerate(collected.items()):
        comparison = repeats[0].comparison
        draw_traces(axes[0, column], axes[1, column], comparison.traces, comparison.targets)
        settings = repeats[0].settings
        axes[0, column].set_title(
            f"{name} (n = {settings['n_train']:,}, m = {settings['num_inducing']})"
        )
    handles, labels = axes[1, 0].get_legend_handles_labels()
    for row in axes:
        for ax in row[1:]:
            ax.set_ylabel("")
    figure.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 5))
    figure.savefig(path, dpi=110)


def write_report(out: PathLike) -> List[str]:
    """
    Read ``out/results.json`` and write ``bench.png`` (:func:`plot_overview`), one
    ``<data set>.png`` per set (the first repeat, as ``gpflow-fastvi compare`` draws it) and
    ``table.md`` (:func:`markdown_report`) into ``out``.

    :return: the paths written.
    :raises FileNotFoundError, ValueError: if ``out`` holds no valid results file.
    """
    results = load_results(out)
    if not results["runs"]:
        raise ValueError(f"{os.path.join(out, 'results.json')} holds no finished runs yet")
    collected = collect(results)
    written = []
    path = os.path.join(out, "bench.png")
    plot_overview(results, path, collected)
    written.append(path)
    for name, repeats in collected.items():
        settings = repeats[0].settings
        path = os.path.join(out, f"{name}.png")
        repeats[0].comparison.plot(
            path,
            title=f"{name}: n = {settings['n_train']:,}, d = {settings['d']}, "
            f"m = {settings['num_inducing']}",
        )
        written.append(path)
    path = os.path.join(out, "table.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(markdown_report(results, collected))
    written.append(path)
    return written


def command(args: argparse.Namespace) -> int:
    """``gpflow-fastvi plot``: :func:`write_report` on the folder ``args.dir``."""
    for path in write_report(args.dir):
        print(f"Wrote {path}")
    return 0


__all__ = [
    "BEST_ADAM",
    "DEFAULT_ADAM",
    "LARGE_N",
    "RATIO_GOAL_SMALL",
    "Repeat",
    "SPEEDUP_GOAL_LARGE",
    "collect",
    "command",
    "dataset_table",
    "goals_table",
    "markdown_report",
    "plot_overview",
    "ratio",
    "ratio_bound",
    "write_report",
]
