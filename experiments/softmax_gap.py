"""
How far each deterministic rule for GPflow's softmax expectation is from it, at a fitted posterior.

``python -m experiments.softmax_gap digits`` (or ``satimage``, ``letter`` from
``$GPFLOW_FASTVI_DATA``) fits :class:`~gpflow_fastvi.VIConcave` with ``Softmax(C)`` (ARD squared
exponential at √D, ``--inducing`` k-means inducing inputs held, ``--budget`` seconds of ``fit``),
takes the marginals q(f_i) = N(m_i, v_i) at ``--points`` training points, and compares, for
fᵦ = E[f_y − log Σ_c exp f_c]:

- ``jensen``: Jensen's inequality over the other classes given f_y, Gauss–Hermite over f_y (the
  closed-form lower bound ``VIConcave`` maximised before);
- ``plain S``: S plain normal draws, fixed;
- ``sobol S``: S scrambled Sobol draws, moments matched
  (:func:`~gpflow_fastvi.sites.expectation.softmax_draws`; S = 128 is the package's rule,
  :func:`~gpflow_fastvi.sites.expectation.expected_log_softmax`, evaluated through it);
- ``sobol S + jensen``: the same draws with the Jensen bound as a control variate;
- ``GH 8 × sobol S``: 8 Gauss–Hermite nodes over f_y, S Sobol draws of the other classes;

each against plain Monte Carlo with ``--reference`` draws per point (10⁶ by default). Prints the
mean error over the points (what the ELBO sees) and the mean and largest absolute error.
"""

import argparse
import os
from typing import Callable, Dict, List, Optional, Sequence

import gpflow
import numpy as np
import tensorflow as tf
from scipy.special import logsumexp

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.cli_args import add_record
from gpflow_fastvi.benchmarks.pages import write_printed_table
from gpflow_fastvi.sites.expectation import SOFTMAX_DRAWS, expected_log_softmax, softmax_draws

from .multiclass import load

CHUNK = 50_000


def reference(m: np.ndarray, v: np.ndarray, y: np.ndarray, draws: int) -> np.ndarray:
    """fᵦ per point by plain Monte Carlo with ``draws`` draws of its own."""
    out = np.empty(len(m))
    for i in range(len(m)):
        rng = np.random.default_rng(1000 + i)
        total = 0.0
        for _ in range(max(1, draws // CHUNK)):
            f = m[i] + np.sqrt(v[i]) * rng.standard_normal((CHUNK, m.shape[1]))
            total += np.sum(f[:, y[i]] - logsumexp(f, axis=1))
        out[i] = total / (max(1, draws // CHUNK) * CHUNK)
    return out


def jensen_terms(m: np.ndarray, v: np.ndarray, own: np.ndarray, f_y: np.ndarray) -> np.ndarray:
    """−log(1 + Σ_{c≠y} e^{m_c + v_c/2 − f_y}) at each f_y [n, K]."""
    others = np.where(own, -np.inf, m + v / 2)
    exponents = others[:, None, :] - f_y[..., None]
    return -np.logaddexp(0.0, logsumexp(exponents, axis=-1))


def rules(m: np.ndarray, v: np.ndarray, y: np.ndarray) -> Dict[str, Callable[[], np.ndarray]]:
    """The candidate rules, each a function returning fᵦ per point."""
    n, C = m.shape
    own = np.eye(C)[y].astype(bool)
    x, w = np.polynomial.hermite_e.hermegauss(20)
    jensen = jensen_terms(m, v, own, m[own][:, None] + np.sqrt(v[own])[:, None] * x) @ (w / w.sum())

    def joint(eps: np.ndarray, control: bool = False) -> np.ndarray:
        f = m[:, None, :] + np.sqrt(v)[:, None, :] * eps[None]
        f_y = f[own[:, None, :].repeat(len(eps), 1)].reshape(n, len(eps))
        exact = f_y - logsumexp(f, axis=2)
        if not control:
            return exact.mean(axis=1)
        return jensen + (exact - jensen_terms(m, v, own, f_y)).mean(axis=1)

    def nested(draws: int) -> np.ndarray:
        xs, ws = np.polynomial.hermite_e.hermegauss(8)
        f_y = m[own][:, None] + np.sqrt(v[own])[:, None] * xs  # [n, H]
        f = m[:, None, :] + np.sqrt(v)[:, None, :] * softmax_draws(C, draws)[None]
        f = np.where(own[:, None, :], -np.inf, f)  # the others only
        exponents = f[:, None, :, :] - f_y[:, :, None, None]
        terms = -np.logaddexp(0.0, logsumexp(exponents, axis=-1)).mean(axis=-1)
        return terms @ (ws / ws.sum())

    plain = np.random.default_rng(0).standard_normal
    package = lambda: expected_log_softmax(  # noqa: E731
        tf.constant(m), tf.constant(v), tf.constant(y[:, None].astype(np.float64))
    ).numpy()
    candidates: Dict[str, Callable[[], np.ndarray]] = {"jensen": lambda: jensen}
    for S in (64, 128, 256, 512):
        candidates[f"plain {S}"] = lambda S=S: joint(plain((S, C)))
        candidates[f"sobol {S}"] = (
            package if S == SOFTMAX_DRAWS else lambda S=S: joint(softmax_draws(C, S))
        )
        candidates[f"sobol {S} + jensen"] = lambda S=S: joint(softmax_draws(C, S), control=True)
    candidates["GH 8 × sobol 64"] = lambda: nested(64)
    return candidates


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.softmax_gap", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("set", choices=("letter", "satimage", "digits"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--inducing", type=int, default=100)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds of fit")
    parser.add_argument("--points", type=int, default=300)
    parser.add_argument("--reference", type=int, default=1_000_000, help="draws per point")
    add_record(parser)
    args = parser.parse_args(argv)
    X, Y, _, _ = load(args.set, args.data_dir or os.environ.get("GPFLOW_FASTVI_DATA"))
    C, D = int(Y.max()) + 1, X.shape[1]
    model = fv.VIConcave(
        gpflow.kernels.SquaredExponential(lengthscales=np.full(D, np.sqrt(D))),
        gpflow.likelihoods.Softmax(C),
        fv.kmeans_inducing_points(X, args.inducing, seed=0),
        num_latent_gps=C,
        num_data=len(X),
        train_inducing=False,
    )
    fv.fit(model, (X, Y), time_budget=args.budget)
    rows = np.random.default_rng(1).choice(len(X), size=min(len(X), args.points), replace=False)
    m, v = (t.numpy() for t in model.predict_f(X[rows]))
    y = Y[rows, 0].astype(int)
    truth = reference(m, v, y, args.reference)
    print(f"{args.set}: C = {C}, {len(rows)} points, fᵦ's mean {truth.mean():.4f}\n")
    header = "| rule | mean error | mean absolute error | largest |"
    lines: List[str] = []
    for name, rule in rules(m, v, y).items():
        error = rule() - truth
        lines.append(
            f"| {name} | {error.mean():+.5f} | {np.abs(error).mean():.5f} "
            f"| {np.abs(error).max():.4f} |"
        )
    print("\n".join([header, "|---|---:|---:|---:|", *lines]))
    if args.record:
        write_printed_table(
            args.record,
            "experiments.softmax_gap",
            argv,
            header,
            lines,
            notes=f"{len(rows)} training points of {args.set} (C = {C}); fᵦ's mean "
            f"{truth.mean():.4f} nats; reference: {args.reference} plain draws per point.",
        )


if __name__ == "__main__":
    main()
