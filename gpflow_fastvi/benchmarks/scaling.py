"""
``gpflow-fastvi scaling``: seconds per full-batch update of the shared Gaussian core against the
number of points n and of inducing inputs m, beside the machine's dense matrix-multiply rate.

The update timed is one :meth:`~gpflow_fastvi.VIJJ.update_sites` of :class:`~gpflow_fastvi.VIJJ`
(compiled once per shape, before timing): project the data, A = L⁻¹ Kmn; accumulate the site
statistics A W Aᵀ and A b; factorise B = I + A W Aᵀ; form the marginals q(fᵢ) of the optimal q(u);
update the sites ξ from them; accumulate the statistics again and store q(u). Its work is dominated
by a few passes of n·m² multiply-adds over A: the product A = L⁻¹ Kmn, the product A W Aᵀ
(twice) and the product LB⁻¹ A for the marginal variances. So the *floor* reported beside each
time is the time of one dense product of that size, 2·n·m² floating-point operations at the
machine's measured float64 matmul rate; an update that costs a small multiple of the floor runs
near the hardware's limit.

Data are synthetic (inputs standard normal in D = 10 dimensions, labels from the sign of a smooth
function), Z is n's first m points, and points are processed in batches of at most
:data:`POINTS_PER_BATCH` // m so that memory stays bounded at n = 10⁶.
"""

import argparse
import json
import os
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from .choices import SCALING_FIXED_M as FIXED_M
from .choices import SCALING_FIXED_N as FIXED_N
from .choices import SCALING_M as DEFAULT_M
from .choices import SCALING_N as DEFAULT_N
from .choices import SCALING_REPEATS

NUM_FEATURES = 10
POINTS_PER_BATCH = 20_000_000
"""Batches hold at most this many entries of A (160 MB in float64)."""


def matmul_rate(size: int = 2000, repeats: int = 5) -> float:
    """
    The machine's dense float64 matrix-multiply rate in floating-point operations per second: the
    best of ``repeats`` timed ``size``×``size`` products (2·size³ operations each), after one
    untimed product.
    """
    import tensorflow as tf

    rng = np.random.default_rng(0)
    a = tf.constant(rng.normal(size=(size, size)))
    b = tf.constant(rng.normal(size=(size, size)))
    product = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    product().numpy()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        product().numpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def synthetic_data(n: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """n standard normal inputs in D = :data:`NUM_FEATURES` and labels in {0, 1} from the sign of
    a smooth function of the first two."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, NUM_FEATURES))
    Y = (np.sin(X[:, :1]) + 0.5 * X[:, 1:2] > 0).astype(np.float64)
    return X, Y


def compiled_seconds(function: Callable[[], Any], repeats: int) -> Tuple[float, float]:
    """
    Seconds of the first call of ``function`` (which compiles it, when it is a ``tf.function``)
    and the median of ``repeats`` timed calls after it; ``function`` must block until its result
    is computed (call ``.numpy()`` on it).
    """
    start = time.perf_counter()
    function()
    first = time.perf_counter() - start
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return first, float(np.median(seconds))


def _model(n: int, m: int, seed: int = 0) -> Any:
    import gpflow

    from ..models import VIJJ

    X, Y = synthetic_data(n, seed)
    kernel = gpflow.kernels.SquaredExponential(lengthscales=np.sqrt(NUM_FEATURES))
    batch_size = None if n * m <= POINTS_PER_BATCH else max(1, POINTS_PER_BATCH // m)
    return VIJJ(kernel, inducing_variable=X[:m].copy(), data=(X, Y), batch_size=batch_size)


def time_update(n: int, m: int, repeats: int = 3) -> Dict[str, float]:
    """
    Seconds of one compiled :meth:`update_sites` at (n, m): the median of ``repeats`` timed calls
    after one untimed call (which compiles it).
    """
    import tensorflow as tf

    model = _model(n, m)
    update = tf.function(model.update_sites)
    first, median = compiled_seconds(lambda: update().numpy(), repeats)
    return {
        "n": n,
        "m": m,
        "seconds": median,
        "first_call_seconds": first,
        "batch_size": model.batch_size or n,
    }


def run_scaling(
    ns: Sequence[int] = DEFAULT_N,
    ms: Sequence[int] = DEFAULT_M,
    *,
    fixed_m: int = FIXED_M,
    fixed_n: int = FIXED_N,
    repeats: int = SCALING_REPEATS,
    log: Callable[[str], None] = lambda _: None,
) -> Dict[str, Any]:
    """
    Time the update for every n at m = ``fixed_m`` and every m at n = ``fixed_n``, and measure the
    matmul rate before and after (the larger is kept).

    :return: ``{"matmul_flops_per_second", "machine", "rows"}``; each row has n, m, seconds, the
        floor 2·n·m² / rate and seconds / floor.
    """
    from .runs import machine_description

    rate = matmul_rate()
    log(f"dense float64 matmul: {rate / 1e9:.1f} GFLOP/s")
    points = list(dict.fromkeys([(n, fixed_m) for n in ns] + [(fixed_n, m) for m in ms]))
    rows: List[Dict[str, float]] = []
    for n, m in points:
        row = time_update(n, m, repeats)
        rows.append(row)
        log(f"n = {n:>9,}, m = {m:>4}: {row['seconds']:.4g} s per update")
    rate = max(rate, matmul_rate())
    for row in rows:
        row["flops_n_m2"] = float(row["n"]) * row["m"] ** 2
        row["floor_seconds"] = 2.0 * row["flops_n_m2"] / rate
        row["times_floor"] = row["seconds"] / row["floor_seconds"]
    return {
        "matmul_flops_per_second": rate,
        "machine": machine_description(),
        "fixed_m": fixed_m,
        "fixed_n": fixed_n,
        "rows": rows,
    }


def markdown_table(result: Dict[str, Any]) -> str:
    """The scaling rows as Markdown, with the matmul rate above them."""
    rate = result["matmul_flops_per_second"]
    lines = [
        f"Dense float64 matmul rate: {rate / 1e9:.1f} GFLOP/s. Floor: one dense product of "
        "2·n·m² operations at that rate.",
        "",
        "| n | m | seconds per update | n·m² | floor [s] | × floor |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['n']:,} | {row['m']} | {row['seconds']:.4g} | {row['flops_n_m2']:.3g} "
            f"| {row['floor_seconds']:.3g} | {row['times_floor']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def plot_scaling(result: Dict[str, Any], path: str) -> None:
    """Seconds per update against n (left) and m (right), log–log, with the floor dashed."""
    from .figures import matplotlib_figure

    Figure = matplotlib_figure()
    figure = Figure(figsize=(10.0, 4.0), layout="constrained")
    by_n, by_m = figure.subplots(1, 2)
    rows = result["rows"]
    for axes, key, fixed_key, fixed in (
        (by_n, "n", "m", result["fixed_m"]),
        (by_m, "m", "n", result["fixed_n"]),
    ):
        chosen = sorted((r for r in rows if r[fixed_key] == fixed), key=lambda r: r[key])
        x = [r[key] for r in chosen]
        axes.loglog(x, [r["seconds"] for r in chosen], "o-", label="update_sites (measured)")
        axes.loglog(
            x, [r["floor_seconds"] for r in chosen], "k--", label="2·n·m² at the matmul rate"
        )
        axes.set_xlabel(key)
        axes.set_ylabel("seconds per full-batch update")
        axes.set_title(f"{fixed_key} = {fixed:,}")
        axes.grid(True, which="both", alpha=0.3)
    by_n.legend()
    figure.savefig(path, dpi=110)


def command(args: argparse.Namespace) -> int:
    """``gpflow-fastvi scaling``: :func:`run_scaling`, written as JSON, a Markdown table and a figure."""
    result = run_scaling(
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
    table = markdown_table(result)
    with open(os.path.join(args.out, "scaling.md"), "w", encoding="utf-8") as f:
        f.write(table)
    plot_scaling(result, os.path.join(args.out, "scaling.png"))
    print()
    print(table)
    print(f"Wrote scaling.json, scaling.md and scaling.png in {args.out}")
    return 0


__all__ = [
    "DEFAULT_M",
    "DEFAULT_N",
    "FIXED_M",
    "FIXED_N",
    "command",
    "markdown_table",
    "matmul_rate",
    "plot_scaling",
    "run_scaling",
    "time_update",
]
