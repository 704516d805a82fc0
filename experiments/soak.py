"""
A soak run: many training steps on real data, watching for non-finite values and for memory that
grows with the number of steps.

``python -m experiments.soak banana`` (or another set of
:data:`~gpflow_fastvi.datasets.registry.BENCHMARK_SETS`) trains, from the benchmark page's start
(ARD SE kernel at √D, k-means inducing inputs, the logit link):

- :class:`~gpflow_fastvi.PolyaGammaSVGP` by :func:`~gpflow_fastvi.fit`'s SVI route for
  ``--svi-steps`` mini-batch steps (default 10⁵, batches of ``--batch-size``);
- :class:`~gpflow_fastvi.VIJJ` by the paper's collapsed vi-JJ (``method="analytic"``: closed-form
  ξ and q(u) steps, then a short L-BFGS-B run on θ) for ``--collapsed-iterations`` outer
  iterations (default 10³), with ``tol=0`` so that nothing stops it early.

After every outer iteration it records the objective, whether every variable of the model is
finite, and the process's resident memory; it prints, per model, the steps taken, the seconds,
the first and last objectives, and the resident memory after the first tenth of the run and at
its end (the growth between them is what a leak would show; the first tenth holds graph tracing
and TensorFlow's own caches).
"""

import argparse
import os
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from gpflow_fastvi import VIJJ, PolyaGammaSVGP, fit, kmeans_inducing_points
from gpflow_fastvi.benchmarks.arg_types import positive
from gpflow_fastvi.benchmarks.cli_args import add_batch_size, add_benchmark_set, add_data_dir
from gpflow_fastvi.benchmarks.harness import make_kernel, make_likelihood
from gpflow_fastvi.datasets import load_benchmark


def resident_memory_mib() -> float:
    """The current resident set size in MiB, from /proc (Linux); elsewhere the peak so far."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, AttributeError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class SoakResult(NamedTuple):
    """One model's soak run."""

    model: str
    steps: int
    seconds: float
    first_objective: float
    last_objective: float
    all_finite: bool
    memory_after_warm_up_mib: float
    memory_at_end_mib: float

    @property
    def memory_growth_mib(self) -> float:
        return self.memory_at_end_mib - self.memory_after_warm_up_mib


def soak(
    data: tuple,
    *,
    svi_steps: int,
    collapsed_iterations: int,
    batch: int = 100,
    num_inducing: int = 100,
    report: Callable[[str], None] = print,
) -> List[SoakResult]:
    """The two soak runs of the module docstring on ``data`` = (X, Y); one result per model."""
    X, Y = data
    N, D = X.shape
    Z = kmeans_inducing_points(X, min(num_inducing, N), seed=0)
    steps_per_iteration = max(1, min(1000, svi_steps // 100))
    runs: Dict[str, tuple] = {
        "PolyaGammaSVGP": (
            PolyaGammaSVGP(
                make_kernel(D), make_likelihood(), Z.copy(), num_data=N, train_inducing=False
            ),
            dict(
                batch_size=min(batch, N),
                steps_per_iteration=steps_per_iteration,
                max_iter=max(1, svi_steps // steps_per_iteration),
                plateau=False,  # every step asked for, at the constant step size
            ),
            steps_per_iteration,
        ),
        "VIJJ": (
            VIJJ(make_kernel(D), make_likelihood(), Z.copy(), num_data=N, train_inducing=False),
            dict(method="analytic", max_iter=collapsed_iterations),
            1,
        ),
    }
    results = []
    for name, (model, options, steps_each) in runs.items():
        memory: List[float] = []
        finite: List[bool] = []

        def watch(model: object, memory: List[float] = memory, finite: List[bool] = finite) -> None:
            memory.append(resident_memory_mib())
            variables = model.variables  # type: ignore[attr-defined]
            finite.append(all(np.all(np.isfinite(v.numpy())) for v in variables))

        start = time.perf_counter()
        trace = fit(model, (X, Y), tol=0.0, callback=watch, **options)
        seconds = time.perf_counter() - start
        objectives = trace.column("objective")
        result = SoakResult(
            name,
            len(trace.rows) * steps_each,
            seconds,
            float(objectives[0]),
            float(objectives[-1]),
            bool(all(finite) and np.all(np.isfinite(objectives))),
            memory[max(0, len(memory) // 10 - 1)],
            memory[-1],
        )
        results.append(result)
        report(
            f"{name}: {result.steps} steps in {seconds:.0f} s ({trace.stop_reason}), objective "
            f"{result.first_objective:.6g} -> {result.last_objective:.6g}, all finite: "
            f"{result.all_finite}, resident memory {result.memory_after_warm_up_mib:.0f} MiB "
            f"after a tenth, {result.memory_at_end_mib:.0f} MiB at the end "
            f"({result.memory_growth_mib:+.1f} MiB)"
        )
    return results


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.soak",
        description="Many training steps on real data: no NaN, no memory growth.",
    )
    add_benchmark_set(parser)
    parser.add_argument(
        "--svi-steps",
        metavar="N",
        type=positive(int),
        default=100_000,
        help="PolyaGammaSVGP's SVI steps (default: 100000)",
    )
    parser.add_argument(
        "--collapsed-iterations",
        metavar="N",
        type=positive(int),
        default=1000,
        help="VIJJ's collapsed vi-JJ iterations (default: 1000)",
    )
    add_batch_size(parser, 100, "PolyaGammaSVGP's SVI steps", aliases=("--batch",))
    add_data_dir(parser)
    args = parser.parse_args(argv)
    X, Y, _, _ = load_benchmark(args.name, args.data_dir)
    soak(
        (X, Y),
        svi_steps=args.svi_steps,
        collapsed_iterations=args.collapsed_iterations,
        batch=args.batch_size,
    )


if __name__ == "__main__":
    main()
