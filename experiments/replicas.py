"""
Seconds per pass over the data against the number of points and of :mod:`tf.distribute` replicas.

``python -m experiments.replicas`` times one compiled closed-form site step of
:class:`~gpflow_fastvi.VIJJ` built with SVGP's signature (one pass: project the data, read the
sites off q(u), sum their statistics, form the optimal q(u)) for each n, and one
:class:`~gpflow_fastvi.NaturalGradientSVI` step of :class:`~gpflow_fastvi.PolyaGammaSVGP` for each
mini-batch size, on one device without a strategy and under ``MirroredStrategy`` with 1, 2, …
replicas. The replicas are GPUs where
``--devices gpu`` and the machine has them, else logical CPU devices carved out of the one CPU
(which share its cores: on a CPU the split shows what the all-reduce costs, not a speed-up). The
configurations are timed in turn, ``--repeats`` rounds, and the median of each is reported with
its ratio to one device.

It configures TensorFlow's devices, so it runs in a process of its own, not after TensorFlow has
started.
"""

import argparse
import json
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from gpflow_fastvi.benchmarks.arg_types import positive, positive_list, whole_number
from gpflow_fastvi.benchmarks.cli_args import add_counts, add_repeats
from gpflow_fastvi.benchmarks.scaling import POINTS_PER_BATCH, synthetic_data

DEFAULT_N = (10_000, 100_000, 1_000_000)
DEFAULT_M = 100
DEFAULT_REPLICAS = (1, 2)
DEFAULT_SVI_BATCHES = (1_000, 10_000)


def configure_devices(kind: str, replicas: int) -> List[str]:
    """
    The names of ``replicas`` devices of ``kind`` ("cpu" or "gpu") for a strategy: GPUs as they
    are, or that many logical CPU devices made from the first CPU. Call before TensorFlow runs.
    """
    import tensorflow as tf

    if kind == "gpu":
        gpus = tf.config.list_logical_devices("GPU")
        if len(gpus) < replicas:
            raise SystemExit(f"--devices gpu needs {replicas} GPUs; this machine has {len(gpus)}.")
        return [gpu.name for gpu in gpus[:replicas]]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * replicas
    )
    return [device.name for device in tf.config.list_logical_devices("CPU")[:replicas]]


def _model(model_class: Any, X: np.ndarray, m: int, strategy: Optional[Any], **options: Any) -> Any:
    """``model_class`` with SVGP's signature on the inputs X (its first m as Z), logit link,
    built in ``strategy``'s scope (if any)."""
    import contextlib

    import gpflow
    import tensorflow as tf

    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        return model_class(
            gpflow.kernels.SquaredExponential(lengthscales=np.sqrt(X.shape[1])),
            gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
            X[:m].copy(),
            num_data=len(X),
            train_inducing=False,
            **options,
        )


def _pass(n: int, m: int, strategy: Optional[Any]) -> Callable[[], float]:
    """A compiled closed-form step of a VIJJ on n synthetic points with m inducing inputs,
    built in ``strategy``'s scope (if any); returns a call that runs it and waits for it."""
    import tensorflow as tf

    from gpflow_fastvi import VIJJ

    X, Y = synthetic_data(n)
    data = (tf.constant(X), tf.constant(Y))
    batch_size = None if n * m <= POINTS_PER_BATCH else max(1, POINTS_PER_BATCH // m)
    model = _model(VIJJ, X, m, strategy, batch_size=batch_size)
    step = tf.function(lambda: model.update_sites(1, data=data), autograph=False)
    return lambda: float(step())


def _svi_step(n: int, m: int, batch: int, strategy: Optional[Any]) -> Callable[[], float]:
    """Twenty SVI steps of a PolyaGammaSVGP on the first ``batch`` of n synthetic points, built in
    ``strategy``'s scope (if any); returns a call that runs them and waits for the last."""
    import tensorflow as tf

    from gpflow_fastvi import NaturalGradientSVI, PolyaGammaSVGP

    X, Y = synthetic_data(n)
    rows = (tf.constant(X[:batch]), tf.constant(Y[:batch]))
    svi = NaturalGradientSVI(_model(PolyaGammaSVGP, X, m, strategy), step_size=0.1)

    def steps() -> float:
        for _ in range(SVI_STEPS - 1):
            svi.step(rows)
        return float(svi.step(rows))

    return steps


SVI_STEPS = 20
"""SVI steps per timed call: one step of a small batch is too short to time alone."""


def _timed_rounds(
    calls: Dict[str, Callable[[], float]], repeats: int
) -> Tuple[Dict[str, float], Dict[str, List[float]]]:
    """One untimed call of each (which compiles it), then ``repeats`` rounds timing each in turn:
    the first results and the seconds of every call."""
    first = {label: call() for label, call in calls.items()}
    seconds: Dict[str, List[float]] = {label: [] for label in calls}
    for _ in range(repeats):
        for label, call in calls.items():
            start = time.perf_counter()
            call()
            seconds[label].append(time.perf_counter() - start)
    return first, seconds


def run_replicas(
    ns: Sequence[int] = DEFAULT_N,
    m: int = DEFAULT_M,
    replicas: Sequence[int] = DEFAULT_REPLICAS,
    devices: str = "cpu",
    repeats: int = 5,
    svi_batches: Sequence[int] = DEFAULT_SVI_BATCHES,
    log: Callable[[str], None] = lambda _: None,
) -> Dict[str, Any]:
    """
    Time every configuration (one device, then each number of replicas): a pass at every n, and
    an SVI step on every batch size in ``svi_batches`` (of the largest n's points), round-robin
    over ``repeats`` rounds after one untimed call each (which compiles it).

    :return: ``{"devices", "m", "rows"}``, a row per (what, size, configuration) with the median
        seconds per pass or step, every timing, and the ratio of one device's median to it.
    """
    import tensorflow as tf

    names = configure_devices(devices, max(replicas))
    from gpflow_fastvi.benchmarks.runs import machine_description

    configurations = {"one device": None}
    for count in replicas:
        configurations[f"{count} replica{'s' if count > 1 else ''}"] = (
            tf.distribute.MirroredStrategy(names[:count])
        )
    rows: List[Dict[str, Any]] = []

    def record(what: str, n: int, size: int, calls: Dict[str, Callable[[], float]]) -> None:
        results, seconds = _timed_rounds(calls, repeats)
        baseline = float(np.median(seconds["one device"]))
        for label in calls:
            median = float(np.median(seconds[label]))
            per_step = SVI_STEPS if what == "SVI step" else 1
            rows.append(
                {
                    "what": what,
                    "n": n,
                    "rows": size,
                    "configuration": label,
                    "seconds": median / per_step,
                    "all_seconds": [t / per_step for t in seconds[label]],
                    "speed_up": baseline / median,
                    "result": results[label],
                }
            )
            log(
                f"{what} on {size:>9,} rows  {label:<12} {median / per_step:.4g} s "
                f"({baseline / median:.2f}×)"
            )

    for n in ns:
        record("pass", n, n, {k: _pass(n, m, s) for k, s in configurations.items()})
    for batch in svi_batches:
        n = max(ns)
        record(
            "SVI step", n, batch, {k: _svi_step(n, m, batch, s) for k, s in configurations.items()}
        )
    return {
        "devices": devices,
        "device_names": names,
        "m": m,
        "rows": rows,
        "machine": machine_description(),
    }


def markdown_table(result: Dict[str, Any]) -> str:
    """The rows as Markdown: seconds per pass or step and the speed-up over one device."""
    lines = [
        "| what | rows | configuration | seconds (median) | speed-up over one device |",
        "|---|---:|---|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['what']} | {row['rows']:,} | {row['configuration']} | {row['seconds']:.4g} "
            f"| {row['speed_up']:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def _batch_sizes(text: str) -> Tuple[int, ...]:
    """``--svi-batches``: comma-separated sizes, or none at all for an empty value."""
    return positive_list(whole_number)(text) if text else ()


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.replicas``."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.replicas",
        description="Seconds per pass over the data against the number of points and of replicas.",
    )
    add_counts(parser, "--n", "points", DEFAULT_N)
    parser.add_argument(
        "--m",
        metavar="M",
        type=positive(int),
        default=DEFAULT_M,
        help=f"inducing inputs, the first m points (default: {DEFAULT_M})",
    )
    add_counts(parser, "--replicas", "replicas", DEFAULT_REPLICAS)
    parser.add_argument(
        "--svi-batches",
        metavar="LIST",
        type=_batch_sizes,
        default=DEFAULT_SVI_BATCHES,
        help="mini-batch sizes of the SVI steps, comma-separated; '' for none (default: "
        f"{','.join(map(str, DEFAULT_SVI_BATCHES))})",
    )
    parser.add_argument(
        "--devices",
        choices=("cpu", "gpu"),
        default="cpu",
        help="the replicas' devices: logical CPU devices or GPUs (default: cpu)",
    )
    add_repeats(parser, 5, "timed rounds")
    parser.add_argument("--json", metavar="FILE", help="write the result to this file")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    result = run_replicas(
        args.n, args.m, args.replicas, args.devices, args.repeats, args.svi_batches, log=print
    )
    print()
    print(markdown_table(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
