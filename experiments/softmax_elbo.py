"""
Whether VIConcave ends at the softmax ELBO's optimum: its ELBO against SVGP's, converged, from one start.

``python -m experiments.softmax_elbo digits`` (or ``satimage``, ``letter`` from
``$GPFLOW_FASTVI_DATA``) builds one start (an ARD squared-exponential kernel at √D,
``--inducing`` k-means inducing inputs, held fixed, inputs standardised) and trains from it:

- ``VIConcave``: ``VIConcave(kernel, Softmax(C), Z, num_latent_gps=C)`` by ``fit`` with its
  defaults, to convergence;
- ``SVGP + Softmax + Scipy``: GPflow's ``SVGP(kernel, Softmax(C), Z, num_latent_gps=C)``, whose
  ELBO is made deterministic by taking E[log softmax] with ``--draws`` fixed quasi-random draws
  (:func:`~gpflow_fastvi.sites.expectation.expected_log_softmax`) in place of GPflow's fresh
  Monte Carlo draws, and ``gpflow.optimizers.Scipy`` on all its parameters (q(u) included) until
  L-BFGS-B ends by itself or after ``--maxiter`` iterations.

At each answer it computes SVGP's softmax ELBO per training point with plain Monte Carlo,
``--reference`` draws per point (10⁶ by default, the same draws for both answers), and prints a
Markdown table: seconds, test accuracy and NLL, the ELBO per point, and VIConcave's ELBO less
SVGP's (the goal: no lower than −0.001 nats per point).
"""

import argparse
import os
import time
from typing import Any, List, Optional, Sequence

import gpflow
import numpy as np
import tensorflow as tf
from scipy.special import logsumexp

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.cli_args import add_record
from gpflow_fastvi.benchmarks.pages import write_printed_table
from gpflow_fastvi.sites.expectation import expected_log_softmax

from .multiclass import load, scorer

CHUNK = 20_000


class SoftmaxByDraws(gpflow.likelihoods.Softmax):
    """GPflow's ``Softmax`` whose expectation over q(f) is taken with fixed draws, so that its
    SVGP's ELBO is a deterministic function that L-BFGS-B can converge on."""

    def __init__(self, num_classes: int, draws: int):
        super().__init__(num_classes)
        self.draws = draws

    def _variational_expectations(
        self, X: Any, Fmu: tf.Tensor, Fvar: tf.Tensor, Y: tf.Tensor
    ) -> tf.Tensor:
        return expected_log_softmax(Fmu, Fvar, tf.cast(Y, Fmu.dtype), self.draws)


def monte_carlo_elbo(model: Any, X: np.ndarray, Y: np.ndarray, draws: int) -> float:
    """SVGP's softmax ELBO per point at the model's q(u), E[log softmax] by ``draws`` plain
    draws per point (the same draws, by a fixed seed per chunk, for every model)."""
    Fmu, Fvar = (t.numpy() for t in model.predict_f(X))
    y = Y[:, 0].astype(int)
    own = Fmu[np.arange(len(y)), y]
    total = float(own.sum())
    for begin in range(0, len(X), 50):
        m, s = Fmu[begin : begin + 50], np.sqrt(Fvar[begin : begin + 50])
        rng = np.random.default_rng(begin)
        normaliser = np.zeros(len(m))
        for _ in range(draws // CHUNK):
            f = m[:, None, :] + s[:, None, :] * rng.standard_normal((len(m), CHUNK, m.shape[1]))
            normaliser += logsumexp(f, axis=2).sum(axis=1)
        total -= float(normaliser.sum()) / (draws // CHUNK * CHUNK)
    return (total - float(model.prior_kl())) / len(X)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.softmax_elbo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("set", choices=("letter", "satimage", "digits"))
    parser.add_argument("--inducing", type=int, default=100, help="k-means inducing inputs M")
    parser.add_argument("--draws", type=int, default=1024, help="SVGP's fixed draws per point")
    parser.add_argument("--maxiter", type=int, default=20_000, help="Scipy's iteration cap")
    parser.add_argument("--reference", type=int, default=10**6, help="draws per point, MC")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GPFLOW_FASTVI_DATA"), help="the benchmark files"
    )
    add_record(parser)
    args = parser.parse_args(argv)
    X, Y, X_test, Y_test = load(args.set, args.data_dir)
    N, D = X.shape
    C = int(Y.max()) + 1
    Z = fv.kmeans_inducing_points(X, args.inducing, seed=0)

    def kernel() -> gpflow.kernels.Kernel:
        return gpflow.kernels.SquaredExponential(lengthscales=np.full(D, np.sqrt(D)))

    ours = fv.VIConcave(
        kernel(),
        gpflow.likelihoods.Softmax(C),
        Z.copy(),
        num_latent_gps=C,
        num_data=N,
        train_inducing=False,
    )
    began = time.perf_counter()
    trace = fv.fit(ours, (X, Y))
    ours_seconds = time.perf_counter() - began
    print(f"VIConcave: {ours_seconds:.1f} s, {trace.stop_reason}", flush=True)

    svgp = gpflow.models.SVGP(
        kernel(), SoftmaxByDraws(C, args.draws), Z.copy(), num_latent_gps=C, num_data=N
    )
    gpflow.set_trainable(svgp.inducing_variable, False)
    began = time.perf_counter()
    result = gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure((X, Y)),
        svgp.trainable_variables,
        options=dict(maxiter=args.maxiter),
    )
    svgp_seconds = time.perf_counter() - began
    print(f"SVGP: {svgp_seconds:.1f} s, {result.nit} iterations, {result.message}", flush=True)

    header = "| method | seconds | accuracy | NLL | softmax ELBO / N (Monte Carlo) | less SVGP's |"
    rows: List[str] = []
    elbos = {}
    for name, model, seconds in (
        ("VIConcave", ours, ours_seconds),
        (f"SVGP + Softmax ({args.draws} draws) + Scipy", svgp, svgp_seconds),
    ):
        accuracy, nll = scorer(model, X_test, Y_test)()
        elbos[name] = monte_carlo_elbo(model, X, Y, args.reference)
        rows.append(
            f"| {name} | {seconds:.1f} | {accuracy:.4f} | {nll:.4f} | {elbos[name]:.5f} | "
            + "{gap} |"
        )
    reference = list(elbos.values())[1]
    rows = [r.format(gap=f"{e - reference:+.5f}") for r, e in zip(rows, elbos.values())]
    print(f"\n{args.set}: N = {N}, C = {C}, M = {args.inducing}, inducing inputs held\n")
    print(header)
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    if args.record:
        write_printed_table(
            args.record,
            "experiments.softmax_elbo",
            argv,
            header,
            rows,
            notes=f"SVGP's L-BFGS-B: {result.nit} iterations, {result.message}",
        )


if __name__ == "__main__":
    main()
