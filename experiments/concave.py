"""
VIConcave measured: time to SVGP + Scipy's ELBO, and the full form against GPflow's VGP models.

``python -m experiments.concave banana`` (or another set of
:data:`~gpflow_fastvi.datasets.registry.BENCHMARK_SETS`; options below) runs two things.

**Time to the ELBO.** From the benchmark page's start (ARD SE kernel at √D, M fixed k-means
inducing inputs, the logit link), SVGP + Scipy (L-BFGS-B over q(u) and θ) runs to convergence,
called again each time L-BFGS-B stops by its own test until that no longer raises the ELBO, and
its final ELBO E* is the target. :class:`~gpflow_fastvi.VIConcave` trained by
:func:`~gpflow_fastvi.fit` from the same start is timed to the first iterate whose ELBO is within
``--within`` (relative, default 0.1 %) of E*, and so is SVGP + Scipy's own run; the ratio of the
two is how many times sooner VIConcave gets there. Training time only: the ELBO of each iterate is
computed with the clock paused (:mod:`~gpflow_fastvi.benchmarks.methods`). ``--repeats`` runs
alternate the two methods; the medians are reported.

**Test errors** (``--errors SETS``): the paper's binary comparison on small sets, the full form
beside GPflow's VGP + Scipy and EP, all with the probit link (:func:`raetsch_errors`).

**The full form at fixed θ** (``--full N``, on the first N training points): VIConcave's steps
against the paper's own coordinate-wise algorithm (:mod:`tests.references.coordinate`)
and GPflow's :class:`~gpflow.models.VGP` and :class:`~gpflow.models.VGPOpperArchambeau` (the
O(N) parameterisation that is not concave) trained by Scipy on q alone, each timed to the ELBO of
the best of them, less 10⁻⁶ relative.
"""

import argparse
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from gpflow_fastvi import VIConcave, fit, kmeans_inducing_points
from gpflow_fastvi.benchmarks.arg_types import choice_list, positive
from gpflow_fastvi.benchmarks.baselines import run_svgp_scipy
from gpflow_fastvi.benchmarks.choices import BENCH_SET_NAMES
from gpflow_fastvi.benchmarks.cli_args import (
    add_benchmark_set,
    add_data_dir,
    add_inducing,
    add_repeats,
    add_time_budget,
)
from gpflow_fastvi.benchmarks.harness import TrainingClock, make_kernel, make_likelihood
from gpflow_fastvi.benchmarks.methods import run_data_holding_model
from gpflow_fastvi.datasets import load_benchmark
from tests.references.coordinate import coordinate_ascent
from tests.references.ep import EPClassifier

Curve = List[Dict[str, Any]]


def time_to(curve: Curve, target: float, key: str = "elbo") -> Optional[float]:
    """The ``time`` of the first row whose ``key`` is at least ``target``; None if none is."""
    for row in curve:
        if row[key] >= target:
            return float(row["time"])
    return None


def _median_if_all(times: Sequence[Optional[float]]) -> Optional[float]:
    """The median of ``times`` if every run reached the target; None if any did not."""
    reached = [t for t in times if t is not None]
    return float(np.median(reached)) if len(reached) == len(times) else None


def time_to_scipy_elbo(
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    *,
    num_inducing: int = 100,
    within: float = 1e-3,
    repeats: int = 1,
    time_budget: float = 3600.0,
    seed: int = 0,
) -> Dict[str, Any]:
    """
    The medians over ``repeats`` (the methods alternating) of the seconds SVGP + Scipy and
    VIConcave take to the ELBO within ``within`` of SVGP + Scipy's final one, with the runs. Each
    run stops at ``time_budget`` training seconds; ``scipy_converged`` says whether SVGP + Scipy
    ended before that, by its own test, in every run.
    """
    Z = kmeans_inducing_points(data[0], num_inducing, seed=seed)
    runs: Dict[str, List[Curve]] = {"SVGP + Scipy": [], "VIConcave": []}
    for repeat in range(repeats):
        order = ["SVGP + Scipy", "VIConcave"][:: 1 if repeat % 2 == 0 else -1]
        for name in order:
            if name == "SVGP + Scipy":
                runs[name].append(run_svgp_scipy(data, test, Z, time_budget, False, restart=True))
            else:
                runs[name].append(
                    run_data_holding_model("VIConcave", data, test, Z, time_budget, False)
                )
    final = float(np.median([curve[-1]["elbo"] for curve in runs["SVGP + Scipy"]]))
    target = final - within * abs(final)
    seconds = {name: [time_to(curve, target) for curve in curves] for name, curves in runs.items()}
    medians = {name: _median_if_all(times) for name, times in seconds.items()}
    scipy_s, concave_s = medians["SVGP + Scipy"], medians["VIConcave"]
    return {
        "target_elbo": target,
        "scipy_final_elbo": final,
        "scipy_converged": all(c[-1]["time"] < time_budget for c in runs["SVGP + Scipy"]),
        "seconds": seconds,
        "median_seconds": medians,
        "times_sooner": None if not (scipy_s and concave_s) else scipy_s / concave_s,
        "final": {
            name: {k: curves[-1][-1][k] for k in ("elbo", "test_accuracy", "test_nll", "time")}
            for name, curves in runs.items()
        },
    }


def full_form_at_fixed_theta(
    data: Tuple[np.ndarray, np.ndarray], *, steps: int = 30, relative: float = 1e-6
) -> Dict[str, Any]:
    """
    The full GP at the starting θ: VIConcave's steps, the paper's coordinate-wise sweeps, and
    Scipy on q alone for GPflow's VGP and VGPOpperArchambeau; for each, the ELBO reached, the
    seconds to within ``relative`` of the best of them, and its iterations (steps, sweeps).
    """
    X, Y = data
    D = X.shape[1]
    curves: Dict[str, Curve] = {}

    model = VIConcave(make_kernel(D), make_likelihood(), data=data)
    step = tf.function(lambda: model.update_sites(1), autograph=False)
    step()  # compiled before the clock starts, as Scipy's compile=True below is
    model.q_mu.assign(tf.zeros_like(model.q_mu))
    model.q_sqrt.assign(tf.eye(X.shape[0], dtype=model.q_sqrt.dtype)[None])
    curve, clock = [], TrainingClock()
    for i in range(steps):
        elbo = float(step())
        curve.append({"iteration": i + 1, "time": clock.elapsed(), "elbo": elbo})
    curves["VIConcave"] = curve

    # The paper's algorithm on the same Kmm (GPflow's jitter included) that the steps factorise.
    K = model.kernel(X).numpy() + gpflow.config.default_jitter() * np.eye(X.shape[0])
    curve, clock = [], TrainingClock()
    coordinate_ascent(
        K,
        2.0 * Y.ravel() - 1.0,
        callback=lambda sweep, elbo: curve.append(
            {"iteration": sweep, "time": clock.elapsed(), "elbo": elbo}
        ),
    )
    curves["coordinate-wise sweeps (NumPy)"] = curve

    for name, build in (
        ("VGP + Scipy", gpflow.models.VGP),
        ("VGPOpperArchambeau + Scipy", gpflow.models.VGPOpperArchambeau),
    ):
        reference = build(data, make_kernel(D), make_likelihood())
        gpflow.set_trainable(reference.kernel, False)
        loss = reference.training_loss_closure(compile=True)
        loss()  # compiled before the clock starts
        curves[name] = _scipy_curve(reference, loss)

    best = max(curve[-1]["elbo"] for curve in curves.values())
    target = best - relative * abs(best)
    return {
        "best_elbo": best,
        "methods": {
            name: {
                "final_elbo": curve[-1]["elbo"],
                "seconds_to_best": time_to(curve, target),
                "iterations": len(curve),
            }
            for name, curve in curves.items()
        },
    }


def raetsch_errors(
    names: Sequence[str], data_dir: Optional[str] = None, *, seed: int = 0
) -> Iterator[Dict[str, Any]]:
    """
    The paper's binary comparison, on the sets ``names``, all with the probit link: the full-form
    VIConcave (Z = X) by :func:`~gpflow_fastvi.fit`, GPflow's VGP + Scipy (the same model and
    objective, L-BFGS-B over q and θ) and EP (:class:`~tests.references.ep.EPClassifier`,
    θ trained on EP's log marginal likelihood), each from the benchmark page's kernel, on the
    seeded 80/20 split. Per method: test error in %, mean test NLL, the objective per training
    point (the ELBO; EP's log Z_EP, an estimate of log p(y), not a bound) and the training seconds.
    One row at a time, as each method finishes.
    """
    for name in names:
        X, Y, X_test, Y_test = load_benchmark(name, data_dir, seed=seed)
        D = X.shape[1]
        probit = gpflow.likelihoods.Bernoulli  # GPflow's default link
        models = {
            "VIConcave": VIConcave(make_kernel(D), probit(), data=(X, Y)),
            "VGP + Scipy": gpflow.models.VGP((X, Y), make_kernel(D), probit()),
            "EP": EPClassifier((X, Y), make_kernel(D)),
        }
        for method, model in models.items():
            start = time.perf_counter()
            if method == "VIConcave":
                fit(model)
            elif method == "EP":
                model.train()
            else:
                gpflow.optimizers.Scipy().minimize(
                    model.training_loss_closure(compile=True),
                    model.trainable_variables,
                    options=dict(maxiter=100_000),
                )
            seconds = time.perf_counter() - start
            p = np.asarray(model.predict_y(X_test)[0]).ravel()
            log_density = np.asarray(model.predict_log_density((X_test, Y_test)))
            objective = float(model.maximum_log_likelihood_objective())  # ELBO; EP: log Z_EP
            yield {
                "set": name,
                "N": X.shape[0],
                "method": method,
                "error_percent": 100.0 * float(np.mean((p > 0.5) != (Y_test.ravel() > 0.5))),
                "test_nll": -float(np.mean(log_density)),
                "objective_per_point": objective / X.shape[0],
                "seconds": seconds,
            }


def _scipy_curve(model: Any, loss: Callable[[], tf.Tensor]) -> Curve:
    """Scipy's L-BFGS-B on ``loss`` to convergence, the model's ELBO at every accepted iterate."""
    elbo = tf.function(model.elbo, autograph=False)
    curve: Curve = []
    clock = TrainingClock()

    def step_callback(step: int, variables: Sequence[tf.Variable], values: Sequence[Any]) -> None:
        elapsed = clock.elapsed()
        with clock.paused():  # the ELBO at the accepted iterate, not counted
            for variable, value in zip(variables, values):
                variable.assign(value)
            curve.append({"iteration": step + 1, "time": elapsed, "elbo": float(elbo())})

    gpflow.optimizers.Scipy().minimize(
        loss,
        model.trainable_variables,
        step_callback=step_callback,
        options=dict(maxiter=100_000, ftol=1e-15, gtol=1e-10),
    )
    return curve


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.concave``."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.concave",
        description="VIConcave: time to SVGP + Scipy's ELBO; the full form against VGP.",
    )
    add_benchmark_set(parser)
    add_inducing(parser, 100, aliases=("--num-inducing",))
    parser.add_argument(
        "--within",
        metavar="R",
        type=positive(float),
        default=1e-3,
        help="relative ELBO tolerance (default: 0.001)",
    )
    add_repeats(parser, 1, "runs of each method, the two alternating")
    add_time_budget(
        parser,
        3600.0,
        "each run may take",
        note="; where SVGP + Scipy has not converged by then, its ELBO at the budget is the target",
    )
    parser.add_argument(
        "--full",
        metavar="N",
        type=positive(int),
        default=None,
        help="also the full form at fixed θ on the first N training points (default: not run)",
    )
    parser.add_argument(
        "--errors",
        metavar="SETS",
        type=choice_list(BENCH_SET_NAMES, "data set(s)"),
        default=(),
        help="instead: comma-separated small sets (breast_cancer,diabetis,heart,german_raetsch) "
        "for the full form's test errors beside VGP + Scipy and EP (probit link)",
    )
    add_data_dir(parser)
    return parser


def print_errors(names: Sequence[str], data_dir: Optional[str]) -> None:
    """The rows of :func:`raetsch_errors` as a Markdown table, each as soon as it is measured."""
    print("| set | N | method | test error % | test NLL | ELBO/N (EP: log Z_EP/N) | seconds |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for row in raetsch_errors(names, data_dir):
        print(
            f"| {row['set']} | {row['N']} | {row['method']} | {row['error_percent']:.2f} | "
            f"{row['test_nll']:.4f} | {row['objective_per_point']:.5f} | {row['seconds']:.1f} |",
            flush=True,
        )


def print_time_to_elbo(result: Dict[str, Any]) -> None:
    """What :func:`time_to_scipy_elbo` found, a line per method."""
    print(
        f"SVGP + Scipy's final ELBO {result['scipy_final_elbo']:.6g}; target {result['target_elbo']:.6g}"
        + (
            ""
            if result["scipy_converged"]
            else " (the budget ended SVGP + Scipy before it converged)"
        )
    )
    for name, seconds in result["median_seconds"].items():
        final = result["final"][name]
        print(
            f"{name:14s} to target: {seconds if seconds is None else round(seconds, 2)} s "
            f"(runs {result['seconds'][name]}); end: ELBO {final['elbo']:.6g}, "
            f"accuracy {final['test_accuracy']:.4f}, NLL {final['test_nll']:.4f} after "
            f"{final['time']:.1f} s"
        )
    print(f"VIConcave reaches it {result['times_sooner']} times sooner")


def print_full_form(full: Dict[str, Any], N: int) -> None:
    """What :func:`full_form_at_fixed_theta` found on N points, a line per method."""
    print(f"full form, N = {N}, fixed θ; best ELBO {full['best_elbo']:.10g}")
    for name, row in full["methods"].items():
        print(
            f"{name:30s} final {row['final_elbo']:.10g}, to best −1e-6: "
            f"{row['seconds_to_best']} s, {row['iterations']} iterations"
        )


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    if args.errors:
        print_errors(args.errors, args.data_dir)
        return
    X, Y, X_test, Y_test = load_benchmark(args.name, args.data_dir)
    result = time_to_scipy_elbo(
        (X, Y),
        (X_test, Y_test),
        num_inducing=args.inducing,
        within=args.within,
        repeats=args.repeats,
        time_budget=args.time_budget,
    )
    print(f"{args.name}: N = {X.shape[0]}, M = {args.inducing}")
    print_time_to_elbo(result)
    if args.full:
        print_full_form(full_form_at_fixed_theta((X[: args.full], Y[: args.full])), args.full)


if __name__ == "__main__":
    main()
