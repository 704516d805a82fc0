"""
What the checks of a streamed pass cost: one evaluation of the persistent route (the objective
after three closed-form site steps, and its gradient) of a model fed a ``tf.data.Dataset``, with
the checks ``fit`` makes on every batch and on the stream (finite values, labels, the row count
against ``num_data``: :func:`~gpflow_fastvi.stream_validation.checked_stream`) and without them,
in the same process.

``python -m experiments.stream_checks [n] [m] [--batch B] [--repeats R]`` (defaults n = 100,000,
m = 100, B = 10,000, R = 7) builds :class:`~gpflow_fastvi.VIJJ` with SVGP's signature on the
synthetic data of :mod:`~gpflow_fastvi.benchmarks.scaling` (D = 10), compiles the evaluation for
both streams, and times them alternately; prints the medians and their ratio.
"""

import argparse
import time
from typing import Any, Callable, Optional, Sequence

import gpflow
import numpy as np
import tensorflow as tf

from gpflow_fastvi import VIJJ
from gpflow_fastvi.benchmarks.arg_types import positive, whole_number
from gpflow_fastvi.benchmarks.scaling import NUM_FEATURES, synthetic_data
from gpflow_fastvi.models.step_sizes import FULL_DATA_STEPS
from gpflow_fastvi.stream_validation import checked_dataset


def _model(X: np.ndarray, m: int) -> VIJJ:
    kernel = gpflow.kernels.SquaredExponential(
        lengthscales=np.full(NUM_FEATURES, NUM_FEATURES**0.5)
    )
    likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    return VIJJ(kernel, likelihood, X[:m].copy(), num_data=len(X), train_inducing=False)


def _unchecked(model: VIJJ) -> VIJJ:
    """``model`` with the stream's structure checked as before the checks existed, and nothing
    else: no per-batch values, no row count. It replaces the two methods of the passes that
    check: ``_checked_pass_stream``, which ``training_data`` calls on a stream, and
    ``sum_over_data``, which counts a stream's rows."""
    passes = model._passes
    passes._checked_pass_stream = checked_dataset  # type: ignore[method-assign]
    passes.sum_over_data = passes._sum_on_devices  # type: ignore[method-assign]
    return model


def evaluation(model: VIJJ, dataset: tf.data.Dataset) -> Callable[[], Any]:
    """
    One compiled evaluation of the persistent route, as L-BFGS-B asks for it: the objective after
    three closed-form site steps, each a pass over the stream, and its gradient in the kernel's
    hyperparameters (a further pass). The stream is checked once, outside, as ``fit`` checks it.
    """
    stream = model._passes.training_data(dataset)
    variables = model.kernel.trainable_variables

    @tf.function(autograph=False)
    def evaluate() -> Any:
        with tf.GradientTape() as tape:
            objective = model._stepped_sites(FULL_DATA_STEPS, stream).objective
        return objective, tape.gradient(objective, variables)

    return lambda: tf.nest.map_structure(lambda t: t.numpy(), evaluate())


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.stream_checks",
        description="The cost of fit's checks on a streamed pass, with and without them.",
    )
    parser.add_argument("n", nargs="?", type=positive(whole_number), default=100_000)
    parser.add_argument("m", nargs="?", type=positive(int), default=100)
    parser.add_argument("--batch", type=positive(whole_number), default=10_000)
    parser.add_argument("--repeats", type=positive(int), default=7)
    args = parser.parse_args(argv)
    X, Y = synthetic_data(args.n)
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(args.batch)
    calls = {
        "checked": evaluation(_model(X, args.m), dataset),
        "unchecked": evaluation(_unchecked(_model(X, args.m)), dataset),
    }
    seconds: dict = {name: [] for name in calls}
    for call in calls.values():
        call()  # compile
    for _ in range(args.repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
    medians = {name: float(np.median(values)) for name, values in seconds.items()}
    print(f"n = {args.n}, m = {args.m}, batches of {args.batch}, {args.repeats} alternated calls")
    print("| stream | median seconds per evaluation | min | max |")
    print("|---|---|---|---|")
    for name, values in seconds.items():
        print(f"| {name} | {medians[name]:.4f} | {min(values):.4f} | {max(values):.4f} |")
    print(f"checked / unchecked: {medians['checked'] / medians['unchecked']:.3f}")


if __name__ == "__main__":
    main()
