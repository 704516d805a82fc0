"""
The outcome of a comparison: each method's learning curve, and what is drawn from them.

A learning curve (:data:`LearningCurve`) is a method's list of rows, ``{"iteration", "time",
"test_accuracy", "test_nll", "elbo"}`` in time order, starting with the untrained model at time 0
(see :mod:`gpflow_fastvi.benchmarks.methods` for what each column holds). A row may also hold
``"failed"``, saying where a method that diverged stopped. :class:`ComparisonResult` holds one
curve per method and the settings, and gives the target (both accuracy and NLL near the best final
values over the methods), each method's time to reach it, the time ratios of the fast methods
against the baselines, a table, a JSON file and a figure.

This module imports NumPy only; matplotlib is imported when a figure is drawn.
"""

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..datasets.loaders import PathLike
from .choices import (
    BASELINE_PREFIX,
    FAST_METHODS,
    KLC_NAME,
    PG_NAME,
    VICONCAVE_NAME,
    VIJJ_NAME,
    VITAYLOR_NAME,
)
from .figures import draw_traces, matplotlib_figure

ACCURACY_TOLERANCE = 0.005
"""Time to target: within this much (half an accuracy point) of the best final test accuracy..."""
NLL_TOLERANCE = 0.01
"""...and within this much of the best (lowest) final mean test negative log predictive density."""

Row = Dict[str, Any]
"""One evaluation of a method: ``{"iteration", "time", "test_accuracy", "test_nll", "elbo"}`` (no
``"elbo"`` in a comparison of more than two classes), and where the method diverged the text
``"failed"`` says where (so not every value is a number)."""
LearningCurve = List[Row]
"""A method's evaluations in time order, from the untrained model at time 0."""


def json_ready(value: Any) -> Any:
    """
    ``value`` with NumPy scalars and arrays (say, from a callback) turned into Python ones, tuples
    into lists and dict keys into strings, so that :func:`json.dump` takes it.
    """
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    return value


def _format_seconds(seconds: Optional[float]) -> str:
    return "not reached" if seconds is None else f"{seconds:.2f}"


def _format_ratio(ratio: Optional[float]) -> str:
    if ratio is None:
        return "n/a (a method did not reach the target)"
    if ratio <= 0.0:
        return f"{ratio:.3g}"
    return f"{ratio:.3g} ({1.0 / ratio:.3g}x {'faster' if ratio <= 1.0 else 'slower'})"


_ELBO_NOTES = {
    VIJJ_NAME: f"{VIJJ_NAME}: model.elbo(), above its own Jaakkola-Jordan bound",
    VITAYLOR_NAME: f"{VITAYLOR_NAME}: model.elbo(); its own objective is an approximation",
    PG_NAME: f"{PG_NAME}: gpflow.models.SVGP.elbo, above its own Polya-Gamma bound",
    KLC_NAME: f"{KLC_NAME}: model.elbo(), of its predictive",
    VICONCAVE_NAME: f"{VICONCAVE_NAME}: model.elbo(), the objective it maximises",
}


@dataclass
class ComparisonResult:
    """
    The learning curves of a comparison, and the summaries drawn from them.

    :param traces: one learning curve per method (see the module docstring).
    :param settings: the set-up: data sizes, budget, optimiser settings, versions.
    """

    traces: Dict[str, LearningCurve]
    settings: Dict[str, Any] = field(default_factory=dict)

    def final(self, method: str) -> Row:
        """The last row of ``method``'s curve: its state when its budget ran out or it converged."""
        return self.traces[method][-1]

    def total_time(self, method: str) -> float:
        """Training seconds ``method`` used (evaluations excluded)."""
        return float(self.final(method)["time"])

    @property
    def targets(self) -> Tuple[float, float]:
        """
        The target both accuracy and NLL must reach: ``(accuracy, nll)``, where accuracy is the best
        final test accuracy over methods less :data:`ACCURACY_TOLERANCE` and NLL is the best final
        test NLL over methods plus :data:`NLL_TOLERANCE`.
        """
        finals = [self.final(method) for method in self.traces]
        # A method that ended at a NaN or infinite NLL (a diverged baseline) sets no target.
        finals = [row for row in finals if np.isfinite(row["test_nll"])] or finals
        best_accuracy = max(row["test_accuracy"] for row in finals)
        best_nll = min(row["test_nll"] for row in finals)
        return best_accuracy - ACCURACY_TOLERANCE, best_nll + NLL_TOLERANCE

    def time_to_target(self, method: str) -> Optional[float]:
        """
        The first time in ``method``'s curve at which it is on target in accuracy and NLL at once
        (see :attr:`targets`); None if it never is.
        """
        accuracy_target, nll_target = self.targets
        slack = 1e-12  # so that a method whose final row defines a target reaches it
        for row in self.traces[method]:
            if (
                row["test_accuracy"] >= accuracy_target - slack
                and row["test_nll"] <= nll_target + slack
            ):
                return float(row["time"])
        return None

    def time_ratios(self, method: str = VIJJ_NAME) -> Dict[str, Optional[float]]:
        """
        ``method``'s time to target divided by each other method's; None where either did not reach
        the target. Below 1 means ``method`` got there first.
        """
        own = self.time_to_target(method)
        ratios: Dict[str, Optional[float]] = {}
        for other in self.traces:
            if other == method:
                continue
            theirs = self.time_to_target(other)
            ratios[other] = None if own is None or not theirs else own / theirs
        return ratios

    def fast_against_baselines(self) -> Dict[Tuple[str, str], Optional[float]]:
        """
        The time-to-target ratio of every fast method
        (:data:`~gpflow_fastvi.benchmarks.choices.FAST_METHODS`) in the traces against every
        baseline (a name starting with :data:`~gpflow_fastvi.benchmarks.choices.BASELINE_PREFIX`)
        in them, keyed by ``(fast, baseline)`` in the order of the traces; see
        :meth:`time_ratios`.
        """
        baselines = [method for method in self.traces if method.startswith(BASELINE_PREFIX)]
        return {
            (fast, baseline): self.time_ratios(fast)[baseline]
            for fast in self.traces
            if fast in FAST_METHODS
            for baseline in baselines
        }

    def format_table(self, markdown: bool = False) -> str:
        """
        One line per method: final test accuracy, final test NLL, final ELBO, total training time,
        time to target; then the target itself, the time ratios of the fast methods against the
        baselines (see :meth:`fast_against_baselines`) and what the ELBO column holds.

        :param markdown: a Markdown table instead of aligned plain text.
        """
        header = ["Method", "Test acc", "Test NLL", "ELBO", "Time [s]", "Time to target [s]"]
        lines = [header]
        for method in self.traces:
            row = self.final(method)
            lines.append(
                [
                    method,
                    f"{row['test_accuracy']:.4f}",
                    f"{row['test_nll']:.4f}",
                    f"{row['elbo']:.2f}" if "elbo" in row else "n/a",
                    f"{self.total_time(method):.2f}" + (" (failed)" if "failed" in row else ""),
                    _format_seconds(self.time_to_target(method)),
                ]
            )
        if markdown:
            text = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * 5) + "|"]
            text += ["| " + " | ".join(line) + " |" for line in lines[1:]]
        else:
            widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

            def join(line: List[str]) -> str:
                cells = [line[0].ljust(widths[0])]
                cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:])]
                return "  ".join(cells)

            text = [join(header), "  ".join("-" * width for width in widths)]
            text += [join(line) for line in lines[1:]]
        accuracy_target, nll_target = self.targets
        notes = [
            "",
            f"Target: test accuracy >= {accuracy_target:.4f} and test NLL <= {nll_target:.4f} "
            f"(best final accuracy - {ACCURACY_TOLERANCE}, best final NLL + {NLL_TOLERANCE}).",
        ]
        notes += [
            f"{method} failed at {self.final(method)['failed']}; its last evaluation is reported."
            for method in self.traces
            if "failed" in self.final(method)
        ]
        for (fast, baseline), ratio in self.fast_against_baselines().items():
            notes.append(f"Time to target, {fast} / {baseline}: {_format_ratio(ratio)}")
        if self.settings.get("num_classes", 2) > 2:
            notes.append(
                "ELBO: not shown, as the methods' C-class likelihoods differ; test NLL: -log of "
                "the true class's predicted probability."
            )
        else:
            elbo_notes = [note for method, note in _ELBO_NOTES.items() if method in self.traces]
            notes.append(
                "ELBO: the standard SVGP ELBO at each model's q(u)"
                + (f" ({'; '.join(elbo_notes)})." if elbo_notes else ".")
            )
        if markdown:
            notes = [note if not note else note + "  " for note in notes]
        return "\n".join(text + notes)

    def __str__(self) -> str:
        return self.format_table()

    def to_dict(self) -> Dict[str, Any]:
        """
        A JSON-ready dict: settings, targets, the time ratios of the fast methods against the
        baselines (keyed ``"fast / baseline"``), and per method its rows and summaries.
        """
        accuracy_target, nll_target = self.targets
        return json_ready(
            {
                "settings": self.settings,
                "targets": {"test_accuracy": accuracy_target, "test_nll": nll_target},
                "time_ratios": {
                    f"{fast} / {baseline}": ratio
                    for (fast, baseline), ratio in self.fast_against_baselines().items()
                },
                "methods": {
                    method: {
                        "final": self.final(method),
                        "total_time": self.total_time(method),
                        "time_to_target": self.time_to_target(method),
                        "rows": rows,
                    }
                    for method, rows in self.traces.items()
                },
            }
        )

    def save_json(self, path: PathLike) -> None:
        """Write :meth:`to_dict` to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    def plot(self, path: PathLike, *, title: Optional[str] = None) -> None:
        """
        Draw test accuracy and test NLL against training wall-clock time (log axis), one line per
        method (fast methods solid, baselines in other line styles, each method its own colour),
        the target as a thin grey dashed line, and save the figure to ``path`` (PNG by its name).

        :raises ImportError: if matplotlib (the ``[bench]`` extra) is not installed.
        """
        Figure = matplotlib_figure()
        figure = Figure(figsize=(11.0, 4.2), layout="constrained")
        accuracy_axes, nll_axes = figure.subplots(1, 2)
        draw_traces(accuracy_axes, nll_axes, self.traces, self.targets)
        nll_axes.legend()
        if title:
            figure.suptitle(title)
        figure.savefig(path, dpi=120)

    def save(self, out_dir: PathLike, *, title: Optional[str] = None) -> Tuple[str, str]:
        """
        Write ``comparison.png`` (see :meth:`plot`) and ``comparison.json`` (see :meth:`save_json`)
        into ``out_dir``, creating it if needed.

        :return: the paths of the PNG and the JSON file.
        """
        os.makedirs(out_dir, exist_ok=True)
        png_path = os.path.join(out_dir, "comparison.png")
        json_path = os.path.join(out_dir, "comparison.json")
        self.save_json(json_path)
        self.plot(png_path, title=title)
        return png_path, json_path


__all__ = [
    "ACCURACY_TOLERANCE",
    "ComparisonResult",
    "LearningCurve",
    "NLL_TOLERANCE",
    "Row",
    "json_ready",
]
