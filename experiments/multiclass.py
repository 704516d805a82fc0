"""
Multi-class: :class:`~gpflow_fastvi.VIConcave` and :class:`~gpflow_fastvi.VITaylor` with GPflow's
``Softmax`` and :class:`~gpflow_fastvi.PolyaGammaSVGP` with
:class:`~gpflow_fastvi.likelihoods.LogisticSoftmax` against GPflow's multi-class SVGPs, on letter,
satimage or scikit-learn's digits, in one process.

``python -m experiments.multiclass letter --budget 150`` builds, for each method, the same start:
an ARD squared-exponential kernel with lengthscales √D, ``--inducing`` k-means inducing inputs
(held fixed, the papers' protocol, unless ``--train-inducing``), inputs standardised by the
training part's moments. Methods:

- ``VIConcave``: ``VIConcave(kernel, Softmax(C), Z, num_latent_gps=C)``, ``fit(model, data,
  time_budget=budget)`` with every other default;
- ``VITaylor``: the same model line with ``VITaylor``;
- ``PolyaGammaSVGP``: the same with ``LogisticSoftmax(C)``;
- ``SVGP + Softmax + Adam``: GPflow's ``SVGP(num_latent_gps=C)`` with ``Softmax(C)`` (Monte Carlo
  expectations), Adam at ``--rate`` on mini-batches of 100;
- ``SVGP + LogisticSoftmax + Adam``: the same with the likelihood PolyaGammaSVGP augments, which
  separates what the likelihood costs from what the augmented bound costs;
- ``SVGP + MultiClass + Scipy``: GPflow's ``MultiClass(C)`` (RobustMax, deterministic quadrature)
  under ``gpflow.optimizers.Scipy``, as GPflow's multi-class notebook trains it, in calls of 20
  iterations so that its progress can be read (each call a fresh L-BFGS-B, which loses its
  curvature memory), until a call ends by itself.

Each is evaluated on the test part (accuracy, mean NLL of the true class) every ``--every``
seconds of training, the evaluation's time left out, under class probabilities that are a
function of q(f) alone (:func:`predicted_probabilities`: for ``Softmax`` and ``LogisticSoftmax``
their expectation by the same fixed draws at every reading, so that two readings differ only
where the model does), and the table gives the final figures and
the seconds to the target: within 0.5 accuracy points of the best final accuracy of all methods
and within 0.02 of the best final NLL, the seconds of the first reading and the drift (the final
NLL less the lowest along the method's own readings). With ``SVGP + Softmax + Adam`` among the methods, the
table also gives the seconds Adam took to reach each method's final answer (within 0.5 points
and 0.01 NLL; "> budget" if it did not) and their ratio to the method's own seconds;
``--adam-budget`` lets Adam run longer than the others, so that the ratio is measured where Adam
needs more than their budget.
``--train-inducing`` trains the inducing inputs with the hyperparameters in every method, as a
GPflow user's SVGP does by default; ``digits`` is scikit-learn's ``load_digits`` (1,797 images
of 64 pixels, 10 classes), split 70/30 with a fixed seed and stratified, pixels standardised.

letter: UCI's 20,000 rows (the first 16,000 to train, the last 4,000 to test, 26 classes, 16
features); satimage: LIBSVM's ``satimage.scale`` (4,435 / 2,000, 6 classes, 36 features). Both are
read from ``$GPFLOW_FASTVI_DATA`` (``--data-dir``) as the MANIFEST there describes them.
"""

import argparse
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.cli_args import add_record
from gpflow_fastvi.benchmarks.pages import write_printed_table
from gpflow_fastvi.datasets import load_benchmark
from gpflow_fastvi.likelihoods import LogisticSoftmax
from gpflow_fastvi.sites import expected_log_softmax
from gpflow_fastvi.sites.expectation import softmax_draws

METHODS = (
    "VIConcave",
    "VITaylor",
    "PolyaGammaSVGP",
    "SVGP + Softmax + Adam",
    "SVGP + LogisticSoftmax + Adam",
    "SVGP + MultiClass + Scipy",
)
ACCURACY_WITHIN = 0.005
NLL_WITHIN = 0.02
ANSWER_NLL_WITHIN = 0.01
"""How close to a method's final test NLL Adam must come to have reached that method's answer
(and within :data:`ACCURACY_WITHIN` of its accuracy): the binary user-script's tolerance."""

Split = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def load(name: str, data_dir: Optional[str]) -> Split:
    """(X_train, Y_train, X_test, Y_test) with classes 0 … C − 1 in Y [N, 1], X standardised."""
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        X, y = load_digits(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.3, random_state=0, stratify=y
        )
        mean, scale = X_train.mean(axis=0), X_train.std(axis=0)
        scale[scale == 0] = 1.0  # pixels blank in every training image
        Y_train, Y_test = (t[:, None].astype(np.float64) for t in (y_train, y_test))
        return (X_train - mean) / scale, Y_train, (X_test - mean) / scale, Y_test
    if not data_dir:
        raise SystemExit("set GPFLOW_FASTVI_DATA or pass --data-dir")
    return tuple(load_benchmark(name, data_dir))  # type: ignore[return-value]


SCORE_DRAWS = 1024
"""Fixed draws per test point of a Monte Carlo likelihood's predictive class probabilities
(:func:`predicted_probabilities`)."""


def predicted_probabilities(model: Any, X: np.ndarray, block: int = 256) -> np.ndarray:
    """
    The class probabilities [N, C] the model's ``predict_y`` estimates: for a Monte Carlo
    likelihood (``Softmax``, ``LogisticSoftmax``) E_q[p(y = k | f)] by :data:`SCORE_DRAWS`
    fixed quasi-random draws of q(f) = N(Fmu, diag(Fvar)) (``softmax_draws``, the same for every
    reading and every model), in blocks of ``block`` points; for another likelihood (GPflow's
    ``MultiClass``, by quadrature) ``predict_y`` itself. ``predict_y``'s fresh draws at every
    call would move a method's readings between two evaluations of the same model.
    """
    likelihood = model.likelihood
    if not isinstance(likelihood, gpflow.likelihoods.MonteCarloLikelihood):
        return model.predict_y(X)[0].numpy()
    parts = []
    for begin in range(0, len(X), block):
        X_block = X[begin : begin + block]
        Fmu, Fvar = model.predict_f(X_block)
        eps = tf.constant(softmax_draws(int(Fmu.shape[-1]), SCORE_DRAWS), Fmu.dtype)
        F = Fmu[:, None, :] + tf.sqrt(Fvar)[:, None, :] * eps  # [n, S, C]
        mean = likelihood.conditional_mean(tf.constant(X_block)[:, None, :], F)
        parts.append(tf.reduce_mean(mean, axis=1).numpy())
    return np.concatenate(parts)


def scorer(model: Any, X_test: np.ndarray, Y_test: np.ndarray) -> Callable[[], Tuple[float, float]]:
    """Test accuracy and mean NLL of the true class under :func:`predicted_probabilities`."""
    classes = Y_test[:, 0].astype(int)

    def score() -> Tuple[float, float]:
        probabilities = predicted_probabilities(model, X_test)
        own = np.clip(probabilities[np.arange(len(classes)), classes], 1e-300, None)
        return float(np.mean(probabilities.argmax(axis=1) == classes)), float(-np.log(own).mean())

    return score


def run(
    method: str,
    split: Split,
    Z: np.ndarray,
    C: int,
    budget: float,
    every: float,
    rate: float,
    train_inducing: bool = False,
    elbos: Optional[Dict[str, float]] = None,
) -> List[Tuple[float, float, float]]:
    """Train one method for ``budget`` seconds; return (seconds, accuracy, NLL) rows. For a
    softmax model, its final ELBO per training point goes into ``elbos`` under ``method``."""
    X, Y, X_test, Y_test = split
    N, D = X.shape
    kernel = gpflow.kernels.SquaredExponential(lengthscales=np.full(D, np.sqrt(D)))
    rows: List[Tuple[float, float, float]] = []
    if method in ("VIConcave", "VITaylor", "PolyaGammaSVGP"):
        model_class, likelihood = {
            "VIConcave": (fv.VIConcave, gpflow.likelihoods.Softmax(C)),
            "VITaylor": (fv.VITaylor, gpflow.likelihoods.Softmax(C)),
            "PolyaGammaSVGP": (fv.PolyaGammaSVGP, LogisticSoftmax(C)),
        }[method]
        model = model_class(
            kernel,
            likelihood,
            Z.copy(),
            num_latent_gps=C,
            num_data=N,
            train_inducing=train_inducing,
        )
        score = scorer(model, X_test, Y_test)

        def callback(m: Any) -> Dict[str, float]:
            accuracy, nll = score()  # fit leaves the callback's time out of the row's
            return {"test_accuracy": accuracy, "test_nll": nll}

        trace = fv.fit(model, (X, Y), time_budget=budget, callback=callback)
        if elbos is not None and isinstance(likelihood, gpflow.likelihoods.Softmax):
            elbos[method] = softmax_elbo_per_point(model, X, Y)
        return [(r["time"], r["test_accuracy"], r["test_nll"]) for r in trace.rows]
    likelihood = {
        "SVGP + Softmax + Adam": lambda: gpflow.likelihoods.Softmax(C),
        "SVGP + LogisticSoftmax + Adam": lambda: LogisticSoftmax(C),
        "SVGP + MultiClass + Scipy": lambda: gpflow.likelihoods.MultiClass(C),
    }[method]()
    if isinstance(likelihood, gpflow.likelihoods.Softmax):
        Y = Y.astype(np.int64)  # GPflow's Softmax takes integer labels only
    model = gpflow.models.SVGP(kernel, likelihood, Z.copy(), num_latent_gps=C, num_data=N)
    gpflow.set_trainable(model.inducing_variable, train_inducing)
    score = scorer(model, X_test, Y_test)
    elapsed = 0.0
    if method.endswith("Adam"):
        batches = iter(
            tf.data.Dataset.from_tensor_slices((X, Y)).repeat().shuffle(N, seed=0).batch(100)
        )
        loss = model.training_loss_closure(batches)
        optimizer = gpflow.keras.tf_keras.optimizers.Adam(rate)

        @tf.function
        def step() -> None:
            optimizer.minimize(loss, model.trainable_variables)

        while elapsed < budget:
            began = time.perf_counter()
            chunk_end = began + every
            while time.perf_counter() < chunk_end:
                for _ in range(50):
                    step()
            elapsed += time.perf_counter() - began
            rows.append((elapsed, *score()))
        if elbos is not None and isinstance(likelihood, gpflow.likelihoods.Softmax):
            elbos[method] = softmax_elbo_per_point(model, X, Y)
        return rows
    closure = model.training_loss_closure((X, Y))
    while elapsed < budget:
        began = time.perf_counter()
        result = gpflow.optimizers.Scipy().minimize(
            closure, model.trainable_variables, options=dict(maxiter=20)
        )
        elapsed += time.perf_counter() - began
        rows.append((elapsed, *score()))
        if result.nit < 20:
            break
    return rows


def softmax_elbo_per_point(model: Any, X: np.ndarray, Y: np.ndarray) -> float:
    """SVGP's softmax ELBO per training point at the model's q(u), E[log softmax] by 2¹² fixed
    quasi-random draws (the package's rule with 32 times its draws), the same for every model,
    over the points in blocks of 500."""
    total = 0.0
    for begin in range(0, len(X), 500):
        Fmu, Fvar = model.predict_f(X[begin : begin + 500])
        labels = tf.constant(Y[begin : begin + 500], Fmu.dtype)
        total += float(tf.reduce_sum(expected_log_softmax(Fmu, Fvar, labels, draws=2**12)))
    return (total - float(model.prior_kl())) / len(X)


def first_within(
    rows: List[Tuple[float, float, float]],
    accuracy: float,
    nll: float,
    nll_within: float = NLL_WITHIN,
) -> Optional[float]:
    """The seconds of the first row within 0.5 points of ``accuracy`` and ``nll_within`` of
    ``nll``."""
    return next(
        (t for t, a, n in rows if a >= accuracy - ACCURACY_WITHIN and n <= nll + nll_within),
        None,
    )


def shown(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.1f}"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.multiclass", description=__doc__)
    parser.add_argument("set", choices=("letter", "satimage", "digits"))
    parser.add_argument("--budget", type=float, default=150.0, help="training seconds per method")
    parser.add_argument(
        "--adam-budget",
        type=float,
        help="training seconds of SVGP + Softmax + Adam (default: --budget), long enough for "
        "Adam to reach a faster method's answer",
    )
    parser.add_argument("--every", type=float, default=10.0, help="seconds between evaluations")
    parser.add_argument("--rate", type=float, default=0.01, help="Adam's learning rate")
    parser.add_argument("--inducing", type=int, default=100, help="k-means inducing inputs M")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    parser.add_argument(
        "--train-inducing",
        action="store_true",
        help="train the inducing inputs with the hyperparameters, as SVGP does by default",
    )
    parser.add_argument(
        "--data-dir", default=os.environ.get("GPFLOW_FASTVI_DATA"), help="the benchmark files"
    )
    add_record(parser)
    args = parser.parse_args(argv)
    split = load(args.set, args.data_dir)
    C = int(split[1].max()) + 1
    Z = fv.kmeans_inducing_points(split[0], args.inducing, seed=0)
    print(f"{args.set}: N={len(split[0])}, D={split[0].shape[1]}, C={C}, test {len(split[2])}")
    results: Dict[str, List[Tuple[float, float, float]]] = {}
    elbos: Dict[str, float] = {}
    for method in args.methods.split(","):
        budget = args.budget
        if method == "SVGP + Softmax + Adam" and args.adam_budget is not None:
            budget = args.adam_budget
        results[method] = run(
            method, split, Z, C, budget, args.every, args.rate, args.train_inducing, elbos
        )
        seconds, accuracy, nll = results[method][-1]
        print(f"{method}: {seconds:.1f} s, accuracy {accuracy:.4f}, NLL {nll:.4f}", flush=True)
        step = max(1, len(results[method]) // 15)
        print("  " + ", ".join(f"{t:.0f} s {a:.3f}/{n:.3f}" for t, a, n in results[method][::step]))
    best_accuracy = max(r[-1][1] for r in results.values())
    best_nll = min(r[-1][2] for r in results.values())
    print(
        f"\ntarget: accuracy ≥ {best_accuracy - ACCURACY_WITHIN:.4f}, NLL ≤ {best_nll + NLL_WITHIN:.4f}"
    )
    adam = results.get("SVGP + Softmax + Adam")
    header = (
        "| method | seconds | accuracy | NLL | softmax ELBO / N | first reading s | drift "
        "| seconds to target | Adam's seconds to this answer | ratio |"
    )
    print("\n" + header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = []
    for method, rows in results.items():
        hit = first_within(rows, best_accuracy, best_nll)
        t, a, n = rows[-1]
        adam_hit = first_within(adam, a, n, ANSWER_NLL_WITHIN) if adam is not None else None
        if adam is None:
            reached, ratio = "—", "—"
        elif adam_hit is None:  # not within Adam's budget: the ratio is at least this
            reached, ratio = f"> {adam[-1][0]:.1f}", f"> {adam[-1][0] / t:.1f}×"
        else:
            reached, ratio = f"{adam_hit:.1f}", f"{adam_hit / t:.1f}×"
        elbo = f"{elbos[method]:.4f}" if method in elbos else "—"
        drift = n - min(r[2] for r in rows)  # the final NLL above the best along the trace
        lines.append(
            f"| {method} | {t:.1f} | {a:.4f} | {n:.4f} | {elbo} | {rows[0][0]:.1f} | {drift:.4f} "
            f"| {shown(hit)} | {reached} | {ratio} |"
        )
        print(lines[-1])
    if args.record:
        write_printed_table(
            args.record,
            "experiments.multiclass",
            argv,
            header,
            lines,
            notes=f"Target: accuracy ≥ {best_accuracy - ACCURACY_WITHIN:.4f}, "
            f"NLL ≤ {best_nll + NLL_WITHIN:.4f}.",
        )


if __name__ == "__main__":
    main()
