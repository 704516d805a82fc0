"""
The command-line arguments of the benchmark jobs: for each ``gpflow-fastvi`` sub-command, a function
that adds its parser (called by :func:`gpflow_fastvi.cli.build_parser`), and the argument types
they share.

Only the standard library is imported, and the choices and defaults come from
:mod:`gpflow_fastvi.benchmarks.choices`, so that ``gpflow-fastvi --help`` answers without loading
NumPy or TensorFlow.
"""

import argparse
import os
from typing import Any, Callable, Sequence, Tuple

from .choices import (
    ADAM_GRID,
    ALL_METHODS,
    BATCH_SIZE,
    BENCH_DEFAULT_SETS,
    BENCH_INDUCING,
    BENCH_MODELS,
    BENCH_OUT,
    BENCH_SET_NAMES,
    COMPARE_INDUCING,
    COMPARE_OUT,
    DATA_DIR_VARIABLE,
    DEFAULT_ADAM_LR,
    DEFAULT_METHODS,
    INDUCING_M,
    INDUCING_ROUNDS,
    INDUCING_WORKING_SET,
    KL_CORRECTION_MAX_ITER,
    KL_CORRECTION_MAXFUN,
    KL_CORRECTION_OUT,
    KL_CORRECTION_TOL,
    PLACEMENTS,
    RAETSCH_NAMES,
    SCALING_FIXED_M,
    SCALING_FIXED_N,
    SCALING_M,
    SCALING_N,
    SCALING_OUT,
    SCALING_REPEATS,
    TEST_FRACTION,
    TIME_BUDGET,
)

# --------------------------------------------------------------------------------------------------
# Argument types
# --------------------------------------------------------------------------------------------------


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """A parser of one positive value of ``kind`` (int or float), named after ``kind``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def fraction(text: str) -> float:
    """Parse a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text}")
    return value


def choice_list(choices: Tuple[str, ...], what: str) -> Callable[[str], Tuple[str, ...]]:
    """
    A parser of comma-separated names from ``choices``: any case, spaces around commas ignored,
    repeats dropped, in the order given; or ``all`` for every choice.
    """
    by_lower = {choice.lower(): choice for choice in choices}

    def parse(text: str) -> Tuple[str, ...]:
        parts = [part.strip() for part in text.split(",")]
        if [part.lower() for part in parts] == ["all"]:
            return choices
        unknown = [part for part in parts if part.lower() not in by_lower]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(map(repr, unknown))}; choose from "
                f"{', '.join(map(repr, choices))}, or 'all'"
            )
        return tuple(dict.fromkeys(by_lower[part.lower()] for part in parts))

    return parse


def positive_list(kind: Callable[[str], Any]) -> Callable[[str], Tuple[Any, ...]]:
    """A parser of comma-separated positive values of ``kind`` (int or float)."""
    parse_one = positive(kind)

    def parse(text: str) -> Tuple[Any, ...]:
        return tuple(parse_one(part) for part in text.split(","))

    return parse


parse_methods = choice_list(ALL_METHODS, "method(s)")
"""The ``--methods`` value of ``compare``: see :func:`choice_list`."""


def _number(value: float) -> str:
    """``value`` as the help texts show it: ``1000000``, ``60``, ``0.01``, ``1e-8``."""
    if isinstance(value, int):
        return str(value)
    mantissa, e, exponent = f"{value:g}".partition("e")
    return mantissa + (f"e{int(exponent)}" if e else "")


def _numbers(values: Sequence[float]) -> str:
    """``values`` as the help texts show a list of them: ``0.001,0.01,0.1``."""
    return ",".join(map(_number, values))


# --------------------------------------------------------------------------------------------------
# The sub-commands
# --------------------------------------------------------------------------------------------------


def add_compare_command(commands: Any) -> None:
    """Add ``compare`` to ``commands`` (the sub-parsers of :func:`gpflow_fastvi.cli.build_parser`)."""
    compare = commands.add_parser(
        "compare",
        help="race VIJJ (and the other fast methods) against GPflow's SVGP on one data set",
        description=(
            "Train VIJJ, SVGP + Scipy (L-BFGS, full batch) and SVGP + Adam (mini-batches), or the "
            "methods chosen with --methods, from the same start for the same wall-clock budget "
            "each; print final test accuracy, test NLL, ELBO, time to target and the time ratios "
            "of the fast methods against the SVGP baselines, and write comparison.png and "
            "comparison.json. Data files "
            "may be CSV/dense text or LIBSVM (optionally gzip/bzip2/xz compressed); any two label "
            "values are accepted, the larger one being the positive class. Features are "
            "standardised with the training part's mean and standard deviation."
        ),
    )
    compare.add_argument(
        "--train",
        metavar="FILE",
        help="training data file (default: the bundled Rätsch banana set, split at random)",
    )
    compare.add_argument(
        "--test",
        metavar="FILE",
        help="test data file (default: hold out --test-fraction of the training data)",
    )
    compare.add_argument(
        "--label-column",
        metavar="K",
        type=int,
        default=0,
        help="label column of CSV/dense files; negative counts from the end (default: 0)",
    )
    compare.add_argument(
        "--methods",
        metavar="LIST",
        type=parse_methods,
        default=DEFAULT_METHODS,
        help=(
            "comma-separated methods to run, in this order, from: "
            + ", ".join(ALL_METHODS)
            + "; or 'all'. Quote the list, as the names hold spaces (default: "
            + ",".join(DEFAULT_METHODS)
            + ")"
        ),
    )
    compare.add_argument(
        "--inducing",
        metavar="M",
        type=positive(int),
        default=COMPARE_INDUCING,
        help=f"number of inducing points, fixed at k-means centres (default: {COMPARE_INDUCING})",
    )
    compare.add_argument(
        "--time-budget",
        metavar="S",
        type=positive(float),
        default=TIME_BUDGET,
        help=f"training seconds per method (default: {_number(TIME_BUDGET)})",
    )
    compare.add_argument(
        "--batch-size",
        metavar="B",
        type=positive(int),
        default=BATCH_SIZE,
        help=(
            "mini-batch size of SVGP + Adam and SVGP + NatGrad + Adam; PolyaGammaSVGP runs with "
            f"its own default (default: {BATCH_SIZE})"
        ),
    )
    compare.add_argument(
        "--adam-lr",
        metavar="LR",
        type=positive(float),
        default=DEFAULT_ADAM_LR,
        help=(
            "Adam's learning rate in SVGP + Adam, and for the hyperparameters in "
            "SVGP + NatGrad + Adam; PolyaGammaSVGP runs with its own default "
            f"(default: {_number(DEFAULT_ADAM_LR)})"
        ),
    )
    compare.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the split, k-means and mini-batches (default: 0)",
    )
    compare.add_argument(
        "--test-fraction",
        metavar="F",
        type=fraction,
        default=TEST_FRACTION,
        help="share of the data held out for testing when no --test is given (default: "
        f"{_number(TEST_FRACTION)})",
    )
    compare.add_argument(
        "--out",
        metavar="DIR",
        default=COMPARE_OUT,
        help=f"folder for comparison.png and comparison.json (default: {COMPARE_OUT})",
    )
    compare.add_argument("--progress", action="store_true", help="show a progress bar per method")


def add_kl_correction_command(commands: Any) -> None:
    """Add ``kl-correction`` to ``commands``."""
    klc = commands.add_parser(
        "kl-correction",
        help="reproduce King & Lawrence: EM with the KL-corrected bound against the standard bound",
        description=(
            "Train KLCorrected (full GP, probit, RBF + bias + white kernel) with bound='kl_corrected' and "
            "with bound='standard' from the same start to the same tolerance, on Rätsch's "
            "benchmark sets, and report EM iterations, seconds and test error beside the paper's "
            "Table 1. Writes results.json (after every run), table.md and figure2_<set>.png. "
            "Banana's first split is realisation 1, shipped with the package; the other sets are "
            "read from raetsch_bsvm/ under --data-dir and split at random."
        ),
    )
    klc.add_argument(
        "--datasets",
        metavar="LIST",
        type=choice_list(RAETSCH_NAMES, "data set(s)"),
        default=("banana",),
        help=f"comma-separated sets from {', '.join(RAETSCH_NAMES)}, or 'all' (default: banana)",
    )
    klc.add_argument(
        "--data-dir",
        metavar="DIR",
        default=os.environ.get(DATA_DIR_VARIABLE),
        help=(
            f"directory holding raetsch_bsvm/ (default: ${DATA_DIR_VARIABLE}); banana needs none"
        ),
    )
    klc.add_argument(
        "--splits", metavar="K", type=positive(int), default=1, help="splits per set (default: 1)"
    )
    klc.add_argument(
        "--tol",
        metavar="T",
        type=positive(float),
        default=KL_CORRECTION_TOL,
        help="stop when the bound changes by less than T relative to its size (default: "
        f"{_number(KL_CORRECTION_TOL)})",
    )
    klc.add_argument(
        "--max-iter",
        metavar="N",
        type=positive(int),
        default=KL_CORRECTION_MAX_ITER,
        help=f"cap on EM iterations per run (default: {KL_CORRECTION_MAX_ITER})",
    )
    klc.add_argument(
        "--maxfun",
        metavar="F",
        type=positive(int),
        default=KL_CORRECTION_MAXFUN,
        help=f"L-BFGS-B evaluations per M-step (default: {KL_CORRECTION_MAXFUN})",
    )
    klc.add_argument(
        "--time-budget",
        metavar="S",
        type=positive(float),
        default=None,
        help="cap on training seconds per run (default: none)",
    )
    klc.add_argument(
        "--out",
        metavar="DIR",
        default=KL_CORRECTION_OUT,
        help=f"output folder (default: {KL_CORRECTION_OUT})",
    )


def add_bench_commands(commands: Any) -> None:
    """Add ``bench``, ``plot`` and ``scaling`` to ``commands``."""
    bench = commands.add_parser(
        "bench",
        help="every model and GPflow baseline on the benchmark sets, traced into results.json",
        description=(
            "Train every model with its defaults and the GPflow baselines (SVGP + Scipy, "
            "SVGP + Adam at each rate of --adam-grid, SVGP + NatGrad + Adam) on the same kernel "
            "start, fixed k-means inducing inputs and logit link, for the same wall-clock budget "
            "each; record test accuracy, test NLL and ELBO against training time. results.json "
            "in --out is rewritten after every method, and runs already in it are skipped, so "
            "an interrupted run can be continued by running the same command again. Data sets "
            "other than banana are read from --data-dir and verified against their checksums; "
            "nothing is downloaded. Draw the results with `gpflow-fastvi plot DIR`."
        ),
    )
    bench.add_argument(
        "--datasets",
        metavar="LIST",
        type=choice_list(BENCH_SET_NAMES, "data set(s)"),
        default=BENCH_DEFAULT_SETS,
        help=f"comma-separated sets from {', '.join(BENCH_SET_NAMES)}, or 'all' (default: "
        f"{','.join(BENCH_DEFAULT_SETS)})",
    )
    bench.add_argument(
        "--models",
        metavar="LIST",
        type=choice_list(BENCH_MODELS, "model(s)"),
        default=BENCH_MODELS,
        help=f"comma-separated, quoted, from {', '.join(BENCH_MODELS)}; or 'all' (default: all)",
    )
    bench.add_argument(
        "--data-dir",
        metavar="DIR",
        default=None,
        help=f"directory holding the benchmark files (default: ${DATA_DIR_VARIABLE}); banana "
        "needs none",
    )
    bench.add_argument(
        "--inducing",
        metavar="M",
        type=positive(int),
        default=BENCH_INDUCING,
        help=f"inducing inputs, fixed at k-means centres (default: {BENCH_INDUCING})",
    )
    bench.add_argument(
        "--time-budget",
        metavar="S",
        type=positive(float),
        default=TIME_BUDGET,
        help=f"training seconds per method and run (default: {_number(TIME_BUDGET)})",
    )
    bench.add_argument(
        "--repeats",
        metavar="R",
        type=positive(int),
        default=1,
        help="runs per set, seeds 0..R-1 (split, k-means, mini-batches) (default: 1)",
    )
    bench.add_argument(
        "--adam-grid",
        metavar="LRS",
        type=positive_list(float),
        default=ADAM_GRID,
        help=f"SVGP + Adam's learning rates; {_number(DEFAULT_ADAM_LR)} is always added (default: "
        f"{_numbers(ADAM_GRID)})",
    )
    bench.add_argument(
        "--batch-size",
        metavar="B",
        type=positive(int),
        default=BATCH_SIZE,
        help=(
            "mini-batch size of the SVGP mini-batch baselines; PolyaGammaSVGP runs with its own "
            f"default (default: {BATCH_SIZE})"
        ),
    )
    bench.add_argument("--out", metavar="DIR", default=BENCH_OUT, help=f"(default: {BENCH_OUT})")
    bench.add_argument("--progress", action="store_true", help="show a progress bar per method")

    plot = commands.add_parser(
        "plot",
        help="figures and a Markdown table from a bench results folder",
        description=(
            "Read DIR/results.json and write DIR/bench.png (accuracy and NLL against time, one "
            "column per data set), DIR/<set>.png and DIR/table.md (final accuracy and NLL, time "
            "to target, and its ratio to each baseline)."
        ),
    )
    plot.add_argument("dir", metavar="DIR", help="the --out folder of gpflow-fastvi bench")

    scaling = commands.add_parser(
        "scaling",
        help="seconds per full-batch update of the shared core against n and m",
        description=(
            "Time one compiled update (VIJJ.update_sites) on synthetic data for each n at "
            "m = --fixed-m and each m at n = --fixed-n, beside the floor 2·n·m² / (the machine's "
            "measured float64 matmul rate). Writes scaling.json, scaling.md and scaling.png."
        ),
    )
    scaling.add_argument(
        "--n",
        metavar="LIST",
        type=positive_list(int),
        default=SCALING_N,
        help=f"numbers of points (default: {_numbers(SCALING_N)})",
    )
    scaling.add_argument(
        "--m",
        metavar="LIST",
        type=positive_list(int),
        default=SCALING_M,
        help=f"numbers of inducing inputs (default: {_numbers(SCALING_M)})",
    )
    scaling.add_argument("--fixed-m", metavar="M", type=positive(int), default=SCALING_FIXED_M)
    scaling.add_argument("--fixed-n", metavar="N", type=positive(int), default=SCALING_FIXED_N)
    scaling.add_argument(
        "--repeats",
        metavar="R",
        type=positive(int),
        default=SCALING_REPEATS,
        help=f"timed calls (default: {SCALING_REPEATS})",
    )
    scaling.add_argument(
        "--out", metavar="DIR", default=SCALING_OUT, help=f"(default: {SCALING_OUT})"
    )


__all__ = [
    "add_bench_commands",
    "add_compare_command",
    "add_kl_correction_command",
    "choice_list",
    "fraction",
    "parse_methods",
    "positive",
    "positive_list",
]


def add_inducing_command(commands: Any) -> argparse.ArgumentParser:
    """Add ``inducing`` (:mod:`gpflow_fastvi.benchmarks.inducing`) to ``commands``."""
    inducing = commands.add_parser(
        "inducing",
        help="test accuracy and NLL against M for random, k-means and greedy inducing inputs",
        description=(
            "For each M, place M inducing inputs at random rows, k-means centres, by greedy "
            "selection (trace criterion, at the starting kernel) and by fit's greedy rounds "
            "(the selection redone at the trained kernel, weighted by the sites), train VIJJ by "
            "fit with them held fixed, and print the trace term, the seconds, the ELBO and the "
            "test figures as a Markdown table."
        ),
    )
    add_inducing_arguments(inducing)
    return inducing


def add_inducing_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``inducing`` (also ``python -m gpflow_fastvi.benchmarks.inducing``)."""
    parser.add_argument("name", choices=BENCH_SET_NAMES, help="the benchmark set")
    parser.add_argument(
        "--m",
        metavar="LIST",
        type=positive_list(int),
        default=INDUCING_M,
        help=f"numbers of inducing inputs (default: {_numbers(INDUCING_M)})",
    )
    parser.add_argument(
        "--placements",
        metavar="LIST",
        type=choice_list(PLACEMENTS, "placement(s)"),
        default=PLACEMENTS,
        help=f"comma-separated, quoted, from {', '.join(PLACEMENTS)}; or 'all' (default: all)",
    )
    parser.add_argument(
        "--working-set",
        metavar="J",
        type=int,
        default=INDUCING_WORKING_SET,
        help=f"greedy working set size, 0 for every row (default: {INDUCING_WORKING_SET})",
    )
    parser.add_argument(
        "--rounds",
        metavar="R",
        type=positive(int),
        default=INDUCING_ROUNDS,
        help=f"selections of 'greedy rounds' (default: {INDUCING_ROUNDS})",
    )
    parser.add_argument(
        "--time-budget",
        metavar="S",
        type=positive(float),
        default=None,
        help="training seconds per fit (default: none, fit to convergence)",
    )
    parser.add_argument("--seed", type=int, default=0, help="split, random rows, k-means, draws")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=None,
        help=f"directory holding the benchmark files (default: ${DATA_DIR_VARIABLE})",
    )
