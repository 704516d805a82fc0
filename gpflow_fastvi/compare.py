"""
The ``compare`` job: the fast methods of this package against GPflow's SVGP, on one data set, for
the same wall-clock budget.

The methods (:data:`ALL_METHODS`; :func:`run_comparison` runs :data:`DEFAULT_METHODS` unless told
otherwise) start from the same point and are timed the same way. The fast ones:

* ``"VIJJ"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.VIJJ` (closed-form sites and q(u),
  L-BFGS on the collapsed bound in the hyperparameters);
* ``"VITaylor"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.VITaylor` (the same scheme
  with Taylor sites);
* ``"KLCorrected"``: :func:`gpflow_fastvi.fit` on a sparse :class:`~gpflow_fastvi.KLCorrected`
  (EM: closed-form q(f̄) and q(fₙ), L-BFGS on the KL-corrected bound in the hyperparameters);
* ``"PolyaGammaSVGP"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.PolyaGammaSVGP`
  (mini-batch SVI: closed-form natural-gradient steps on q(u), Adam on the hyperparameters),
  evaluated about :data:`PG_EVALUATIONS_PER_PASS` times per pass over the data and run until the
  budget ends, as SVGP + Adam.

The baselines (their names start with ``"SVGP"``):

* ``"SVGP + Scipy"``: :class:`gpflow.models.SVGP` trained full-batch by
  :class:`gpflow.optimizers.Scipy` (L-BFGS-B over q(u) and the hyperparameters);
* ``"SVGP + Adam"``: the same SVGP trained by mini-batch Adam (stochastic variational inference)
  at the learning rate ``adam_lr``; ``"SVGP + Adam (lr 0.1)"`` (see :func:`adam_method`) names the
  same method at another learning rate, so that one comparison can hold a grid of them;
* ``"SVGP + NatGrad + Adam"``: the same SVGP, each mini-batch step a
  :class:`gpflow.optimizers.NaturalGradient` step (γ = :data:`NATGRAD_GAMMA`) on q(u) followed by
  an Adam step on the hyperparameters, both on the same mini-batch.

Shared set-up: a :class:`~gpflow.kernels.SquaredExponential` kernel with one lengthscale per input
dimension, all initialised at √D (the data are expected standardised, so that two points are about
√(2D) apart: at lengthscale 1 in 24 dimensions K is nearly diagonal, and on german every method
settles at the constant predictor), variance 1.0; the same fixed
(not trained) k-means inducing inputs; the logit link, ``Bernoulli(invlink=tf.sigmoid)``; the same
mini-batch size and Adam learning rate for every mini-batch method.

Each method's trace is a list of rows, ``{"iteration", "time", "test_accuracy", "test_nll",
"elbo"}``, starting with the untrained model at time 0. ``time`` is training wall-clock seconds
since the method started, graph compilation included and the evaluations themselves excluded (the
clock is paused while a row is computed). The ELBO is on the full training data and is the same
quantity for every method, GPflow's SVGP ELBO (by quadrature) at the method's q(u): SVGP's own ELBO
for the baselines; :meth:`VIJJ.elbo` and :meth:`VITaylor.elbo` for VIJJ and VITaylor (for VIJJ it
lies above the Jaakkola–Jordan bound VIJJ optimises; VITaylor's own objective is an approximation,
not a bound); ``gpflow.models.SVGP.elbo(model, data)`` for PolyaGammaSVGP, whose own ``elbo`` is
the closed-form Pólya-Gamma bound, which lies below it; :meth:`KLCorrected.elbo` for KLCorrected
(the SVGP ELBO of its predictive, the noise ε integrated out).

TensorFlow and GPflow are imported with this module; keep it out of ``gpflow_fastvi/__init__.py``.
"""

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import get_enable_check_shapes

from .datasets.loaders import BENCH_INSTALL_HINT, PathLike

VIJJ_NAME = "VIJJ"
VITAYLOR_NAME = "VITaylor"
KLC_NAME = "KLCorrected"
PG_NAME = "PolyaGammaSVGP"
SCIPY_NAME = "SVGP + Scipy"
ADAM_NAME = "SVGP + Adam"
NATGRAD_NAME = "SVGP + NatGrad + Adam"
ALL_METHODS: Tuple[str, ...] = (
    VIJJ_NAME,
    VITAYLOR_NAME,
    KLC_NAME,
    PG_NAME,
    SCIPY_NAME,
    ADAM_NAME,
    NATGRAD_NAME,
)
"""Every method :func:`run_comparison` knows, fast ones first, then the SVGP baselines (and
``"SVGP + Adam (lr X)"`` for any learning rate X; see :func:`adam_method`)."""
DEFAULT_METHODS: Tuple[str, ...] = (VIJJ_NAME, SCIPY_NAME, ADAM_NAME)
"""The methods :func:`run_comparison` runs unless given ``methods``."""
METHODS = DEFAULT_METHODS
"""The former name of :data:`DEFAULT_METHODS`."""
FAST_METHODS: Tuple[str, ...] = (VIJJ_NAME, VITAYLOR_NAME, KLC_NAME, PG_NAME)
"""The methods of this package; the table gives their time-to-target ratios against baselines."""
BASELINE_PREFIX = "SVGP"
"""Methods whose names start with this are GPflow baselines."""

ACCURACY_TOLERANCE = 0.005
"""Time to target: within this much (half an accuracy point) of the best final test accuracy..."""
NLL_TOLERANCE = 0.01
"""...and within this much of the best (lowest) final mean test negative log predictive density."""

ADAM_EVALUATIONS = 100
"""SVGP + Adam and SVGP + NatGrad + Adam are evaluated at about this many times, spaced evenly on a
log time axis."""

PG_EVALUATIONS_PER_PASS = 4
"""PolyaGammaSVGP is evaluated about this many times per pass over the training data (once every
N / (this · batch size) mini-batch steps, and at least once per step)."""

NATGRAD_GAMMA = 0.1
"""The natural-gradient step size of SVGP + NatGrad + Adam."""

Row = Dict[str, float]
Trace = List[Row]


def adam_method(learning_rate: float) -> str:
    """The name of SVGP + Adam at ``learning_rate``, e.g. ``"SVGP + Adam (lr 0.001)"``."""
    return f"{ADAM_NAME} (lr {learning_rate:g})"


def adam_learning_rate(method: str) -> Optional[float]:
    """The learning rate named by :func:`adam_method`'s ``method``; None for any other name."""
    prefix, suffix = f"{ADAM_NAME} (lr ", ")"
    if not (method.startswith(prefix) and method.endswith(suffix)):
        return None
    try:
        learning_rate = float(method[len(prefix) : -len(suffix)])
    except ValueError:
        return None
    return learning_rate if learning_rate > 0.0 else None


# --------------------------------------------------------------------------------------------------
# Timing and evaluation
# --------------------------------------------------------------------------------------------------


class _TrainingClock:
    """Wall-clock seconds since creation, less the time spent inside :meth:`paused` blocks."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._paused = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self._start - self._paused

    @contextmanager
    def paused(self) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - began


def _metrics_function(
    model: gpflow.models.GPModel,
    elbo: Callable[[], tf.Tensor],
    X_test: np.ndarray,
    Y_test: np.ndarray,
) -> Callable[[], Row]:
    """
    A function returning the model's current test accuracy, mean test NLL and ELBO.

    The tensor work is compiled once (a ``tf.function``), as evaluation runs hundreds of times.
    """
    X = tf.constant(X_test)
    Y = tf.constant(Y_test)
    is_positive = np.asarray(Y_test).ravel() > 0.5

    @tf.function(autograph=False)  # plain TensorFlow inside: nothing for AutoGraph to convert
    def evaluate() -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        mean, _ = model.predict_y(X)  # p(y* = 1 | x*, data)                        [T, 1]
        log_density = model.predict_log_density((X, Y))  # log p(y* | x*, data)  [T]
        return mean, log_density, elbo()

    def metrics() -> Row:
        mean, log_density, elbo_value = evaluate()
        predicted_positive = mean.numpy().ravel() > 0.5
        return {
            "test_accuracy": float(np.mean(predicted_positive == is_positive)),
            "test_nll": float(-np.mean(log_density.numpy())),
            "elbo": float(elbo_value.numpy()),
        }

    return metrics


def _progress_bar(enabled: bool, method: str, time_budget: float) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=round(time_budget, 1), desc=method, unit="s", leave=True)


def _advance(bar: Any, seconds: float) -> None:
    if bar is not None:
        bar.update(round(max(0.0, min(seconds, bar.total) - bar.n), 1))


# --------------------------------------------------------------------------------------------------
# Shared set-up
# --------------------------------------------------------------------------------------------------


def _make_kernel(D: int) -> gpflow.kernels.Kernel:
    """SE kernel, ARD lengthscales all √D, variance 1.0: the same start for every method."""
    return gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=np.full(D, np.sqrt(D)))


def _make_likelihood() -> gpflow.likelihoods.Likelihood:
    return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)


def _make_svgp(X: np.ndarray, Z: np.ndarray) -> gpflow.models.SVGP:
    model = gpflow.models.SVGP(
        _make_kernel(X.shape[1]),
        _make_likelihood(),
        inducing_variable=gpflow.inducing_variables.InducingPoints(Z.copy()),
        num_data=X.shape[0],
    )
    gpflow.set_trainable(model.inducing_variable, False)  # the same fixed Z for every method
    return model


# --------------------------------------------------------------------------------------------------
# The methods
# --------------------------------------------------------------------------------------------------


def _run_data_holding_model(
    model_name: str,
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    progress: bool,
) -> Trace:
    """
    VIJJ, VITaylor or KLCorrected (``model_name``), trained by :func:`gpflow_fastvi.fit` with its
    defaults.
    """
    import gpflow_fastvi

    X, _ = data
    model_class = getattr(gpflow_fastvi, model_name)
    model = model_class(
        data, _make_kernel(X.shape[1]), likelihood=_make_likelihood(), inducing_variable=Z.copy()
    )
    metrics = _metrics_function(model, model.elbo, *test)
    initial = {"iteration": 0, "time": 0.0, **metrics()}
    trace = gpflow_fastvi.fit(
        model, time_budget=time_budget, callback=lambda _: metrics(), progress=progress
    )
    return [initial] + [dict(row) for row in trace.rows]


def _pg_steps_per_iteration(N: int, batch_size: int) -> int:
    """Mini-batch steps between PolyaGammaSVGP evaluations: see :data:`PG_EVALUATIONS_PER_PASS`."""
    return max(1, N // (PG_EVALUATIONS_PER_PASS * batch_size))


def _run_polya_gamma(
    adam_lr: float,
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    batch_size: int,
    seed: int,
    progress: bool,
) -> Trace:
    from . import PolyaGammaSVGP, fit

    X, Y = data
    N = X.shape[0]
    model = PolyaGammaSVGP(
        _make_kernel(X.shape[1]),
        _make_likelihood(),
        gpflow.inducing_variables.InducingPoints(Z.copy()),
        num_data=N,
    )
    gpflow.set_trainable(model.inducing_variable, False)  # the same fixed Z for every method
    data_tensors = (tf.constant(X), tf.constant(Y))
    # SVGP's quadrature ELBO at this q(u), comparable with the baselines' (the model's own elbo is
    # the Pólya-Gamma bound, which lies below it).
    metrics = _metrics_function(model, lambda: gpflow.models.SVGP.elbo(model, data_tensors), *test)
    rows: Trace = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = _progress_bar(progress, PG_NAME, time_budget)

    # fit() keeps its own training time; this clock (paused likewise) only drives the progress bar.
    clock = _TrainingClock()

    def callback(_: Any) -> Row:
        elapsed = clock.elapsed()
        with clock.paused():
            row = metrics()
            _advance(bar, elapsed)
        return row

    trace = fit(
        model,
        data,
        batch_size=min(batch_size, N),
        learning_rate=adam_lr,
        steps_per_iteration=_pg_steps_per_iteration(N, batch_size),
        seed=seed,
        max_iter=10**9,  # run until the budget ends, as SVGP + Adam: the estimates are noisy,
        tol=0.0,  # so a change-of-objective test would stop it at random
        time_budget=time_budget,
        callback=callback,
    )
    if bar is not None:
        bar.close()
    return rows + [dict(row) for row in trace.rows]


def _run_svgp_scipy(
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    progress: bool,
) -> Trace:
    model = _make_svgp(data[0], Z)
    data_tensors = (tf.constant(data[0]), tf.constant(data[1]))
    metrics = _metrics_function(model, lambda: model.elbo(data_tensors), *test)
    rows: Trace = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = _progress_bar(progress, SCIPY_NAME, time_budget)

    clock = _TrainingClock()

    def step_callback(step: int, variables: Sequence[tf.Variable], values: Sequence[Any]) -> None:
        elapsed = clock.elapsed()
        with clock.paused():
            # Evaluate at the accepted iterate, not at the last point the line search tried.
            for variable, value in zip(variables, values):
                variable.assign(value)
            rows.append({"iteration": step + 1, "time": elapsed, **metrics()})
            _advance(bar, elapsed)
        if elapsed >= time_budget:
            raise StopIteration  # SciPy >= 1.11 ends the optimisation cleanly on this

    gpflow.optimizers.Scipy().minimize(
        model.training_loss_closure(data_tensors, compile=True),
        model.trainable_variables,
        method="L-BFGS-B",
        step_callback=step_callback,
        compile=True,
        options=dict(maxiter=10**7, maxfun=10**7),
    )
    if bar is not None:
        bar.close()
    return rows


StepFactory = Callable[
    [gpflow.models.SVGP, Iterator[Tuple[tf.Tensor, tf.Tensor]]], Callable[[], None]
]
"""Makes a mini-batch method's optimisation step from the model and an endless batch iterator."""


def _run_svgp_minibatch(
    method: str,
    make_step: StepFactory,
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    batch_size: int,
    seed: int,
    progress: bool,
) -> Trace:
    """
    Train an SVGP with ``make_step``'s step on shuffled mini-batches until the budget ends, and
    evaluate it about :data:`ADAM_EVALUATIONS` times, evenly spaced on a log time axis.
    """
    X, Y = data
    N = X.shape[0]
    model = _make_svgp(X, Z)
    data_tensors = (tf.constant(X), tf.constant(Y))
    metrics = _metrics_function(model, lambda: model.elbo(data_tensors), *test)
    rows: Trace = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = _progress_bar(progress, method, time_budget)

    clock = _TrainingClock()  # compilation of the first step counts as training time
    dataset = (
        tf.data.Dataset.from_tensor_slices(data_tensors)
        .shuffle(N, seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(min(batch_size, N))
        .prefetch(tf.data.AUTOTUNE)
    )
    optimisation_step = make_step(model, iter(dataset))

    step = 0
    next_checkpoint = 0
    checkpoints = np.empty(0)
    while True:
        try:
            optimisation_step()
        except tf.errors.InvalidArgumentError as error:
            # NaN parameters or a failed factorisation: the method diverged. Keep what it reached
            # and say where it failed, rather than losing every method's results.
            message = error.message
            reason = (
                "NaN in the parameters"
                if "NaN" in message
                else "a Cholesky factorisation failed" if "Cholesky" in message else message
            )
            reason = reason.strip().splitlines()[0]
            rows[-1]["failed"] = f"step {step + 1}, {clock.elapsed():.1f} s: {reason}"
            break
        step += 1
        elapsed = clock.elapsed()
        if step == 1:
            # Evaluate when the clock passes each of these times: from the end of the first step
            # (which includes compilation) to the budget, evenly spaced on a log time axis.
            checkpoints = np.geomspace(elapsed, max(elapsed, time_budget), ADAM_EVALUATIONS)
        finished = elapsed >= time_budget
        if finished or elapsed >= checkpoints[next_checkpoint]:
            with clock.paused():
                rows.append({"iteration": step, "time": elapsed, **metrics()})
                _advance(bar, elapsed)
            next_checkpoint = int(np.searchsorted(checkpoints, elapsed, side="right"))
            finished = finished or next_checkpoint == len(checkpoints)
        if finished:
            break
    if bar is not None:
        bar.close()
    return rows


def _adam_step(adam_lr: float) -> StepFactory:
    """SVGP + Adam: one Adam step on every trainable variable, q(u) included."""

    def make_step(
        model: gpflow.models.SVGP, batches: Iterator[Tuple[tf.Tensor, tf.Tensor]]
    ) -> Callable[[], None]:
        training_loss = model.training_loss_closure(batches, compile=True)
        optimizer = gpflow.keras.tf_keras.optimizers.Adam(adam_lr)

        @tf.function  # as a GPflow user writes it
        def optimisation_step() -> None:
            optimizer.minimize(training_loss, model.trainable_variables)

        return optimisation_step

    return make_step


def _natgrad_adam_step(adam_lr: float) -> StepFactory:
    """
    SVGP + NatGrad + Adam: a natural-gradient step on (q_mu, q_sqrt), which are taken out of the
    trainable variables, then an Adam step on the rest (the hyperparameters), on the same batch.
    """

    def make_step(
        model: gpflow.models.SVGP, batches: Iterator[Tuple[tf.Tensor, tf.Tensor]]
    ) -> Callable[[], None]:
        gpflow.set_trainable(model.q_mu, False)
        gpflow.set_trainable(model.q_sqrt, False)
        natgrad = gpflow.optimizers.NaturalGradient(gamma=NATGRAD_GAMMA)
        adam = gpflow.keras.tf_keras.optimizers.Adam(adam_lr)

        @tf.function  # as in GPflow's natural-gradient notebook, with one batch for both steps
        def optimisation_step() -> None:
            batch = next(batches)

            def training_loss() -> tf.Tensor:
                return model.training_loss(batch)

            natgrad.minimize(training_loss, [(model.q_mu, model.q_sqrt)])
            adam.minimize(training_loss, model.trainable_variables)

        return optimisation_step

    return make_step


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays (say, from a callback) turned into Python ones."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    return value


def _format_seconds(seconds: Optional[float]) -> str:
    return "not reached" if seconds is None else f"{seconds:.2f}"


def _format_ratio(ratio: Optional[float]) -> str:
    if ratio is None:
        return "n/a (a method did not reach the target)"
    if ratio <= 0.0:
        return f"{ratio:.3g}"
    return f"{ratio:.3g} ({1.0 / ratio:.3g}x {'faster' if ratio <= 1.0 else 'slower'})"


_ELBO_NOTES = {
    VIJJ_NAME: f"{VIJJ_NAME}: model.elbo(), above its own Jaakkola-Jordan bound",
    VITAYLOR_NAME: f"{VITAYLOR_NAME}: model.elbo(); its own objective is an approximation",
    PG_NAME: f"{PG_NAME}: gpflow.models.SVGP.elbo, above its own Polya-Gamma bound",
    KLC_NAME: f"{KLC_NAME}: model.elbo(), of its predictive",
}

_STYLES = {  # a fixed look per method, so that a method looks the same in every figure
    VIJJ_NAME: ("C0", "-"),
    VITAYLOR_NAME: ("C4", "-"),
    KLC_NAME: ("C6", "-"),
    PG_NAME: ("C3", "-"),
    SCIPY_NAME: ("C1", "--"),
    ADAM_NAME: ("C2", ":"),
    NATGRAD_NAME: ("C5", "-."),
}


def _line_style(method: str, index: int) -> Dict[str, Any]:
    """Matplotlib keywords for ``method``'s line; ``index`` (its place) picks one for other names."""
    default = (f"C{(len(_STYLES) + index) % 10}", ("-", "--", "-.", ":")[index % 4])
    if method not in _STYLES and adam_learning_rate(method) is not None:
        default = (default[0], _STYLES[ADAM_NAME][1])  # SVGP + Adam at another rate: Adam's line
    color, linestyle = _STYLES.get(method, default)
    return {"color": color, "linestyle": linestyle, "label": method}


def matplotlib_figure() -> Any:
    """matplotlib's :class:`~matplotlib.figure.Figure`, or an ImportError saying how to get it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            f"Plotting needs matplotlib, which comes with the [bench] extra: {BENCH_INSTALL_HINT}"
        ) from error
    return Figure


def draw_traces(
    accuracy_axes: Any,
    nll_axes: Any,
    traces: Dict[str, Trace],
    targets: Optional[Tuple[float, float]] = None,
) -> None:
    """
    Draw test accuracy and test NLL against training wall-clock time (log axis) on two matplotlib
    axes, one line per method in its fixed style, and ``(accuracy, nll)`` targets as thin grey
    dashed lines.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for index, (method, rows) in enumerate(traces.items()):
        style = _line_style(method, index)
        shown = [row for row in rows if row["time"] > 0.0]  # t = 0 has no place on a log axis
        times = [row["time"] for row in shown]
        if len(shown) == 1:
            style["marker"] = "o"  # one point draws no line
        accuracy_axes.plot(times, [row["test_accuracy"] for row in shown], **style)
        nll_axes.plot(times, [row["test_nll"] for row in shown], **style)
    if targets is not None:
        accuracy_target, nll_target = targets
        accuracy_axes.axhline(accuracy_target, color="grey", linestyle="--", linewidth=0.8)
        nll_axes.axhline(nll_target, color="grey", linestyle="--", linewidth=0.8, label="target")
    for axes, label in ((accuracy_axes, "test accuracy"), (nll_axes, "test NLL")):
        axes.set_xscale("log")
        axes.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _: f"{seconds:g}"))
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.set_xlabel("training wall-clock time [s]")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)


@dataclass
class ComparisonResult:
    """
    The traces of a comparison, and the summaries drawn from them.

    :param traces: one list of rows per method (see the module docstring), in time order.
    :param settings: the set-up: data sizes, budget, optimiser settings, versions.
    """

    traces: Dict[str, Trace]
    settings: Dict[str, Any] = field(default_factory=dict)

    def final(self, method: str) -> Row:
        """The last row of ``method``'s trace: its state when its budget ran out or it converged."""
        return self.traces[method][-1]

    def total_time(self, method: str) -> float:
        """Training seconds ``method`` used (evaluations excluded)."""
        return float(self.final(method)["time"])

    @property
    def targets(self) -> Tuple[float, float]:
        """
        The target both accuracy and NLL must reach: ``(accuracy, nll)``, where accuracy is the best
        final test accuracy over methods less :data:`ACCURACY_TOLERANCE` and NLL is the best final
        test NLL over methods plus :data:`NLL_TOLERANCE`.
        """
        finals = [self.final(method) for method in self.traces]
        # A method that ended at a NaN or infinite NLL (a diverged baseline) sets no target.
        finals = [row for row in finals if np.isfinite(row["test_nll"])] or finals
        best_accuracy = max(row["test_accuracy"] for row in finals)
        best_nll = min(row["test_nll"] for row in finals)
        return best_accuracy - ACCURACY_TOLERANCE, best_nll + NLL_TOLERANCE

    def time_to_target(self, method: str) -> Optional[float]:
        """
        The first time in ``method``'s trace at which it is on target in accuracy and NLL at once
        (see :attr:`targets`); None if it never is.
        """
        accuracy_target, nll_target = self.targets
        slack = 1e-12  # so that a method whose final row defines a target reaches it
        for row in self.traces[method]:
            if (
                row["test_accuracy"] >= accuracy_target - slack
                and row["test_nll"] <= nll_target + slack
            ):
                return float(row["time"])
        return None

    def time_ratios(self, method: str = VIJJ_NAME) -> Dict[str, Optional[float]]:
        """
        ``method``'s time to target divided by each other method's; None where either did not reach
        the target. Below 1 means ``method`` got there first.
        """
        own = self.time_to_target(method)
        ratios: Dict[str, Optional[float]] = {}
        for other in self.traces:
            if other == method:
                continue
            theirs = self.time_to_target(other)
            ratios[other] = None if own is None or not theirs else own / theirs
        return ratios

    def fast_against_baselines(self) -> Dict[Tuple[str, str], Optional[float]]:
        """
        The time-to-target ratio of every fast method (:data:`FAST_METHODS`) in the traces against
        every baseline (a name starting with :data:`BASELINE_PREFIX`) in them, keyed by
        ``(fast, baseline)`` in trace order; see :meth:`time_ratios`.
        """
        baselines = [method for method in self.traces if method.startswith(BASELINE_PREFIX)]
        return {
            (fast, baseline): self.time_ratios(fast)[baseline]
            for fast in self.traces
            if fast in FAST_METHODS
            for baseline in baselines
        }

    def format_table(self, markdown: bool = False) -> str:
        """
        One line per method: final test accuracy, final test NLL, final ELBO, total training time,
        time to target; then the target itself, the time ratios of the fast methods against the
        baselines (see :meth:`fast_against_baselines`) and what the ELBO column holds.

        :param markdown: a Markdown table instead of aligned plain text.
        """
        header = ["Method", "Test acc", "Test NLL", "ELBO", "Time [s]", "Time to target [s]"]
        lines = [header]
        for method in self.traces:
            row = self.final(method)
            lines.append(
                [
                    method,
                    f"{row['test_accuracy']:.4f}",
                    f"{row['test_nll']:.4f}",
                    f"{row['elbo']:.2f}",
                    f"{self.total_time(method):.2f}" + (" (failed)" if "failed" in row else ""),
                    _format_seconds(self.time_to_target(method)),
                ]
            )
        if markdown:
            text = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * 5) + "|"]
            text += ["| " + " | ".join(line) + " |" for line in lines[1:]]
        else:
            widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

            def join(line: List[str]) -> str:
                cells = [line[0].ljust(widths[0])]
                cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:])]
                return "  ".join(cells)

            text = [join(header), "  ".join("-" * width for width in widths)]
            text += [join(line) for line in lines[1:]]
        accuracy_target, nll_target = self.targets
        notes = [
            "",
            f"Target: test accuracy >= {accuracy_target:.4f} and test NLL <= {nll_target:.4f} "
            f"(best final accuracy - {ACCURACY_TOLERANCE}, best final NLL + {NLL_TOLERANCE}).",
        ]
        notes += [
            f"{method} failed at {self.final(method)['failed']}; its last evaluation is reported."
            for method in self.traces
            if "failed" in self.final(method)
        ]
        for (fast, baseline), ratio in self.fast_against_baselines().items():
            notes.append(f"Time to target, {fast} / {baseline}: {_format_ratio(ratio)}")
        elbo_notes = [note for method, note in _ELBO_NOTES.items() if method in self.traces]
        notes.append(
            "ELBO: the standard SVGP ELBO at each model's q(u)"
            + (f" ({'; '.join(elbo_notes)})." if elbo_notes else ".")
        )
        if markdown:
            notes = [note if not note else note + "  " for note in notes]
        return "\n".join(text + notes)

    def __str__(self) -> str:
        return self.format_table()

    def to_dict(self) -> Dict[str, Any]:
        """
        A JSON-ready dict: settings, targets, the time ratios of the fast methods against the
        baselines (keyed ``"fast / baseline"``), and per method its rows and summaries.
        """
        accuracy_target, nll_target = self.targets
        return _plain(
            {
                "settings": self.settings,
                "targets": {"test_accuracy": accuracy_target, "test_nll": nll_target},
                "time_ratios": {
                    f"{fast} / {baseline}": ratio
                    for (fast, baseline), ratio in self.fast_against_baselines().items()
                },
                "methods": {
                    method: {
                        "final": self.final(method),
                        "total_time": self.total_time(method),
                        "time_to_target": self.time_to_target(method),
                        "rows": rows,
                    }
                    for method, rows in self.traces.items()
                },
            }
        )

    def save_json(self, path: PathLike) -> None:
        """Write :meth:`to_dict` to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    def plot(self, path: PathLike, *, title: Optional[str] = None) -> None:
        """
        Draw test accuracy and test NLL against training wall-clock time (log axis), one line per
        method (fast methods solid, baselines in other line styles, each method its own colour),
        the target as a thin grey dashed line, and save the figure to ``path`` (PNG by its name).

        :raises ImportError: if matplotlib (the ``[bench]`` extra) is not installed.
        """
        Figure = matplotlib_figure()
        figure = Figure(figsize=(11.0, 4.2), layout="constrained")
        accuracy_axes, nll_axes = figure.subplots(1, 2)
        draw_traces(accuracy_axes, nll_axes, self.traces, self.targets)
        nll_axes.legend()
        if title:
            figure.suptitle(title)
        figure.savefig(path, dpi=120)

    def save(self, out_dir: PathLike, *, title: Optional[str] = None) -> Tuple[str, str]:
        """
        Write ``comparison.png`` (see :meth:`plot`) and ``comparison.json`` (see :meth:`save_json`)
        into ``out_dir``, creating it if needed.

        :return: the paths of the PNG and the JSON file.
        """
        os.makedirs(out_dir, exist_ok=True)
        png_path = os.path.join(out_dir, "comparison.png")
        json_path = os.path.join(out_dir, "comparison.json")
        self.save_json(json_path)
        self.plot(png_path, title=title)
        return png_path, json_path


# --------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------


def _adam_runner(
    method: str, learning_rate: float, minibatch: Tuple[Any, ...]
) -> Callable[[], Trace]:
    """SVGP + Adam at ``learning_rate``, run under the name ``method``."""
    return lambda: _run_svgp_minibatch(method, _adam_step(learning_rate), *minibatch)


def _check_inputs(
    X_train: np.ndarray, Y_train: np.ndarray, X_test: np.ndarray, Y_test: np.ndarray
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    arrays = [np.asarray(a, dtype=np.float64) for a in (X_train, Y_train, X_test, Y_test)]
    X_train, Y_train, X_test, Y_test = arrays
    for name, X, Y in (("train", X_train, Y_train), ("test", X_test, Y_test)):
        if X.ndim != 2 or Y.ndim != 2 or Y.shape[1] != 1 or X.shape[0] != Y.shape[0]:
            raise ValueError(
                f"{name} data must be X [N, D] and Y [N, 1]; got X {X.shape} and Y {Y.shape}"
            )
        if X.shape[0] == 0:
            raise ValueError(f"the {name} data are empty")
        if not np.all((Y == 0.0) | (Y == 1.0)):
            raise ValueError(f"{name} labels must be 0 or 1 (see gpflow_fastvi.datasets)")
    if X_train.shape[1] != X_test.shape[1]:
        raise ValueError(
            f"X_train has {X_train.shape[1]} features but X_test has {X_test.shape[1]}"
        )
    return X_train, Y_train, X_test, Y_test


WARM_UP_BUDGET = 0.2
"""Seconds each method trains on a tiny slice of the data before any clock starts."""


def _warm_up(
    runners: Callable[..., Dict[str, Callable[[], Trace]]], methods: Sequence[str]
) -> None:
    """
    Pay the process's one-off costs before any clock starts, so that they are not charged to
    whichever method happens to run first: TensorFlow's start-up (kernel registration, thread
    pools) and the first use of each code path (GPflow's conditionals, Keras optimisers, SciPy).
    Each method is run for :data:`WARM_UP_BUDGET` seconds on a slice of 64 training points and 8
    inducing inputs; the results are discarded. Every method builds its own models and compiles
    its own functions again in the timed run, as a user's fresh model would.
    """
    tiny = runners(rows=64, inducing=8, time_budget=WARM_UP_BUDGET)
    for method in methods:
        tiny[method]()


def _check_methods(methods: Sequence[str]) -> Tuple[str, ...]:
    """``methods`` as a tuple without repeats; a ValueError names any unknown one."""
    if isinstance(methods, str):
        methods = [methods]
    unknown = [
        method
        for method in methods
        if method not in ALL_METHODS and adam_learning_rate(method) is None
    ]
    if unknown:
        raise ValueError(
            f"unknown method(s) {', '.join(map(repr, unknown))}; the methods are "
            f"{', '.join(map(repr, ALL_METHODS))}, or {adam_method(0.1)!r} for another Adam rate"
        )
    if not methods:
        raise ValueError(f"methods is empty; choose from {', '.join(map(repr, ALL_METHODS))}")
    return tuple(dict.fromkeys(methods))


def run_comparison(
    X_train: np.ndarray,
    Y_train: np.ndarray,
    X_test: np.ndarray,
    Y_test: np.ndarray,
    *,
    methods: Sequence[str] = DEFAULT_METHODS,
    num_inducing: int = 50,
    time_budget: float = 60.0,
    adam_lr: float = 0.01,
    batch_size: int = 100,
    seed: int = 0,
    progress: bool = False,
    on_method_done: Optional[Callable[[str, Trace], None]] = None,
) -> ComparisonResult:
    """
    Train each of ``methods`` on the same data from the same start, each for ``time_budget``
    seconds of training, and trace their test accuracy, test NLL and ELBO.

    A method may stop before its budget when its optimiser converges (VIJJ, VITaylor and
    SVGP + Scipy); the stochastic ones run until the budget ends. Methods run one after the other,
    in the order given, on the same machine; run nothing else heavy meanwhile, as the times are
    wall-clock.

    :param X_train: training inputs [N, D], preferably standardised (the lengthscales start at 1).
    :param Y_train: training labels [N, 1] in {0, 1}.
    :param X_test: test inputs [T, D].
    :param Y_test: test labels [T, 1] in {0, 1}.
    :param methods: names from :data:`ALL_METHODS` (default :data:`DEFAULT_METHODS`: VIJJ,
        SVGP + Scipy and SVGP + Adam); repeats are dropped.
    :param num_inducing: M, the number of inducing inputs, placed by k-means on ``X_train`` and
        kept fixed.
    :param time_budget: training seconds per method (graph compilation included, evaluation not).
    :param adam_lr: Adam's learning rate: SVGP + Adam, and the hyperparameter steps of
        SVGP + NatGrad + Adam and PolyaGammaSVGP.
    :param batch_size: mini-batch size of SVGP + Adam, SVGP + NatGrad + Adam and PolyaGammaSVGP.
    :param seed: seeds k-means, TensorFlow and the mini-batch order.
    :param progress: show a progress bar per method.
    :param on_method_done: called as ``on_method_done(method, trace)`` as soon as each method has
        run, so that a caller can save what has finished.
    :raises ValueError: for an unknown method name, or bad data or settings.
    """
    methods = _check_methods(methods)
    X_train, Y_train, X_test, Y_test = _check_inputs(X_train, Y_train, X_test, Y_test)
    N, D = X_train.shape
    if not 0 < num_inducing <= N:
        raise ValueError(f"num_inducing must be between 1 and N = {N}; got {num_inducing}")
    if not time_budget > 0.0:
        raise ValueError(f"time_budget must be positive; got {time_budget}")
    if not adam_lr > 0.0:
        raise ValueError(f"adam_lr must be positive; got {adam_lr}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")

    from . import kmeans_inducing_points

    Z_all = kmeans_inducing_points(X_train, num_inducing, seed=seed)
    traces: Dict[str, Trace] = {}

    def runners(
        rows: Optional[int] = None, inducing: Optional[int] = None, time_budget: float = time_budget
    ) -> Dict[str, Callable[[], Trace]]:
        data = (X_train[:rows], Y_train[:rows])
        test = (X_test[:rows], Y_test[:rows])
        Z = Z_all[:inducing]
        show = progress and rows is None  # no progress bars for the warm-up
        minibatch = (data, test, Z, time_budget, batch_size, seed, show)
        return {
            VIJJ_NAME: lambda: _run_data_holding_model("VIJJ", data, test, Z, time_budget, show),
            VITAYLOR_NAME: lambda: _run_data_holding_model(
                "VITaylor", data, test, Z, time_budget, show
            ),
            KLC_NAME: lambda: _run_data_holding_model(
                "KLCorrected", data, test, Z, time_budget, show
            ),
            PG_NAME: lambda: _run_polya_gamma(adam_lr, *minibatch),
            SCIPY_NAME: lambda: _run_svgp_scipy(data, test, Z, time_budget, show),
            ADAM_NAME: lambda: _run_svgp_minibatch(ADAM_NAME, _adam_step(adam_lr), *minibatch),
            NATGRAD_NAME: lambda: _run_svgp_minibatch(
                NATGRAD_NAME, _natgrad_adam_step(adam_lr), *minibatch
            ),
            **{
                method: _adam_runner(method, adam_learning_rate(method), minibatch)
                for method in methods
                if adam_learning_rate(method) is not None
            },
        }

    _warm_up(runners, methods)
    timed = runners()
    for method in methods:
        tf.random.set_seed(seed)
        traces[method] = timed[method]()
        if on_method_done is not None:
            on_method_done(method, traces[method])
    settings = {
        "n_train": N,
        "n_test": X_test.shape[0],
        "d": D,
        "num_inducing": num_inducing,
        "time_budget": time_budget,
        "adam_lr": adam_lr,
        "batch_size": batch_size,
        "adam_evaluations": ADAM_EVALUATIONS,
        "methods": list(methods),
        "seed": seed,
        **({"natgrad_gamma": NATGRAD_GAMMA} if NATGRAD_NAME in methods else {}),
        **(
            {"pg_steps_per_iteration": _pg_steps_per_iteration(N, min(batch_size, N))}
            if PG_NAME in methods
            else {}
        ),
        "kernel": "SquaredExponential, ARD, lengthscales sqrt(D), variance 1.0",
        "likelihood": "Bernoulli(invlink=tf.sigmoid)",
        "inducing_points": "k-means on X_train, fixed",
        "check_shapes": get_enable_check_shapes().value,
        "gpflow": gpflow.__version__,
        "tensorflow": tf.__version__,
        "devices": [device.name for device in tf.config.list_logical_devices()],
    }
    return ComparisonResult(traces=traces, settings=settings)


__all__ = [
    "ACCURACY_TOLERANCE",
    "ADAM_EVALUATIONS",
    "ADAM_NAME",
    "KLC_NAME",
    "adam_learning_rate",
    "adam_method",
    "draw_traces",
    "matplotlib_figure",
    "ALL_METHODS",
    "BASELINE_PREFIX",
    "ComparisonResult",
    "DEFAULT_METHODS",
    "FAST_METHODS",
    "METHODS",
    "NATGRAD_GAMMA",
    "NATGRAD_NAME",
    "NLL_TOLERANCE",
    "PG_EVALUATIONS_PER_PASS",
    "PG_NAME",
    "SCIPY_NAME",
    "VITAYLOR_NAME",
    "VIJJ_NAME",
    "run_comparison",
]
