"""
What one training evaluation of a multi-class model costs, against C binary ones and the matmul floor.

``python -m experiments.profile_multiclass letter --data-dir DIR`` builds, on the training part of
a multi-class benchmark set (inputs standardised, ``--inducing`` k-means inducing inputs held
fixed, an ARD squared-exponential kernel at √D), :class:`~gpflow_fastvi.VIConcave` and
:class:`~gpflow_fastvi.VITaylor` with GPflow's ``Softmax(C)`` and ``num_latent_gps=C``, and the
same models with one latent function on the binary task "class 0 against the rest". For each it
compiles what an L-BFGS-B evaluation of :func:`~gpflow_fastvi.fit`'s persistent route runs
(``_stepped_sites(n_upd=3)`` from held site parameters, with its θ-gradient:
:func:`evaluation`) and reports:

- ``trace``: building that function's graph (``get_concrete_function``);
- ``first call``: the first call beyond a later one (graph optimisation, kernel set-up);
- ``evaluation``: the median of ``REPEATS`` later calls;
- ``C × binary``: C times the binary model's evaluation, the cost of C independent latent
  functions with nothing shared;
- ``floor``: the dense products the evaluation cannot avoid, C · 2 n M² operations per pass for
  A W_c Aᵀ (four passes: three steps and the objective; the backward pass's are not counted), at
  the measured float64 matmul rate.

Prints a Markdown table.
"""

import argparse
import time
from typing import Callable, Dict, List, Optional

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.cli_args import add_record
from gpflow_fastvi.benchmarks.pages import write_printed_table
from gpflow_fastvi.benchmarks.scaling import compiled_seconds, matmul_rate
from gpflow_fastvi.datasets import load_benchmark

REPEATS = 5
N_UPD = 3


def evaluation(model: fv.VIConcave, X: np.ndarray, Y: np.ndarray) -> Callable[[], tf.Tensor]:
    """
    One persistent-route evaluation of ``model`` on (X, Y), as fit's L-BFGS-B asks for it
    (:class:`~gpflow_fastvi.training.persistent.PersistentRun`): the objective after ``N_UPD``
    closed-form site steps from the site parameters of the last accepted iterate, with its
    θ-gradient (added at zero weight, so that it is computed). The sites are stepped once first,
    and their parameters kept.
    """
    data = model._passes.checked_training_data((X, Y))
    model.update_sites(1, data=data)
    accepted = model._site_parameters(data)  # kept between evaluations, as fit keeps them
    variables = list(model.trainable_variables)

    def run() -> tf.Tensor:
        with tf.GradientTape() as tape:
            value = model._stepped_sites(N_UPD, data, site_parameters=accepted).objective
        gradients = tape.gradient(value, variables)
        return value + 0.0 * tf.add_n([tf.reduce_sum(g) for g in gradients])

    return run


def evaluation_seconds(model: fv.VIConcave, X: np.ndarray, Y: np.ndarray) -> Dict[str, float]:
    """Trace, first-call and median seconds of one persistent-route evaluation of ``model``
    (:func:`evaluation`), compiled."""
    graph = tf.function(evaluation(model, X, Y), autograph=False)
    start = time.perf_counter()
    graph.get_concrete_function()
    trace = time.perf_counter() - start
    first, later = compiled_seconds(lambda: graph().numpy(), REPEATS)
    return {"trace": trace, "first call": first - later, "evaluation": later}


def build(model_class: type, X: np.ndarray, Y: np.ndarray, Z: np.ndarray, C: int) -> fv.VIConcave:
    """``model_class`` with Softmax(C) for C > 2 classes, else the logit Bernoulli."""
    D = X.shape[1]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=np.full(D, np.sqrt(D)))
    likelihood = (
        gpflow.likelihoods.Softmax(C) if C > 2 else gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    )
    latent = C if C > 2 else 1
    model: fv.VIConcave = model_class(
        kernel, likelihood, Z.copy(), num_latent_gps=latent, num_data=len(X), train_inducing=False
    )
    return model


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.profile_multiclass", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("name", help="a multi-class benchmark set, e.g. letter")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--inducing", type=int, default=100)
    add_record(parser)
    args = parser.parse_args(argv)
    X, Y, _, _ = load_benchmark(args.name, args.data_dir)
    C = int(Y.max()) + 1
    Z = fv.kmeans_inducing_points(X, args.inducing, seed=0)
    binary = (Y == 0).astype(float)
    flops = 2.0 * len(X) * args.inducing**2 * (N_UPD + 1)
    rate = matmul_rate()
    rows: List[str] = []
    for model_class in (fv.VIConcave, fv.VITaylor):
        multi = evaluation_seconds(build(model_class, X, Y, Z, C), X, Y)
        single = evaluation_seconds(build(model_class, X, binary, Z, 2), X, binary)
        rows.append(
            f"| {model_class.__name__} | {multi['trace']:.2f} | {multi['first call']:.2f} | "
            f"{multi['evaluation']:.3f} | {C * single['evaluation']:.3f} | "
            f"{multi['evaluation'] / (C * single['evaluation']):.2f} | "
            f"{C * flops / rate:.3f} | {single['trace']:.2f} | {single['evaluation']:.4f} |"
        )
    print(f"{args.name}: n = {len(X)}, C = {C}, M = {args.inducing}, {rate / 1e9:.1f} GFLOP/s\n")
    header = (
        "| model | trace s | first call s | evaluation s | C × binary s | ratio | floor s "
        "| binary trace s | binary evaluation s |"
    )
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    if args.record:
        write_printed_table(
            args.record,
            "experiments.profile_multiclass",
            argv,
            header,
            rows,
        )


if __name__ == "__main__":
    main()
