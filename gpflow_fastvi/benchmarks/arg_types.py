"""
The types of the benchmark jobs' command-line arguments (positive numbers, fractions, lists of
names or numbers) and how their help texts show numbers. Standard library only, so that
``gpflow-fastvi --help`` loads nothing heavy; the arguments themselves are in
:mod:`gpflow_fastvi.benchmarks.cli_args`.
"""

import argparse
from typing import Any, Callable, Optional, Sequence, Tuple


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """A parser of one positive value of ``kind`` (int, :func:`whole_number` or float)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            what = kind.__name__.replace("_", " ")
            raise argparse.ArgumentTypeError(f"expected a {what}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def whole_number(text: str) -> int:
    """Parse a whole number, also written as a float: ``100000``, ``100_000`` or ``1e5``."""
    try:
        return int(text)
    except ValueError:
        value = float(text)  # a ValueError here is reported by the caller
        if not value.is_integer():
            raise ValueError(f"not a whole number: {text!r}") from None
        return int(value)


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
    """A parser of comma-separated positive values of ``kind`` (int, :func:`whole_number`, float)."""
    parse_one = positive(kind)

    def parse(text: str) -> Tuple[Any, ...]:
        return tuple(parse_one(part) for part in text.split(","))

    return parse


def format_number(value: Optional[float]) -> str:
    """``value`` as the help texts show it: ``1000000``, ``60``, ``0.01``, ``1e-8``; or ``none``."""
    if value is None:
        return "none"
    if isinstance(value, int):
        return str(value)
    mantissa, e, exponent = f"{value:g}".partition("e")
    return mantissa + (f"e{int(exponent)}" if e else "")


def format_numbers(values: Sequence[float]) -> str:
    """``values`` as the help texts show a list of them: ``0.001,0.01,0.1``."""
    return ",".join(map(format_number, values))


__all__ = [
    "choice_list",
    "whole_number",
    "format_number",
    "format_numbers",
    "fraction",
    "positive",
    "positive_list",
]
