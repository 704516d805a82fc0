"""
Training routes of the same model side by side, against SVGP + Scipy, in one process.

``python -m experiments.routes banana 30 2`` runs, on a bundled set (``banana`` or
``ijcnn1``, seeded 80/20 split, standardised), VIJJ and VITaylor with their ``"analytic"`` and
``"persistent"`` routes and GPflow's SVGP + Scipy, each for the time budget (seconds), repeated
with the order reversed on odd repeats, and prints each method's median time to the target of
:mod:`~gpflow_fastvi.benchmarks.compare` (within 0.5 accuracy points of the best final test
accuracy and 0.01 of the best final NLL). The start is that of the benchmark page: ARD SE kernel
at √D, m = 100 k-means inducing inputs, the logit link.
"""

import argparse
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from gpflow_fastvi import VIJJ, VITaylor, fit, kmeans_inducing_points
from gpflow_fastvi.benchmarks.arg_types import positive
from gpflow_fastvi.benchmarks.baselines import run_svgp_scipy
from gpflow_fastvi.benchmarks.choices import SCIPY_NAME
from gpflow_fastvi.benchmarks.cli_args import add_benchmark_set
from gpflow_fastvi.benchmarks.harness import make_kernel, make_likelihood, metrics_function
from gpflow_fastvi.benchmarks.result import ACCURACY_TOLERANCE, NLL_TOLERANCE, LearningCurve
from gpflow_fastvi.datasets import load_banana, load_ijcnn1, standardise, train_test_split

ROUTES: Tuple[Tuple[str, str], ...] = (
    ("VIJJ", "analytic"),
    ("VIJJ", "persistent"),
    ("VITaylor", "analytic"),
    ("VITaylor", "persistent"),
)
"""The (model, route) pairs compared, beside SVGP + Scipy."""

Data = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def run_route(
    model_name: str, route: str, data: Data, Z: np.ndarray, budget: float
) -> LearningCurve:
    """One model trained by ``fit(model, method=route)`` for ``budget`` seconds, evaluated per row."""
    X_train, Y_train, X_test, Y_test = data
    model_class = {"VIJJ": VIJJ, "VITaylor": VITaylor}[model_name]
    model = model_class(
        make_kernel(X_train.shape[1]),
        likelihood=make_likelihood(),
        inducing_variable=Z.copy(),
        train_inducing=False,
        data=(X_train, Y_train),
    )
    metrics = metrics_function(model, model.elbo, X_test, Y_test)
    trace = fit(model, method=route, time_budget=budget, callback=lambda _: metrics())
    return [dict(row) for row in trace.rows]


def time_to_target(curve: LearningCurve, accuracy: float, nll: float) -> Optional[float]:
    """The first time at which the curve is at the target, or ``None``."""
    for row in curve:
        if row["test_accuracy"] >= accuracy and row["test_nll"] <= nll:
            return float(row["time"])
    return None


def compare_routes(data: Data, budget: float, repeats: int) -> Dict[str, List[LearningCurve]]:
    """Every route and SVGP + Scipy, ``repeats`` times, alternating the order."""
    Z = kmeans_inducing_points(data[0], 100, seed=0)
    methods: List[Tuple[str, Optional[str]]] = [*ROUTES, (SCIPY_NAME, None)]
    curves: Dict[str, List[LearningCurve]] = {}
    for repeat in range(repeats):
        for model_name, route in methods if repeat % 2 == 0 else methods[::-1]:
            if route is None:
                test = (data[2], data[3])
                curve = run_svgp_scipy((data[0], data[1]), test, Z, budget, False)
                curves.setdefault(model_name, []).append(curve)
            else:
                curve = run_route(model_name, route, data, Z, budget)
                curves.setdefault(f"{model_name} ({route})", []).append(curve)
    return curves


def summary(curves: Dict[str, List[LearningCurve]]) -> List[str]:
    """Lines of text: the target, then per method the median time to it and the final figures."""
    finals = [curve[-1] for runs in curves.values() for curve in runs]
    accuracy = max(row["test_accuracy"] for row in finals) - ACCURACY_TOLERANCE
    nll = min(row["test_nll"] for row in finals) + NLL_TOLERANCE
    lines = [f"target: test accuracy >= {accuracy:.4f} and test NLL <= {nll:.4f}"]
    for name, runs in curves.items():
        times = [time_to_target(curve, accuracy, nll) for curve in runs]
        reached = [t for t in times if t is not None]
        median = f"{np.median(reached):.1f} s" if len(reached) == len(times) else "not reached"
        last = [f"{c[-1]['test_accuracy']:.4f}/{c[-1]['test_nll']:.4f}" for c in runs]
        lines.append(f"{name:26s} median time to target {median:>12s}; final acc/NLL {last}")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.routes",
        description="Training routes of VIJJ and VITaylor against SVGP + Scipy, in one process.",
    )
    add_benchmark_set(parser, choices=("banana", "ijcnn1"))
    parser.add_argument("budget", type=positive(float), help="training seconds per method and run")
    parser.add_argument(
        "repeats", type=positive(int), help="runs of each method, the order reversed on odd ones"
    )
    args = parser.parse_args(argv)
    X, Y = {"banana": load_banana, "ijcnn1": load_ijcnn1}[args.name]()
    X_train, Y_train, X_test, Y_test = train_test_split(X, Y, test_fraction=0.2, seed=0)
    X_train, X_test = standardise(X_train, X_test)
    curves = compare_routes((X_train, Y_train, X_test, Y_test), args.budget, args.repeats)
    print("\n".join(summary(curves)))


if __name__ == "__main__":
    main()
