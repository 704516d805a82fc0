"""
The ``gpflow-fastvi`` console script.

``gpflow-fastvi compare`` trains VIJJ, SVGP + Scipy and SVGP + Adam (or the ``--methods`` chosen)
on one data set for the same time budget each, prints a table, and writes a figure and the traces
(see :mod:`gpflow_fastvi.benchmarks.compare`). With no ``--train`` it uses the bundled banana set.

``gpflow-fastvi kl-correction`` reruns the experiments of King & Lawrence with
:class:`~gpflow_fastvi.KLCorrected` (see :mod:`gpflow_fastvi.benchmarks.kl_correction`).

``gpflow-fastvi bench`` runs every model and GPflow baseline on the benchmark sets into
``results.json``; ``gpflow-fastvi plot`` draws its figures and table; ``gpflow-fastvi scaling``
times one update of the shared core against n and m (see :mod:`gpflow_fastvi.benchmarks`);
``gpflow-fastvi inducing`` compares random, k-means and greedy inducing inputs against M (see
:mod:`gpflow_fastvi.benchmarks.inducing`).

The sub-commands' arguments are defined in :mod:`gpflow_fastvi.benchmarks.cli_args`, their
choices and defaults in :mod:`gpflow_fastvi.benchmarks.choices`. Only the standard library and those
two modules are imported at module level, so ``gpflow-fastvi --help`` answers without loading
NumPy or TensorFlow.
"""

import argparse
import importlib.util
import os
import sys
from typing import Any, Optional, Sequence, Tuple

from ._version import __version__
from .benchmarks.cli_args import (
    add_bench_commands,
    add_compare_command,
    add_inducing_command,
    add_kl_correction_command,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``gpflow-fastvi``."""
    parser = argparse.ArgumentParser(
        prog="gpflow-fastvi",
        description="Fast variational GP classification for GPflow 2.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_compare_command(commands)
    add_kl_correction_command(commands)
    add_bench_commands(commands)
    add_inducing_command(commands)
    return parser


def _load_data(args: argparse.Namespace) -> Tuple[str, Tuple[Any, Any, Any, Any]]:
    """The data set's name and its standardised ``(X_train, Y_train, X_test, Y_test)``."""
    from .datasets import load_banana, load_file, load_train_test, standardise, train_test_split

    if args.train is None:
        name = "banana (bundled)"
        X_train, Y_train, X_test, Y_test = train_test_split(
            *load_banana(), test_fraction=args.test_fraction, seed=args.seed
        )
        classes = (-1.0, 1.0)
    elif args.test is None:
        name = os.path.basename(args.train)
        X, Y, classes = load_file(args.train, args.label_column, return_classes=True)
        X_train, Y_train, X_test, Y_test = train_test_split(
            X, Y, test_fraction=args.test_fraction, seed=args.seed
        )
    else:
        name = f"{os.path.basename(args.train)} / {os.path.basename(args.test)}"
        *split, classes = load_train_test(
            args.train, args.test, args.label_column, return_classes=True
        )
        X_train, Y_train, X_test, Y_test = split
    negative, positive = classes
    print(f"labels: {negative!r} -> 0, {positive!r} -> 1 (the positive class)")
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

    from .benchmarks.compare import run_comparison

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
    from .benchmarks import kl_correction

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


def _inducing(args: argparse.Namespace) -> int:
    from .benchmarks import inducing

    try:
        inducing.run(args)
    except (OSError, ValueError) as error:  # missing or damaged data, M larger than the set
        return _fail(error)
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


def quiet_tensorflow() -> None:
    """
    Import TensorFlow with its C++ start-up log (no GPU found, oneDNN notices) kept out of the
    output, unless the user set ``TF_CPP_MIN_LOG_LEVEL`` themselves (then they asked for it).
    TensorFlow writes part of that log before its log level is read, straight to the process's
    standard error, so the import runs with file descriptor 2 pointed at the null device; an
    import error is still raised, and shown once the descriptor is restored.
    """
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """
    Run ``gpflow-fastvi`` with ``argv`` (default: the command line) and return the exit status.

    Usage errors raise :class:`SystemExit` with status 2 (argparse's convention); unreadable data
    or a missing optional dependency prints ``gpflow-fastvi: error: ...`` and returns 1.
    """
    parser = build_parser()
    args = parser.parse_args(None if argv is None else list(argv))
    quiet_tensorflow()
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
    if args.command == "inducing":
        return _inducing(args)
    parser.error(f"unknown command {args.command!r}")  # unreachable: argparse checks the choice
    return 2


if __name__ == "__main__":
    sys.exit(main())
