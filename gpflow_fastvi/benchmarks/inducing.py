"""
Where to put the inducing inputs: test accuracy and NLL against M for random rows, k-means centres
and greedy selection (:func:`~gpflow_fastvi.greedy_inducing_points`).

``python -m gpflow_fastvi.benchmarks.inducing banana`` (or another set of
:data:`~gpflow_fastvi.datasets.registry.BENCHMARK_SETS`, options below), also
``gpflow-fastvi inducing banana``. For each M it places M inducing inputs four ways, from the benchmark
page's start (ARD SE kernel at √D, the logit link):

- ``random``: M training inputs drawn at random;
- ``kmeans``: k-means centres (:func:`~gpflow_fastvi.kmeans_inducing_points`), the default;
- ``greedy``: greedy selection by the trace criterion with unit weights at the starting kernel;
- ``greedy rounds``: ``fit(model, data, greedy_rounds=R)``, the selection redone R times at the
  trained kernel and weighted by the sites' precisions (Titsias's alternating scheme).

and trains :class:`~gpflow_fastvi.VIJJ` by ``fit`` with the inputs held fixed. Each row gives the
trace term Σᵢ (Knn − Qnn)ᵢᵢ per point at the starting kernel (what the selection shrinks), the
seconds the placement took, the training seconds, the SVGP ELBO per point, and test accuracy and
mean test NLL. Greedy selection draws working sets of ``--working-set`` rows (every row when 0).
"""

import argparse
import time
from typing import Any, Dict, List, Optional, Sequence

import gpflow
import numpy as np

from .. import VIJJ, fit, greedy_inducing_points, kmeans_inducing_points
from ..datasets import load_benchmark
from ..gaussian import kmm_cholesky, whitened_projection
from .choices import INDUCING_M, INDUCING_ROUNDS, INDUCING_WORKING_SET, PLACEMENTS
from .commands import add_inducing_arguments
from .harness import make_kernel, make_likelihood, metrics_function


def trace_term_per_point(X: np.ndarray, Z: np.ndarray, kernel: Any) -> float:
    """(1/N) Σᵢ (Knn − Qnn)ᵢᵢ with Qnn = Knm Kmm⁻¹ Kmn, through chol(Kmm), in blocks of rows."""
    Z_variable = gpflow.inducing_variables.InducingPoints(Z)
    L = kmm_cholesky(kernel, Z_variable)
    total = 0.0
    for start in range(0, X.shape[0], 10_000):
        projection = whitened_projection(kernel, Z_variable, X[start : start + 10_000], L)
        total += float(np.sum(projection.Ktilde_diag.numpy()))
    return total / X.shape[0]


def sweep(
    data: Sequence[np.ndarray],
    test: Sequence[np.ndarray],
    *,
    num_inducing: Sequence[int] = INDUCING_M,
    placements: Sequence[str] = PLACEMENTS,
    working_set_size: Optional[int] = INDUCING_WORKING_SET,
    rounds: int = INDUCING_ROUNDS,
    time_budget: Optional[float] = None,
    seed: int = 0,
    log: Any = print,
) -> List[Dict[str, Any]]:
    """One row per (M, placement), as the module docstring describes."""
    X, Y = data
    rows: List[Dict[str, Any]] = []
    log(markdown([]))
    for M in num_inducing:
        for placement in placements:
            kernel = make_kernel(X.shape[1])
            started = time.perf_counter()
            if placement == "random":
                Z = X[np.random.default_rng(seed).choice(X.shape[0], M, replace=False)]
            elif placement == "kmeans":
                Z = kmeans_inducing_points(X, M, seed=seed)
            else:
                Z = greedy_inducing_points(
                    X, kernel, M, working_set_size=working_set_size, seed=seed
                )
            placed = time.perf_counter() - started
            trace_term = trace_term_per_point(X, Z, kernel)
            model = VIJJ(kernel, make_likelihood(), Z, num_data=X.shape[0])
            started = time.perf_counter()
            fit(
                model,
                (X, Y),
                time_budget=time_budget,
                greedy_rounds=rounds if placement == "greedy rounds" else None,
                greedy_working_set=working_set_size,
            )
            trained = time.perf_counter() - started
            metrics = metrics_function(model, None, *test, compiled=False)()
            row = {
                "M": M,
                "placement": placement,
                "trace_per_point": trace_term,
                "placement_s": placed,
                "training_s": trained,
                "elbo_per_point": float(model.elbo((X, Y)).numpy()) / X.shape[0],
                **metrics,
            }
            rows.append(row)
            log(markdown([row], header=False))
    return rows


def markdown(rows: List[Dict[str, Any]], header: bool = True) -> str:
    """The rows as a Markdown table (with its header unless ``header`` is False)."""
    lines = []
    if header:
        lines += [
            "| M | placement | trace/N at start | placement s | training s | ELBO/N | "
            "test acc | test NLL |",
            "|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
    for row in rows:
        lines.append(
            f"| {row['M']} | {row['placement']} | {row['trace_per_point']:.4f} | "
            f"{row['placement_s']:.2f} | {row['training_s']:.1f} | {row['elbo_per_point']:.4f} | "
            f"{row['test_accuracy']:.4f} | {row['test_nll']:.4f} |"
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m gpflow_fastvi.benchmarks.inducing",
        description="Test accuracy and NLL against M for random, k-means and greedy inducing inputs.",
    )
    add_inducing_arguments(parser)
    run(parser.parse_args(argv))


def command(args: argparse.Namespace) -> int:
    """``gpflow-fastvi inducing``: :func:`run`."""
    run(args)
    return 0


def run(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Run the sweep the parsed arguments ask for, printing its table row by row."""
    X, Y, X_test, Y_test = load_benchmark(args.name, args.data_dir, seed=args.seed)
    print(f"{args.name}: N = {X.shape[0]}, D = {X.shape[1]}, {X_test.shape[0]} test points")
    return sweep(
        (X, Y),
        (X_test, Y_test),
        num_inducing=args.m,
        placements=args.placements,
        working_set_size=args.working_set or None,
        rounds=args.rounds,
        time_budget=args.time_budget,
        seed=args.seed,
    )


if __name__ == "__main__":
    main()
