"""
Where the time of one training step goes, per model, beside the machine's matmul floor.

``python -m experiments.profile [n] [m]`` (default n = 100,000, m = 100) times, on
the synthetic data of :mod:`~gpflow_fastvi.benchmarks.scaling` (D = 10), compiled pieces of one
evaluation of the persistent route of :class:`~gpflow_fastvi.VIJJ`, :class:`~gpflow_fastvi.VITaylor`
and :class:`~gpflow_fastvi.KLCorrected` (sparse, logit link, Newton E-steps) — the objective and
its θ-gradient after ``n_upd`` closed-form site steps, what L-BFGS-B asks for at every trial point
(a θ a little away from the one where q(u) was last set)
— and one SVI step of :class:`~gpflow_fastvi.PolyaGammaSVGP` beside one SVGP + Adam step on a batch
of 100:

- ``Kmn``: the kernel matrix K(Z, X) alone;
- ``projection``: chol(Kmm) and A = L⁻¹ Kmn, with the diagonal of Knn;
- ``objective, n_upd = k``: the forward pass of :meth:`~gpflow_fastvi.models.base.GaussianSitesModel._stepped_sites`
  with k site steps, each a pass over the data (so the difference between k and k + 1 is the
  price of one pass);
- ``objective + gradient, n_upd = k``: the same with the backward pass, as L-BFGS-B calls it;
- ``tracing`` and ``first call``: the one-off cost of compiling that function for n_upd = 3 (the
  only function a ``fit`` of the persistent route traces): building its graph, then the first
  call beyond a later one (graph optimisation and kernel set-up);
- ``floor``: one dense product of 2·n·m² operations at the measured float64 matmul rate.

Each piece is compiled once and timed as the median of ``REPEATS`` (7) calls after the first.
Prints a Markdown table.
"""

import argparse
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from gpflow_fastvi import VIJJ, KLCorrected, NaturalGradientSVI, PolyaGammaSVGP, VITaylor
from gpflow_fastvi.benchmarks.arg_types import positive, whole_number
from gpflow_fastvi.benchmarks.scaling import (
    NUM_FEATURES,
    compiled_seconds,
    matmul_rate,
    synthetic_data,
)

REPEATS = 7
BATCH = 100
TRACING = "tracing it (one-off)"
FIRST_CALL = "its first call beyond a later one (one-off)"


def median_seconds(function: Callable[[], object]) -> float:
    """Median wall-clock seconds of ``function()`` over ``REPEATS`` calls after the first."""
    return compiled_seconds(function, REPEATS)[1]


def _kernel() -> gpflow.kernels.Kernel:
    return gpflow.kernels.SquaredExponential(lengthscales=np.full(NUM_FEATURES, NUM_FEATURES**0.5))


def profile_sites_model(
    model_class: type, X: np.ndarray, Y: np.ndarray, m: int
) -> Dict[str, float]:
    """Seconds of each piece of one persistent-route evaluation of ``model_class``."""
    logit = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    model = model_class(
        _kernel(),
        likelihood=logit,
        inducing_variable=X[:m].copy(),
        train_inducing=False,
        data=(X, Y),
    )
    model.update_sites(2)  # sites away from their start, as during training
    # The local parameters the persistent route keeps from the last accepted iterate, and a
    # trial θ of L-BFGS-B a step away from it.
    accepted = model._site_parameters()
    model.kernel.variance.assign(model.kernel.variance * 1.01)
    variables = [
        model.kernel.variance.unconstrained_variable,
        model.kernel.lengthscales.unconstrained_variable,
    ]
    data_X = model.data[0]

    def compiled(function: Callable[[], tf.Tensor]) -> Callable[[], object]:
        graph = tf.function(function, autograph=False)
        return lambda: graph().numpy()

    def value_and_gradient(n_upd: int) -> Callable[[], tf.Tensor]:
        def run() -> tf.Tensor:
            with tf.GradientTape() as tape:
                value = model._stepped_sites(n_upd, site_parameters=accepted).objective
            gradients = tape.gradient(value, variables)
            return value + tf.add_n([tf.reduce_sum(g) for g in gradients]) * 0.0

        return run

    seconds = {
        "Kmn": median_seconds(
            compiled(lambda: tf.reduce_sum(model.kernel(model.inducing_variable.Z, data_X)))
        ),
        "projection": median_seconds(
            compiled(
                lambda: tf.reduce_sum(
                    model._passes.projection(data_X, model._passes.Kmm_cholesky())[0]
                )
            )
        ),
    }

    def objective(n_upd: int) -> Callable[[], tf.Tensor]:
        return lambda: model._stepped_sites(n_upd, site_parameters=accepted).objective

    for n_upd in (1, 2, 3):
        seconds[f"objective, n_upd = {n_upd}"] = median_seconds(compiled(objective(n_upd)))
    seconds["objective + gradient, n_upd = 1"] = median_seconds(compiled(value_and_gradient(1)))
    graph = tf.function(value_and_gradient(3), autograph=False)
    start = time.perf_counter()
    graph.get_concrete_function()
    tracing = time.perf_counter() - start
    first, later = compiled_seconds(lambda: graph().numpy(), REPEATS)
    seconds["objective + gradient, n_upd = 3 (one L-BFGS-B evaluation)"] = later
    seconds[TRACING] = tracing
    seconds[FIRST_CALL] = first - later
    return seconds


def profile_svi_steps(X: np.ndarray, Y: np.ndarray, m: int) -> Dict[str, float]:
    """Seconds of one PolyaGammaSVGP SVI step and one SVGP + Adam step, batches of :data:`BATCH`."""
    Z = X[:m].copy()
    rng = np.random.default_rng(1)
    batches = [
        (tf.constant(X[i]), tf.constant(Y[i]))
        for i in (rng.choice(len(X), BATCH, replace=False) for _ in range(REPEATS + 1))
    ]
    cycle = iter(range(10**9))

    logit = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    polya_gamma = PolyaGammaSVGP(_kernel(), logit, Z.copy(), num_data=len(X), train_inducing=False)
    svi = NaturalGradientSVI(polya_gamma)

    svgp = gpflow.models.SVGP(_kernel(), logit, Z.copy(), num_data=len(X))
    gpflow.set_trainable(svgp.inducing_variable, False)
    adam = gpflow.keras.tf_keras.optimizers.Adam(0.01)
    adam.build(svgp.trainable_variables)

    @tf.function(autograph=False)
    def adam_step(X_batch: tf.Tensor, Y_batch: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = svgp.training_loss((X_batch, Y_batch))
        adam.apply_gradients(
            zip(tape.gradient(loss, svgp.trainable_variables), svgp.trainable_variables)
        )
        return loss

    def next_batch() -> Tuple[tf.Tensor, tf.Tensor]:
        return batches[next(cycle) % len(batches)]

    return {
        "PolyaGammaSVGP SVI step": median_seconds(lambda: svi.step(next_batch()).numpy()),
        "SVGP + Adam step": median_seconds(lambda: adam_step(*next_batch()).numpy()),
    }


def markdown(n: int, m: int, rate: float, rows: Dict[str, Dict[str, float]]) -> List[str]:
    """The table: milliseconds of each piece per model, and its multiple of the floor."""
    floor = 2.0 * n * m * m / rate
    lines = [
        f"n = {n:,}, m = {m}, D = {NUM_FEATURES}; float64 matmul {rate / 1e9:.1f} GFLOP/s, "
        f"floor 2·n·m² = {floor * 1e3:.1f} ms",
        "",
        "| model | piece | ms | × floor |",
        "|---|---|---:|---:|",
    ]
    for model_name, seconds in rows.items():
        for piece, value in seconds.items():
            multiple = "—" if piece in (TRACING, FIRST_CALL) else f"{value / floor:.2f}"
            lines.append(f"| {model_name} | {piece} | {value * 1e3:.1f} | {multiple} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.profile",
        description="Where the time of one training step goes, beside the matmul floor.",
    )
    parser.add_argument(
        "n",
        nargs="?",
        type=positive(whole_number),
        default=100_000,
        help="number of points (default: 100000)",
    )
    parser.add_argument(
        "m", nargs="?", type=positive(int), default=100, help="inducing inputs (default: 100)"
    )
    args = parser.parse_args(argv)
    n, m = args.n, args.m
    X, Y = synthetic_data(n)
    rate = matmul_rate()
    rows = {
        "VIJJ": profile_sites_model(VIJJ, X, Y, m),
        "VITaylor": profile_sites_model(VITaylor, X, Y, m),
        "KLCorrected": profile_sites_model(KLCorrected, X, Y, m),
        "SVI steps": profile_svi_steps(X, Y, m),
    }
    print("\n".join(markdown(n, m, rate, rows)))


if __name__ == "__main__":
    main()
