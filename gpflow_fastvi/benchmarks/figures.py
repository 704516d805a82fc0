"""
The figures of the benchmark jobs: test accuracy and test NLL against training wall-clock time, one
line per method, each method in a fixed look so that it looks the same in every figure.

matplotlib (the ``[bench]`` extra) is imported only when a figure is drawn.
"""

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..datasets.loaders import BENCH_INSTALL_HINT
from .choices import (
    ADAM_NAME,
    KLC_NAME,
    NATGRAD_NAME,
    PG_NAME,
    SCIPY_NAME,
    VICONCAVE_NAME,
    VIJJ_NAME,
    VITAYLOR_NAME,
    adam_learning_rate,
)

_STYLES = {  # a fixed look per method, so that a method looks the same in every figure
    VIJJ_NAME: ("C0", "-"),
    VITAYLOR_NAME: ("C4", "-"),
    KLC_NAME: ("C6", "-"),
    PG_NAME: ("C3", "-"),
    VICONCAVE_NAME: ("C8", "-"),
    SCIPY_NAME: ("C1", "--"),
    ADAM_NAME: ("C2", ":"),
    NATGRAD_NAME: ("C5", "-."),
}


def line_style(method: str, index: int) -> Dict[str, Any]:
    """Matplotlib keywords for ``method``'s line; ``index`` (its place) picks one for other names."""
    default = (f"C{(len(_STYLES) + index) % 10}", ("-", "--", "-.", ":")[index % 4])
    if method not in _STYLES and adam_learning_rate(method) is not None:
        default = (default[0], _STYLES[ADAM_NAME][1])  # SVGP + Adam at another rate: Adam's line
    color, linestyle = _STYLES.get(method, default)
    return {"color": color, "linestyle": linestyle, "label": method}


def matplotlib_figure() -> Any:
    """matplotlib's :class:`~matplotlib.figure.Figure`, or an ImportError saying how to get it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            f"Plotting needs matplotlib, which comes with the [bench] extra: {BENCH_INSTALL_HINT}"
        ) from error
    return Figure


def draw_traces(
    accuracy_axes: Any,
    nll_axes: Any,
    traces: Mapping[str, Sequence[Mapping[str, Any]]],
    targets: Optional[Tuple[float, float]] = None,
) -> None:
    """
    Draw test accuracy and test NLL against training wall-clock time (log axis) on two matplotlib
    axes, one line per method (``traces`` maps its name to its learning curve) in its fixed style,
    and ``(accuracy, nll)`` targets as thin grey dashed lines.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for index, (method, rows) in enumerate(traces.items()):
        style = line_style(method, index)
        shown = [row for row in rows if row["time"] > 0.0]  # t = 0 has no place on a log axis
        times = [row["time"] for row in shown]
        if len(shown) == 1:
            style["marker"] = "o"  # one point draws no line
        accuracy_axes.plot(times, [row["test_accuracy"] for row in shown], **style)
        nll_axes.plot(times, [row["test_nll"] for row in shown], **style)
    if targets is not None:
        accuracy_target, nll_target = targets
        accuracy_axes.axhline(accuracy_target, color="grey", linestyle="--", linewidth=0.8)
        nll_axes.axhline(nll_target, color="grey", linestyle="--", linewidth=0.8, label="target")
    for axes, label in ((accuracy_axes, "test accuracy"), (nll_axes, "test NLL")):
        axes.set_xscale("log")
        axes.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _: f"{seconds:g}"))
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.set_xlabel("training wall-clock time [s]")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)


__all__ = ["draw_traces", "line_style", "matplotlib_figure"]
