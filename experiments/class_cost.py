"""
The cost of C classes: seconds per closed-form pass and per L-BFGS-B evaluation of
:class:`~gpflow_fastvi.VITaylor` with GPflow's ``Softmax(C)``, and per full-batch natural step of
:class:`~gpflow_fastvi.PolyaGammaSVGP` with
:class:`~gpflow_fastvi.likelihoods.LogisticSoftmax`, against C.

``python -m experiments.class_cost --n 100000 --classes 1,2,6,26`` builds, for each C, n points
in D = 10 dimensions (standard normal, labels uniform over the classes; the logit Bernoulli for
C = 1), m = 100 inducing inputs (the first m points) and an SE kernel, and times compiled
functions, each the median of ``REPEATS`` calls after the first:

- ``objective, n_upd = k``: :meth:`~gpflow_fastvi.models.base.GaussianSitesModel._stepped_sites`
  with k closed-form passes (so the difference between k = 2 and 1 is the price of one pass);
- ``objective + gradient, n_upd = 3``: the same with its θ-gradient, what L-BFGS-B asks for;
- ``natural step``: the full-batch natural parameters of one step of ``PolyaGammaSVGP``.

Prints a Markdown table.
"""

import argparse
from typing import Callable, List, Optional, Sequence

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.arg_types import whole_number
from gpflow_fastvi.benchmarks.scaling import compiled_seconds
from gpflow_fastvi.likelihoods import LogisticSoftmax
from gpflow_fastvi.models.natural_step import stepped_natural_parameters

REPEATS = 5
INDUCING = 100
FEATURES = 10


def median_seconds(function: Callable[[], object]) -> float:
    """Median seconds of ``function()`` over ``REPEATS`` calls after the first, each waited for
    (its tensors read back)."""
    return compiled_seconds(lambda: tf.nest.map_structure(np.asarray, function()), REPEATS)[1]


def row(n: int, classes: int, seed: int = 0) -> List[float]:
    """The four timings of one C: pass, objective with one pass, evaluation, natural step."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, FEATURES))
    if classes == 1:
        Y = (rng.random((n, 1)) < 0.5).astype(np.float64)
        taylor_likelihood: gpflow.likelihoods.Likelihood = gpflow.likelihoods.Bernoulli(
            invlink=tf.sigmoid
        )
        pg_likelihood: gpflow.likelihoods.Likelihood = gpflow.likelihoods.Bernoulli(
            invlink=tf.sigmoid
        )
    else:
        Y = rng.integers(0, classes, (n, 1)).astype(np.float64)
        taylor_likelihood = gpflow.likelihoods.Softmax(classes)
        pg_likelihood = LogisticSoftmax(classes)
    data = (tf.constant(X), tf.constant(Y))
    Z = X[:INDUCING].copy()

    def kernel() -> gpflow.kernels.Kernel:
        return gpflow.kernels.SquaredExponential(lengthscales=np.full(FEATURES, 3.0))

    taylor = fv.VITaylor(kernel(), taylor_likelihood, Z, num_latent_gps=classes, num_data=n)
    one = tf.function(lambda: taylor._stepped_sites(1, data).objective)
    two = tf.function(lambda: taylor._stepped_sites(2, data).objective)

    @tf.function
    def evaluation() -> List[tf.Tensor]:
        with tf.GradientTape() as tape:
            objective = taylor._stepped_sites(3, data).objective
        return tape.gradient(objective, taylor.trainable_variables)

    pg = fv.PolyaGammaSVGP(kernel(), pg_likelihood, Z, num_latent_gps=classes, num_data=n)
    step = tf.function(
        lambda: stepped_natural_parameters(
            pg, *data, pg._passes.Kmm_cholesky(), pg.q_mu, pg.q_sqrt, 1.0
        )
    )
    first, second = median_seconds(one), median_seconds(two)
    return [second - first, first, median_seconds(evaluation), median_seconds(step)]


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.class_cost",
        description="Seconds per pass, L-BFGS-B evaluation and natural step against C classes.",
    )
    parser.add_argument("--n", type=whole_number, default=100_000, help="training points")
    parser.add_argument(
        "--classes", default="1,2,6,26", help="comma-separated numbers of classes C"
    )
    args = parser.parse_args(argv)
    print(f"n = {args.n:,}, m = {INDUCING}, D = {FEATURES}; medians of {REPEATS} calls, seconds")
    print(
        "\n| C | a pass | objective, n_upd = 1 | objective + gradient, n_upd = 3 | natural step |"
    )
    print("|---:|---:|---:|---:|---:|")
    for classes in (int(c) for c in args.classes.split(",")):
        cells = " | ".join(f"{t:.3f}" for t in row(args.n, classes))
        print(f"| {classes} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
