"""
The command-line arguments of the benchmark jobs: one function per argument that several commands
take. The sub-commands' parsers are built from them in :mod:`gpflow_fastvi.benchmarks.commands`;
the scripts of ``experiments/`` take the arguments they share with the commands from here too.

Each argument's flags, metavar and type are written once, in its function; what differs between
the commands that take it (the default, what it applies to) is a parameter. The types are those of
:mod:`gpflow_fastvi.benchmarks.arg_types`, the choices and defaults those of
:mod:`gpflow_fastvi.benchmarks.choices`; neither loads TensorFlow, so that ``gpflow-fastvi --help``
answers at once.
"""

import argparse
import sys
from typing import Optional, Sequence, Tuple

from .arg_types import (
    choice_list,
    format_number,
    format_numbers,
    positive,
    positive_list,
    whole_number,
)
from .choices import (
    ALL_METHODS,
    BENCH_SET_NAMES,
    DATA_DIR_VARIABLE,
)

parse_methods = choice_list(ALL_METHODS, "method(s)")
"""The ``--methods`` value of ``compare``: see :func:`~gpflow_fastvi.benchmarks.arg_types.choice_list`."""

# --------------------------------------------------------------------------------------------------
# Arguments that several commands take
# --------------------------------------------------------------------------------------------------


def add_benchmark_set(
    parser: argparse.ArgumentParser, choices: Tuple[str, ...] = BENCH_SET_NAMES
) -> None:
    """The positional ``name``: one set of :data:`~gpflow_fastvi.datasets.BENCHMARK_SETS`."""
    parser.add_argument(
        "name", metavar="SET", choices=choices, help=f"the benchmark set: {', '.join(choices)}"
    )


def add_record(parser: argparse.ArgumentParser) -> None:
    """``--record FILE``: also write the printed table as a table record
    (:func:`~gpflow_fastvi.benchmarks.pages.write_table_record`), for a results page."""
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="also write the table, with this command and today's date, as a table record "
        "(gpflow_fastvi.benchmarks.pages renders it on a results page)",
    )


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    """``--data-dir``: the folder of the benchmark files (``data_dir`` of
    :func:`~gpflow_fastvi.datasets.load_benchmark`); None reads ``$GPFLOW_FASTVI_DATA``."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=None,
        help=f"directory holding the benchmark files (default: ${DATA_DIR_VARIABLE}); banana "
        "needs none",
    )


def add_name_list(
    parser: argparse.ArgumentParser,
    flag: str,
    choices: Tuple[str, ...],
    what: str,
    default: Tuple[str, ...],
) -> None:
    """``flag``: comma-separated names from ``choices``, or ``all``
    (:func:`~gpflow_fastvi.benchmarks.arg_types.choice_list`); ``what`` names them in errors."""
    quoted = ", quoted," if any(" " in choice for choice in choices) else ""
    shown = "all" if default == choices else ",".join(default)
    parser.add_argument(
        flag,
        metavar="LIST",
        type=choice_list(choices, what),
        default=default,
        help=f"comma-separated{quoted} from {', '.join(choices)}; or 'all' (default: {shown})",
    )


def add_datasets(
    parser: argparse.ArgumentParser, choices: Tuple[str, ...], default: Tuple[str, ...]
) -> None:
    """``--datasets``: the sets to run, from ``choices``."""
    add_name_list(parser, "--datasets", choices, "data set(s)", default)


def add_models(parser: argparse.ArgumentParser, choices: Tuple[str, ...]) -> None:
    """``--models``: the models (and baselines) to run, from ``choices``, all by default."""
    add_name_list(parser, "--models", choices, "model(s)", choices)


def add_positive(
    parser: argparse.ArgumentParser,
    flag: str,
    metavar: str,
    kind: type,
    default: Optional[float],
    help: str,
    *,
    aliases: Sequence[str] = (),
) -> None:
    """``flag`` (and its ``aliases``): a positive number of type ``kind``, its default stated
    after ``help``."""
    parser.add_argument(
        flag,
        *aliases,
        metavar=metavar,
        type=positive(kind),
        default=default,
        help=f"{help} (default: {format_number(default)})",
    )


def add_inducing(
    parser: argparse.ArgumentParser, default: int, *, aliases: Sequence[str] = ()
) -> None:
    """
    ``--inducing``: M, the number of inducing inputs, started at k-means centres.
    ``aliases`` are other spellings of the flag, for the scripts that have always taken them.
    """
    add_positive(
        parser,
        "--inducing",
        "M",
        int,
        default,
        "number of inducing inputs, started at k-means centres",
        aliases=aliases,
    )


def add_fixed_inducing(parser: argparse.ArgumentParser) -> None:
    """``--fixed-inducing``: every method holds the inducing inputs at the k-means centres."""
    parser.add_argument(
        "--fixed-inducing",
        action="store_true",
        help="hold the inducing inputs fixed at the k-means centres for every method, the source "
        "papers' protocol (default: every method trains them, as a GPflow user's SVGP does)",
    )


def add_counts(parser: argparse.ArgumentParser, flag: str, of: str, default: Sequence[int]) -> None:
    """``flag``: the numbers ``of`` points, inducing inputs, ... to run at, comma-separated."""
    parser.add_argument(
        flag,
        metavar="LIST",
        type=positive_list(whole_number),
        default=tuple(default),
        help=f"numbers of {of}, comma-separated (default: {format_numbers(default)})",
    )


def add_time_budget(
    parser: argparse.ArgumentParser, default: Optional[float], per: str, note: str = ""
) -> None:
    """``--time-budget``: the training seconds ``per`` run, method, ...; ``default`` None for no
    budget. ``note`` follows the default in the help."""
    parser.add_argument(
        "--time-budget",
        metavar="S",
        type=positive(float),
        default=default,
        help=f"training seconds {per} (default: {format_number(default)}{note})",
    )


def add_repeats(parser: argparse.ArgumentParser, default: int, what: str) -> None:
    """``--repeats``: how many times each measurement is made, ``what`` the repeats are."""
    add_positive(parser, "--repeats", "R", int, default, what)


def add_batch_size(
    parser: argparse.ArgumentParser, default: int, of: str, *, aliases: Sequence[str] = ()
) -> None:
    """``--batch-size``: the mini-batch size ``of`` the stochastic method(s); ``aliases`` as in
    :func:`add_inducing`."""
    add_positive(
        parser, "--batch-size", "B", int, default, f"mini-batch size of {of}", aliases=aliases
    )


def add_adam_lr(
    parser: argparse.ArgumentParser, default: float, of: str, *, aliases: Sequence[str] = ()
) -> None:
    """``--adam-lr``: Adam's learning rate in the methods that use it (``of``: which, how);
    ``aliases`` as in :func:`add_inducing`."""
    add_positive(
        parser, "--adam-lr", "LR", float, default, f"Adam's learning rate {of}", aliases=aliases
    )


def add_seed(parser: argparse.ArgumentParser, of: str) -> None:
    """``--seed``: the seed ``of`` what is random in a run, 0 by default."""
    parser.add_argument("--seed", type=int, default=0, help=f"seed of {of} (default: 0)")


def add_out(parser: argparse.ArgumentParser, default: str, files: str) -> None:
    """``--out``: the folder the job writes ``files`` to."""
    parser.add_argument(
        "--out", metavar="DIR", default=default, help=f"folder for {files} (default: {default})"
    )


def add_progress(parser: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress``: a progress bar per method, by default where the
    standard error is a terminal (:func:`shows_progress`)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar per method (default: when the standard error is a terminal)",
    )


def shows_progress(progress: Optional[bool]) -> bool:
    """Whether to show the progress bars, given ``--progress`` (True), ``--no-progress`` (False)
    or neither (None): then where the standard error is a terminal, where a person waits, and not
    in a log file or a pipe."""
    if progress is not None:
        return progress
    return sys.stderr.isatty()
