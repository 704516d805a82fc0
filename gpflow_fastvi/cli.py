"""
The ``gpflow-fastvi`` console script.

``gpflow-fastvi compare`` trains VIJJ, SVGP + Scipy and SVGP + Adam (or the ``--methods`` chosen)
on one data set for the same time budget each, prints a table, and writes a figure and the traces
(see :mod:`gpflow_fastvi.benchmarks.compare`). With no ``--train`` it uses the bundled banana set.

``gpflow-fastvi kl-correction`` reruns the experiments of King & Lawrence with
:class:`~gpflow_fastvi.KLCorrected` (see :mod:`gpflow_fastvi.benchmarks.kl_correction`).

``gpflow-fastvi bench`` runs every model and GPflow baseline on the benchmark sets into
``results.json`` (:mod:`gpflow_fastvi.benchmarks.runs`); ``gpflow-fastvi plot`` draws its figures
and table (:mod:`gpflow_fastvi.benchmarks.report`); ``gpflow-fastvi scaling`` times one update of
the shared core against n and m (:mod:`gpflow_fastvi.benchmarks.scaling`);
``gpflow-fastvi inducing`` compares random, k-means and greedy inducing inputs against M (see
:mod:`gpflow_fastvi.benchmarks.inducing`).

The sub-commands' arguments are defined in :mod:`gpflow_fastvi.benchmarks.cli_args`, their
choices and defaults in :mod:`gpflow_fastvi.benchmarks.choices`. Each sub-command runs the
``command`` function of its job module (:data:`JOBS`), imported only once the command line has
been parsed, so that ``gpflow-fastvi --help`` answers without loading TensorFlow.
"""

import argparse
import importlib
import importlib.util
import os
import sys
from typing import Dict, NamedTuple, Optional, Sequence

from ._version import __version__
from .benchmarks.commands import (
    add_bench_commands,
    add_compare_command,
    add_inducing_command,
    add_kl_correction_command,
)


class Job(NamedTuple):
    """
    Where a sub-command's work is done: the function ``command(args) -> int`` of a module of
    :mod:`gpflow_fastvi.benchmarks`, given the parsed command line and returning the exit status.
    """

    module: str
    """The job module's name within :mod:`gpflow_fastvi.benchmarks`."""
    draws: Optional[str] = None
    """What the job draws with matplotlib, for the message if it is missing; None if nothing."""


JOBS: Dict[str, Job] = {
    "compare": Job("compare", draws="the compare figure"),
    "kl-correction": Job("kl_correction", draws="the kl-correction figure"),
    "bench": Job("runs"),
    "plot": Job("report", draws="plot"),
    "scaling": Job("scaling", draws="the scaling figure"),
    "inducing": Job("inducing"),
}
"""Every sub-command's job."""


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


def _fail(message: object) -> int:
    print(f"gpflow-fastvi: error: {message}", file=sys.stderr)
    return 1


def run_job(command: str, args: argparse.Namespace) -> int:
    """
    Run ``command``'s job on the parsed ``args`` and return the exit status: the job's own, 1
    (with ``gpflow-fastvi: error: ...``) for unreadable or missing data, settings the data
    cannot meet or a missing optional dependency (:class:`OSError`, :class:`ValueError`,
    :class:`ImportError`), checked before any work where it can be, and 130 if interrupted.
    """
    job = JOBS[command]
    if job.draws is not None and importlib.util.find_spec("matplotlib") is None:
        from .datasets.loaders import BENCH_INSTALL_HINT

        return _fail(f"{job.draws} needs matplotlib: {BENCH_INSTALL_HINT}")
    try:
        quiet_tensorflow()
        module = importlib.import_module(f".benchmarks.{job.module}", __package__)
        return int(module.command(args))
    except KeyboardInterrupt as interrupt:  # a job may say what it kept, as bench does
        note = f": {interrupt}" if str(interrupt) else ""
        print(f"\ninterrupted{note}", file=sys.stderr)
        return 130
    except (OSError, ValueError, ImportError) as error:
        return _fail(error)


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
    or a missing optional dependency prints ``gpflow-fastvi: error: ...`` and returns 1
    (:func:`run_job`).
    """
    parser = build_parser()
    args = parser.parse_args(None if argv is None else list(argv))
    if args.command == "compare" and args.test is not None and args.train is None:
        parser.error("compare: --test needs --train as well")
    return run_job(args.command, args)


if __name__ == "__main__":
    sys.exit(main())
