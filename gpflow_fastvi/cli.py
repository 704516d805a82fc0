"""
The ``gpflow-fastvi`` console script.

``gpflow-fastvi compare`` trains VIJJ, SVGP + Scipy and SVGP + Adam (or the ``--methods`` chosen)
on one data set for the same time budget each, prints a table, and writes a figure and the traces
(see :mod:`gpflow_fastvi.compare`). With no ``--train`` it uses the bundled banana set.

``gpflow-fastvi kl-correction`` reruns the experiments of King & Lawrence with
:class:`~gpflow_fastvi.KLCorrected` (see :mod:`gpflow_fastvi.kl_correction`).

``gpflow-fastvi bench`` runs every model and GPflow baseline on the benchmark sets into
``results.json``; ``gpflow-fastvi plot`` draws its figures and table; ``gpflow-fastvi scaling``
times one update of the shared core against n and m (see :mod:`gpflow_fastvi.benchmarks`).

Only the standard library is imported at module level, so ``gpflow-fastvi --help`` answers without
loading TensorFlow.
"""

import argparse
import importlib.util
import os
import sys
from typing import Any, Callable, Optional, Sequence, Tuple

DEFAULT_OUT = "compare-output"

METHOD_NAMES: Tuple[str, ...] = (
    "VIJJ",
    "VITaylor",
    "KLCorrected",
    "PolyaGammaSVGP",
    "SVGP + Scipy",
    "SVGP + Adam",
    "SVGP + NatGrad + Adam",
)
"""``gpflow_fastvi.compare.ALL_METHODS``, repeated so that ``--help`` does not load TensorFlow (a
test checks that the two agree)."""
DEFAULT_METHOD_NAMES: Tuple[str, ...] = ("VIJJ", "SVGP + Scipy", "SVGP + Adam")
"""``gpflow_fastvi.compare.DEFAULT_METHODS``, likewise."""


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
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


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text}")
    return value


def _choice_list(choices: Tuple[str, ...], what: str) -> Callable[[str], Tuple[str, ...]]:
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


def _positive_list(kind: Callable[[str], Any]) -> Callable[[str], Tuple[Any, ...]]:
    """A parser of comma-separated positive values of ``kind`` (int or float)."""
    parse_one = _positive(kind)

    def parse(text: str) -> Tuple[Any, ...]:
        return tuple(parse_one(part) for part in text.split(","))

    return parse


parse_methods = _choice_list(METHOD_NAMES, "method(s)")
"""The ``--methods`` value of ``compare``: see :func:`_choice_list`."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``gpflow-fastvi``."""
    parser = argparse.ArgumentParser(
        prog="gpflow-fastvi",
        description="Fast variational GP classification for GPflow 2.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
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
        default=DEFAULT_METHOD_NAMES,
        help=(
            "comma-separated methods to run, in this order, from: "
            + ", ".join(METHOD_NAMES)
            + "; or 'all'. Quote the list, as the names hold spaces (default: "
            + ",".join(DEFAULT_METHOD_NAMES)
            + ")"
        ),
    )
    compare.add_argument(
        "--inducing",
        metavar="M",
        type=_positive(int),
        default=50,
        help="number of inducing points, fixed at k-means centres (default: 50)",
    )
    compare.add_argument(
        "--time-budget",
        metavar="S",
        type=_positive(float),
        default=60.0,
        help="training seconds per method (default: 60)",
    )
    compare.add_argument(
        "--batch-size",
        metavar="B",
        type=_positive(int),
        default=100,
        help=(
            "mini-batch size of SVGP + Adam, SVGP + NatGrad + Adam and PolyaGammaSVGP "
            "(default: 100)"
        ),
    )
    compare.add_argument(
        "--adam-lr",
        metavar="LR",
        type=_positive(float),
        default=0.01,
        help=(
            "Adam's learning rate in SVGP + Adam, and for the hyperparameters in "
            "SVGP + NatGrad + Adam and PolyaGammaSVGP (default: 0.01)"
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
        type=_fraction,
        default=0.2,
        help="share of the data held out for testing when no --test is given (default: 0.2)",
    )
    compare.add_argument(
        "--out",
        metavar="DIR",
        default=DEFAULT_OUT,
        help=f"folder for comparison.png and comparison.json (default: {DEFAULT_OUT})",
    )
    compare.add_argument("--progress", action="store_true", help="show a progress bar per method")

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
        type=_dataset_list,
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
        "--splits", metavar="K", type=_positive(int), default=1, help="splits per set (default: 1)"
    )
    klc.add_argument(
        "--tol",
        metavar="T",
        type=_positive(float),
        default=1e-8,
        help="stop when the bound changes by less than T relative to its size (default: 1e-8)",
    )
    klc.add_argument(
        "--max-iter",
        metavar="N",
        type=_positive(int),
        default=10_000,
        help="cap on EM iterations per run (default: 10000)",
    )
    klc.add_argument(
        "--maxfun",
        metavar="F",
        type=_positive(int),
        default=20,
        help="L-BFGS-B evaluations per M-step (default: 20)",
    )
    klc.add_argument(
        "--time-budget",
        metavar="S",
        type=_positive(float),
        default=None,
        help="cap on training seconds per run (default: none)",
    )
    klc.add_argument(
        "--out",
        metavar="DIR",
        default="kl-correction-output",
        help="output folder (default: kl-correction-output)",
    )
    _add_bench_commands(commands)
    return parser


BENCH_SET_NAMES: Tuple[str, ...] = (
    "banana",
    "german",
    "svmguide1",
    "ijcnn1",
    "a9a",
    "breast_cancer",
    "diabetis",
    "heart",
    "german_raetsch",
)
"""``gpflow_fastvi.datasets.BENCHMARK_SETS``, repeated so that ``--help`` does not load NumPy."""
BENCH_DEFAULT_SETS: Tuple[str, ...] = ("german", "svmguide1", "banana", "ijcnn1", "a9a")
"""``gpflow_fastvi.benchmarks.runs.DEFAULT_DATASETS``, likewise."""
BENCH_MODELS = METHOD_NAMES
"""``gpflow_fastvi.benchmarks.runs.MODELS``: every method ``compare`` knows."""


def _add_bench_commands(commands: Any) -> None:
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
        type=_choice_list(BENCH_SET_NAMES, "data set(s)"),
        default=BENCH_DEFAULT_SETS,
        help=f"comma-separated sets from {', '.join(BENCH_SET_NAMES)}, or 'all' (default: "
        f"{','.join(BENCH_DEFAULT_SETS)})",
    )
    bench.add_argument(
        "--models",
        metavar="LIST",
        type=_choice_list(BENCH_MODELS, "model(s)"),
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
        type=_positive(int),
        default=100,
        help="inducing inputs, fixed at k-means centres (default: 100)",
    )
    bench.add_argument(
        "--time-budget",
        metavar="S",
        type=_positive(float),
        default=60.0,
        help="training seconds per method and run (default: 60)",
    )
    bench.add_argument(
        "--repeats",
        metavar="R",
        type=_positive(int),
        default=1,
        help="runs per set, seeds 0..R-1 (split, k-means, mini-batches) (default: 1)",
    )
    bench.add_argument(
        "--adam-grid",
        metavar="LRS",
        type=_positive_list(float),
        default=(0.001, 0.01, 0.1),
        help="SVGP + Adam's learning rates; 0.01 is always added (default: 0.001,0.01,0.1)",
    )
    bench.add_argument(
        "--batch-size",
        metavar="B",
        type=_positive(int),
        default=100,
        help="mini-batch size of the stochastic methods (default: 100)",
    )
    bench.add_argument(
        "--out", metavar="DIR", default="bench-output", help="(default: bench-output)"
    )
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
        type=_positive_list(int),
        default=(1_000, 10_000, 100_000, 1_000_000),
        help="numbers of points (default: 1000,10000,100000,1000000)",
    )
    scaling.add_argument(
        "--m",
        metavar="LIST",
        type=_positive_list(int),
        default=(25, 50, 100, 200, 400, 800),
        help="numbers of inducing inputs (default: 25,50,100,200,400,800)",
    )
    scaling.add_argument("--fixed-m", metavar="M", type=_positive(int), default=100)
    scaling.add_argument("--fixed-n", metavar="N", type=_positive(int), default=10_000)
    scaling.add_argument(
        "--repeats", metavar="R", type=_positive(int), default=3, help="timed calls (default: 3)"
    )
    scaling.add_argument(
        "--out", metavar="DIR", default="scaling-output", help="(default: scaling-output)"
    )


RAETSCH_NAMES: Tuple[str, ...] = ("banana", "breast_cancer", "diabetis", "german", "heart")
"""``gpflow_fastvi.kl_correction.RAETSCH_SETS``, repeated so that ``--help`` does not load NumPy."""
DATA_DIR_VARIABLE = "GPFLOW_FASTVI_DATA"
_dataset_list = _choice_list(RAETSCH_NAMES, "data set(s)")


def _load_data(args: argparse.Namespace) -> Tuple[str, Tuple[Any, Any, Any, Any]]:
    """The data set's name and its standardised ``(X_train, Y_train, X_test, Y_test)``."""
    from .datasets import load_banana, load_file, load_train_test, standardise, train_test_split

    if args.train is None:
        name = "banana (bundled)"
        X_train, Y_train, X_test, Y_test = train_test_split(
            *load_banana(), test_fraction=args.test_fraction, seed=args.seed
        )
    elif args.test is None:
        name = os.path.basename(args.train)
        X_train, Y_train, X_test, Y_test = train_test_split(
            *load_file(args.train, args.label_column),
            test_fraction=args.test_fraction,
            seed=args.seed,
        )
    else:
        name = f"{os.path.basename(args.train)} / {os.path.basename(args.test)}"
        X_train, Y_train, X_test, Y_test = load_train_test(args.train, args.test, args.label_column)
    X_train, X_test = standardise(X_train, X_test)
    return name, (X_train, Y_train, X_test, Y_test)


def _has_matplotlib() -> bool:
    """Whether the figures can be drawn (matplotlib comes with the [bench] extra)."""
    return importlib.util.find_spec("matplotlib") is not None


def _fail(message: object) -> int:
    print(f"gpflow-fastvi: error: {message}", file=sys.stderr)
    return 1


def _compare(args: argparse.Namespace) -> int:
    from .datasets.loaders import BENCH_INSTALL_HINT

    if not _has_matplotlib():  # fail before any work, not after
        return _fail(f"the compare figure needs matplotlib: {BENCH_INSTALL_HINT}")
    try:
        name, (X_train, Y_train, X_test, Y_test) = _load_data(args)
    except (OSError, ValueError, ImportError) as error:  # unreadable data, or no scikit-learn
        return _fail(error)
    n_train, d = X_train.shape
    if args.inducing > n_train:
        return _fail(f"--inducing {args.inducing} is more than the {n_train} training points")
    print(f"Data: {name}")
    print(f"n_train = {n_train}, n_test = {X_test.shape[0]}, d = {d}, m = {args.inducing}")
    print(
        f"Time budget: {args.time_budget:g} s per method ({', '.join(args.methods)}). Training...",
        flush=True,
    )

    from .compare import run_comparison

    result = run_comparison(
        X_train,
        Y_train,
        X_test,
        Y_test,
        methods=args.methods,
        num_inducing=args.inducing,
        time_budget=args.time_budget,
        adam_lr=args.adam_lr,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=args.progress,
    )
    result.settings["dataset"] = name
    print()
    print(result.format_table())
    print()
    title = f"{name}: n = {n_train}, d = {d}, m = {args.inducing}"
    png_path, json_path = result.save(args.out, title=title)
    print(f"Wrote {png_path}")
    print(f"Wrote {json_path}")
    return 0


def _kl_correction(args: argparse.Namespace) -> int:
    from .datasets.loaders import BENCH_INSTALL_HINT

    if not _has_matplotlib():  # fail before any work, not after
        return _fail(f"the kl-correction figure needs matplotlib: {BENCH_INSTALL_HINT}")
    from . import kl_correction

    try:
        for name in args.datasets:  # fail on missing files before any training
            kl_correction.load_split(name, 0, args.data_dir)
    except (OSError, ValueError) as error:
        return _fail(error)
    results = kl_correction.run(
        args.datasets,
        splits=args.splits,
        data_dir=args.data_dir,
        tol=args.tol,
        max_iter=args.max_iter,
        maxfun=args.maxfun,
        time_budget=args.time_budget,
        out=args.out,
        log=lambda line: print(line, flush=True),
    )
    table = kl_correction.markdown_table(results)
    print()
    print(table)
    with open(os.path.join(args.out, "table.md"), "w") as file:
        file.write(table)
    for name in args.datasets:
        path = os.path.join(args.out, f"figure2_{name}.png")
        kl_correction.plot_bound_against_iteration(results, name, path)
        print(f"Wrote {path}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .benchmarks.runs import RESULTS_FILE, run_bench

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
            progress=args.progress,
            log=lambda line: print(line, flush=True),
        )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: {os.path.join(args.out, RESULTS_FILE)} holds every method that "
            "finished; run the same command again to go on",
            file=sys.stderr,
        )
        return 130
    except (OSError, ValueError, ImportError) as error:
        # missing or damaged data, a results file of other settings, or no scikit-learn for LIBSVM
        return _fail(error)
    print(
        f"Wrote {os.path.join(args.out, RESULTS_FILE)}; draw it with: gpflow-fastvi plot {args.out}"
    )
    return 0


def _plot(args: argparse.Namespace) -> int:
    from .datasets.loaders import BENCH_INSTALL_HINT

    if not _has_matplotlib():  # fail before any work, not after
        return _fail(f"plot needs matplotlib: {BENCH_INSTALL_HINT}")
    from .benchmarks.report import write_report

    try:
        written = write_report(args.dir)
    except (OSError, ValueError) as error:
        return _fail(error)
    for path in written:
        print(f"Wrote {path}")
    return 0


def _scaling(args: argparse.Namespace) -> int:
    import json

    from .datasets.loaders import BENCH_INSTALL_HINT

    if not _has_matplotlib():  # fail before any work, not after
        return _fail(f"the scaling figure needs matplotlib: {BENCH_INSTALL_HINT}")
    from .benchmarks import scaling

    result = scaling.run_scaling(
        args.n,
        args.m,
        fixed_m=args.fixed_m,
        fixed_n=args.fixed_n,
        repeats=args.repeats,
        log=lambda line: print(line, flush=True),
    )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scaling.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    table = scaling.markdown_table(result)
    with open(os.path.join(args.out, "scaling.md"), "w", encoding="utf-8") as f:
        f.write(table)
    scaling.plot_scaling(result, os.path.join(args.out, "scaling.png"))
    print()
    print(table)
    print(f"Wrote scaling.json, scaling.md and scaling.png in {args.out}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """
    Run ``gpflow-fastvi`` with ``argv`` (default: the command line) and return the exit status.

    Usage errors raise :class:`SystemExit` with status 2 (argparse's convention); unreadable data
    or a missing optional dependency prints ``gpflow-fastvi: error: ...`` and returns 1.
    """
    parser = build_parser()
    args = parser.parse_args(None if argv is None else list(argv))
    if args.command == "compare":
        if args.test is not None and args.train is None:
            parser.error("compare: --test needs --train as well")
        return _compare(args)
    if args.command == "kl-correction":
        return _kl_correction(args)
    if args.command == "bench":
        return _bench(args)
    if args.command == "plot":
        return _plot(args)
    if args.command == "scaling":
        return _scaling(args)
    parser.error(f"unknown command {args.command!r}")  # unreachable: argparse checks the choice
    return 2


if __name__ == "__main__":
    sys.exit(main())
