"""
Many small fits in one process, as a scikit-learn user makes them: what the graphs that later fits
share (:mod:`gpflow_fastvi.training.compiled`) save.

``python -m experiments.many_fits`` measures, in one process, on scikit-learn's breast cancer set
(569 points, 30 features; 426 for training, 143 for testing, ``random_state=0``):

- **grid**: ``GridSearchCV(Pipeline([StandardScaler(), GPClassifier()]), {"n_inducing": [20,
  100]}, cv=5, scoring="neg_log_loss")`` against the same search over
  ``GaussianProcessClassifier(max_iter_predict=[100, 200])``, alternated, ``--repeats`` times
  each, the i-th search's ``GPClassifier`` seeded with ``random_state=i`` (i from 0); the median
  seconds of the whole search (refit included) and the test log loss of the best estimator;
- **one fit**: ``GPClassifier`` and ``GaussianProcessClassifier`` fitted in turn on ``--n``
  points of ``make_classification`` (10 features, 5 informative), a fresh estimator and fresh
  data of the same shapes each time, after a first ``GPClassifier`` fit in the process; the
  median seconds over ``--repeats``. ``GaussianProcessClassifier`` has its default kernel, whose
  hyperparameters are fixed (nothing is optimised), as in the grid;
- **first call**: the seconds to the first row of ``fv.fit`` (its first evaluation, compilation
  included) for the process's first ``VIConcave`` model, against that of the next models of the
  same shapes (other inducing inputs and lengthscales), the median over ``--repeats``.

The grid's first search traces the graphs of each grid point and fold size; the table says which
repeats each figure is the median of. The rows "tracing its own graphs" run the same fits under
:func:`gpflow_fastvi.training.compiled.unshared`, alternated with the others: what every fit cost
when each traced its own.
"""

import argparse
import contextlib
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence

import gpflow
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.cli_args import add_record
from gpflow_fastvi.benchmarks.pages import write_printed_table
from gpflow_fastvi.sklearn import GPClassifier
from gpflow_fastvi.training import compiled

HEADER = "| measure | ours | seconds (ours) | seconds (GPC) | ours / GPC | log loss (ours) | log loss (GPC) |"


def fit_seconds(estimator: Any, train: Any) -> float:
    began = time.perf_counter()
    estimator.fit(*train)
    return time.perf_counter() - began


def grid_search(
    estimator: Any, grid: Dict[str, List[Any]], train: Any, test: Any
) -> Dict[str, float]:
    search = GridSearchCV(
        Pipeline([("scale", StandardScaler()), ("gp", estimator)]),
        {f"gp__{k}": v for k, v in grid.items()},
        cv=5,
        scoring="neg_log_loss",
    )
    taken = fit_seconds(search, train)
    return {"seconds": taken, "log_loss": log_loss(test[1], search.predict_proba(test[0]))}


def first_row_seconds(seed: int, X: np.ndarray, Y: np.ndarray) -> float:
    rng = np.random.default_rng(seed)
    Z = X[rng.choice(len(X), 50, replace=False)].copy()
    kernel = gpflow.kernels.SquaredExponential(
        lengthscales=np.full(X.shape[1], float(rng.uniform(3.0, 6.0)))
    )
    model = fv.VIConcave(kernel, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid), Z)
    trace = fv.fit(model, (X, Y), max_iter=1)
    return float(trace.rows[0]["time"])


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.many_fits",
        description="Many small fits in one process: GPClassifier against GaussianProcessClassifier.",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=500, help="points of the one-fit comparison")
    add_record(parser)
    args = parser.parse_args(argv)
    rows: List[str] = []

    def show(line: str) -> None:
        rows.append(line)
        print(line, flush=True)

    print(HEADER + "\n|---|---|---:|---:|---:|---:|---:|", flush=True)

    # First call: the process's first VIConcave model, then models of the same shapes.
    X, y = load_breast_cancer(return_X_y=True)
    Xs = StandardScaler().fit_transform(X)
    Y = y[:, None].astype(float)
    first = first_row_seconds(0, Xs, Y)
    later = statistics.median(first_row_seconds(s, Xs, Y) for s in range(1, args.repeats + 1))
    show(
        f"| fit's first row, 569 points (first model of the process: {first:.2f} s) | "
        f"later models, same shapes | {later:.2f} | | {later / first:.2f} of the first | | |"
    )

    # The grid search, alternated with scikit-learn's.
    train_X, test_X, train_y, test_y = train_test_split(X, y, random_state=0)
    train, test = (train_X, train_y), (test_X, test_y)
    ours: List[Dict[str, float]] = []
    alone: List[Dict[str, float]] = []
    theirs: List[Dict[str, float]] = []
    grid = {"n_inducing": [20, 100]}
    for seed in range(args.repeats):  # seeded: each run of the script searches the same fits
        ours.append(grid_search(GPClassifier(random_state=seed), grid, train, test))
        with compiled.unshared():
            alone.append(grid_search(GPClassifier(random_state=seed), grid, train, test))
        theirs.append(
            grid_search(GaussianProcessClassifier(), {"max_iter_predict": [100, 200]}, train, test)
        )
    for label, mine, gpc in (
        ("first search", ours[:1], theirs[:1]),
        ("later searches", ours[1:], theirs[1:]),
        ("every fit tracing its own graphs", alone, theirs),
    ):
        if not mine:
            continue
        s_ours = statistics.median(r["seconds"] for r in mine)
        s_gpc = statistics.median(r["seconds"] for r in gpc)
        show(
            f"| GridSearchCV, breast cancer, 5 folds × 2 | {label} | {s_ours:.1f} | {s_gpc:.1f} | "
            f"{s_ours / s_gpc:.1f} | {mine[-1]['log_loss']:.3f} | {gpc[-1]['log_loss']:.3f} |"
        )

    # One fit at n points, after the first fit of the process.
    def sample(seed: int) -> Any:
        X, y = make_classification(args.n + 2000, n_features=10, n_informative=5, random_state=seed)
        return (X[: args.n], y[: args.n]), (X[args.n :], y[args.n :])

    GPClassifier(random_state=0).fit(*sample(0)[0])
    traced = 0
    fits: Dict[str, List[float]] = {"ours": [], "alone": [], "gpc": []}
    losses: Dict[str, List[float]] = {"ours": [], "alone": [], "gpc": []}
    for seed in range(1, args.repeats + 1):
        train, test = sample(seed)
        for name, estimator in (
            ("ours", GPClassifier(random_state=seed)),
            ("alone", GPClassifier(random_state=seed)),
            ("gpc", make_pipeline(StandardScaler(), GaussianProcessClassifier(random_state=seed))),
        ):
            traces = compiled.trace_count()
            with compiled.unshared() if name == "alone" else contextlib.nullcontext():
                fits[name].append(fit_seconds(estimator, train))
            if name == "ours":
                traced += compiled.trace_count() - traces
            losses[name].append(log_loss(test[1], estimator.predict_proba(test[0])))
    s_gpc = statistics.median(fits["gpc"])
    for name, label in (
        ("ours", f"after a first fit ({traced} traces)"),
        ("alone", "tracing its own graphs"),
    ):
        s_ours = statistics.median(fits[name])
        show(
            f"| one fit, {args.n} points of make_classification | {label} | {s_ours:.2f} | "
            f"{s_gpc:.2f} | {s_ours / s_gpc:.1f} | {statistics.median(losses[name]):.3f} | "
            f"{statistics.median(losses['gpc']):.3f} |"
        )
    if args.record:
        write_printed_table(args.record, "experiments.many_fits", argv, HEADER, rows)


if __name__ == "__main__":
    main()
