"""
The one-line swap, measured: GPflow's own training loops on each model against
:func:`~gpflow_fastvi.fit`.

``python -m experiments.swap banana`` (or another set of
:data:`~gpflow_fastvi.datasets.registry.BENCHMARK_SETS`; options below) builds every model with
SVGP's signature, ``Model(kernel, likelihood, Z, num_data=N)``, from the start of the benchmark
page (ARD SE kernel at √D, k-means inducing inputs held fixed, the logit link), and trains it
three ways, each from that start:

- ``fit``: ``gpflow_fastvi.fit(model, (X, Y))``, the method's own algorithm;
- ``Scipy``: ``gpflow.optimizers.Scipy().minimize(model.training_loss_closure((X, Y)),
  model.trainable_variables)``, an SVGP script's full-batch loop;
- ``Adam``: ``steps`` calls of a ``gpflow.keras.tf_keras`` Adam optimiser's ``minimize`` on
  ``model.training_loss_closure(iter(dataset))``, shuffled mini-batches of ``batch`` points, an
  SVGP script's mini-batch loop.

It prints, per model and loop, the training seconds, the test accuracy and mean test NLL, and
their differences from ``fit``'s, marked against the swap's promise (within
:data:`~gpflow_fastvi.benchmarks.result.ACCURACY_TOLERANCE` and
:data:`~gpflow_fastvi.benchmarks.result.NLL_TOLERANCE`). ``fit`` and ``Scipy`` are deterministic
from the start and run once; the Adam loop ends wherever its last mini-batches left it, so it runs
``--repeats`` times with different shuffles and the row gives the medians and the range of its test
accuracy. Beside the test figures it gives the SVGP ELBO per training point at the end of each
loop (:meth:`~gpflow_fastvi.models.site_model.SiteModel.elbo`, the same number for every
model): how far each loop got on the objective, which says whether a loop reached the method's
answer where test figures cannot, on a set whose ELBO keeps rising along hyperparameters that
predict worse. ``--scipy-maxiter`` bounds L-BFGS-B's iterations (SciPy's default, 15,000, with its
relative-reduction test of about 2·10⁻⁹, asks far more than ``fit``'s tolerance on a large set).
One process: the times say how long each loop took, not which is faster to a target
(:mod:`~gpflow_fastvi.benchmarks.runs` measures that).
"""

import argparse
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from gpflow_fastvi import (
    VIJJ,
    KLCorrected,
    PolyaGammaSVGP,
    VIConcave,
    VITaylor,
    fit,
    kmeans_inducing_points,
)
from gpflow_fastvi.benchmarks.arg_types import positive
from gpflow_fastvi.benchmarks.cli_args import (
    add_adam_lr,
    add_batch_size,
    add_benchmark_set,
    add_data_dir,
    add_inducing,
    add_models,
    add_name_list,
    add_repeats,
)
from gpflow_fastvi.benchmarks.harness import make_kernel, make_likelihood, metrics_function
from gpflow_fastvi.benchmarks.result import ACCURACY_TOLERANCE, NLL_TOLERANCE
from gpflow_fastvi.datasets import load_benchmark

MODELS: Dict[str, type] = {
    "VIJJ": VIJJ,
    "VITaylor": VITaylor,
    "KLCorrected": KLCorrected,
    "PolyaGammaSVGP": PolyaGammaSVGP,
    "VIConcave": VIConcave,
}
"""The models swapped in for SVGP, by name."""

LOOPS: Tuple[str, ...] = ("fit", "Scipy", "Adam")
"""The training loops, ``fit`` first: the others are compared with it."""

STOCHASTIC_LOOPS: Tuple[str, ...] = ("Adam",)
"""The loops whose result depends on the shuffle seed, and so are repeated."""

Arrays = Tuple[np.ndarray, np.ndarray]


class LoopResult(NamedTuple):
    """
    One model trained by one loop, scored on the test data: the medians over ``runs`` runs, and
    the lowest and highest test accuracy among them.
    """

    model: str
    loop: str
    seconds: float
    test_accuracy: float
    test_nll: float
    elbo: float = float("nan")
    """The SVGP ELBO per training point at the end (the median over the runs)."""
    runs: int = 1
    accuracy_range: Tuple[float, float] = (float("nan"), float("nan"))


def train(
    model: gpflow.models.GPModel,
    loop: str,
    data: Arrays,
    *,
    steps: int,
    batch: int,
    learning_rate: float,
    seed: int,
    scipy_maxiter: Optional[int] = None,
) -> None:
    """
    Train ``model`` on ``data`` by one of :data:`LOOPS`, as a GPflow script would write it;
    ``scipy_maxiter`` is L-BFGS-B's ``maxiter`` option (SciPy's default when ``None``).
    """
    if loop == "fit":
        fit(model, data)
    elif loop == "Scipy":
        options = {} if scipy_maxiter is None else {"maxiter": scipy_maxiter}
        gpflow.optimizers.Scipy().minimize(
            model.training_loss_closure(data), model.trainable_variables, options=options
        )
    elif loop == "Adam":
        dataset = (
            tf.data.Dataset.from_tensor_slices(data)
            .repeat()
            .shuffle(10 * batch, seed=seed)
            .batch(batch, drop_remainder=True)
        )
        closure = model.training_loss_closure(iter(dataset))
        optimizer = gpflow.keras.tf_keras.optimizers.Adam(learning_rate)
        for _ in range(steps):
            optimizer.minimize(closure, model.trainable_variables)
    else:
        raise ValueError(f"loop must be one of {LOOPS}; got {loop!r}.")


def compare_loops(
    data: Arrays,
    test: Arrays,
    *,
    num_inducing: int,
    steps: int,
    batch: int,
    learning_rate: float,
    models: Sequence[str] = tuple(MODELS),
    loops: Sequence[str] = LOOPS,
    repeats: int = 1,
    seed: int = 0,
    scipy_maxiter: Optional[int] = None,
    report: Callable[[str], None] = print,
) -> List[LoopResult]:
    """
    Every model of ``models`` trained by every loop of ``loops`` on ``data`` and scored on
    ``test``; one :class:`LoopResult` per (model, loop). The loops of :data:`STOCHASTIC_LOOPS`
    run ``repeats`` times, with shuffle seeds ``seed``, ``seed + 1``, ...; the inducing inputs
    (k-means, ``seed``) are the same for every run. ``report`` receives each run as a line of text
    as soon as it is measured.
    """
    X, Y = data
    N, D = X.shape
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        raise ValueError(f"models must be among {sorted(MODELS)}; got {unknown}.")
    unknown = sorted(set(loops) - set(LOOPS))
    if unknown or "fit" not in loops:
        raise ValueError(f"loops must be among {list(LOOPS)} and include 'fit'; got {list(loops)}.")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1; got {repeats}.")
    Z = kmeans_inducing_points(X, min(num_inducing, N), seed=seed)
    rows: List[LoopResult] = []
    for model_name in models:
        for loop in (name for name in LOOPS if name in loops):
            runs = []
            for run in range(repeats if loop in STOCHASTIC_LOOPS else 1):
                model = MODELS[model_name](
                    make_kernel(D), make_likelihood(), Z.copy(), num_data=N, train_inducing=False
                )
                start = time.perf_counter()
                train(
                    model,
                    loop,
                    data,
                    steps=steps,
                    batch=batch,
                    learning_rate=learning_rate,
                    seed=seed + run,
                    scipy_maxiter=scipy_maxiter,
                )
                seconds = time.perf_counter() - start
                scores = metrics_function(model, None, *test, compiled=False)()
                elbo = float(model.elbo(data)) / N
                runs.append((seconds, scores["test_accuracy"], scores["test_nll"], elbo))
                report(
                    f"{model_name} {loop} (run {run + 1}): {seconds:.1f} s, "
                    f"accuracy {runs[-1][1]:.4f}, NLL {runs[-1][2]:.4f}, ELBO/N {elbo:.5f}"
                )
            seconds, accuracy, nll, elbo = (float(v) for v in np.median(runs, axis=0))
            accuracies = [run[1] for run in runs]
            rows.append(
                LoopResult(
                    model_name,
                    loop,
                    seconds,
                    accuracy,
                    nll,
                    elbo,
                    len(runs),
                    (min(accuracies), max(accuracies)),
                )
            )
    return rows


def markdown(rows: Sequence[LoopResult]) -> List[str]:
    """
    The table: per model and loop, the figures (medians where a loop ran several times, with the
    range of its test accuracy) and their differences from ``fit``'s.
    """
    lines = [
        "| model | loop | runs | seconds | test accuracy | accuracy range | test NLL "
        "| Δ accuracy (points) | Δ NLL | within | ELBO / N | Δ ELBO / N |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    fitted = {row.model: row for row in rows if row.loop == "fit"}
    for row in rows:
        base = fitted[row.model]
        d_accuracy = row.test_accuracy - base.test_accuracy
        d_nll = row.test_nll - base.test_nll
        within = "—"
        if row.loop != "fit":
            ok = d_accuracy >= -ACCURACY_TOLERANCE and d_nll <= NLL_TOLERANCE
            within = "yes" if ok else "**no**"
        low, high = row.accuracy_range
        spread = f"{low:.4f}–{high:.4f}" if row.runs > 1 else "—"
        lines.append(
            f"| {row.model} | {row.loop} | {row.runs} | {row.seconds:.1f} "
            f"| {row.test_accuracy:.4f} | {spread} | {row.test_nll:.4f} "
            f"| {100 * d_accuracy:+.2f} | {d_nll:+.4f} | {within} "
            f"| {row.elbo:.5f} | {row.elbo - base.elbo:+.5f} |"
        )
    return lines


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.swap``."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.swap",
        description="GPflow's own training loops (Scipy, Adam) on each model against fit.",
    )
    add_benchmark_set(parser)
    add_inducing(parser, 100, aliases=("--num-inducing",))
    parser.add_argument(
        "--steps", metavar="N", type=positive(int), default=2000, help="Adam steps (default: 2000)"
    )
    add_batch_size(parser, 500, "the Adam loop", aliases=("--batch",))
    add_adam_lr(parser, 0.05, "in the Adam loop", aliases=("--lr",))
    add_models(parser, tuple(MODELS))
    add_name_list(parser, "--loops", LOOPS, "loop(s)", LOOPS)
    add_repeats(parser, 1, "runs of the Adam loop, shuffled anew")
    parser.add_argument(
        "--scipy-maxiter",
        metavar="N",
        type=positive(int),
        default=None,
        help="L-BFGS-B's maxiter for the Scipy loop (default: SciPy's)",
    )
    add_data_dir(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if "fit" not in args.loops:
        parser.error("--loops must include fit, which the other loops are compared with")
    X, Y, X_test, Y_test = load_benchmark(args.name, args.data_dir)
    rows = compare_loops(
        (X, Y),
        (X_test, Y_test),
        num_inducing=args.inducing,
        steps=args.steps,
        batch=args.batch_size,
        learning_rate=args.adam_lr,
        models=args.models,
        loops=args.loops,
        repeats=args.repeats,
        scipy_maxiter=args.scipy_maxiter,
    )
    print("\n".join(markdown(rows)))


if __name__ == "__main__":
    main()
