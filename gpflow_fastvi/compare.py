"""
The ``compare`` job: :class:`~gpflow_fastvi.VIJJ` against GPflow's SVGP, on one data set, for the
same wall-clock budget.

Three methods start from the same point and are timed the same way:

* ``"VIJJ"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.VIJJ` (closed-form sites and q(u),
  L-BFGS on the collapsed bound in the hyperparameters);
* ``"SVGP + Scipy"``: :class:`gpflow.models.SVGP` trained full-batch by
  :class:`gpflow.optimizers.Scipy` (L-BFGS-B over q(u) and the hyperparameters);
* ``"SVGP + Adam"``: the same SVGP trained by mini-batch Adam (stochastic variational inference).

Shared set-up: a :class:`~gpflow.kernels.SquaredExponential` kernel with one lengthscale per input
dimension, all initialised at 1.0 (the data are expected standardised), variance 1.0; the same fixed
(not trained) k-means inducing inputs; the logit link, ``Bernoulli(invlink=tf.sigmoid)``.

Each method's trace is a list of rows, ``{"iteration", "time", "test_accuracy", "test_nll",
"elbo"}``, starting with the untrained model at time 0. ``time`` is training wall-clock seconds
since the method started, graph compilation included and the evaluations themselves excluded (the
clock is paused while a row is computed). The ELBO is on the full training data: SVGP's own ELBO
for the SVGP methods, :meth:`VIJJ.elbo` for VIJJ: the same SVGP ELBO at VIJJ's q(u), which lies
above the Jaakkola–Jordan bound VIJJ optimises.

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
SCIPY_NAME = "SVGP + Scipy"
ADAM_NAME = "SVGP + Adam"
METHODS: Tuple[str, ...] = (VIJJ_NAME, SCIPY_NAME, ADAM_NAME)
"""The compared methods, in the order they are run and reported."""

ACCURACY_TOLERANCE = 0.005
"""Time to target: within this much (half an accuracy point) of the best final test accuracy..."""
NLL_TOLERANCE = 0.01
"""...and within this much of the best (lowest) final mean test negative log predictive density."""

ADAM_EVALUATIONS = 100
"""SVGP + Adam is evaluated at about this many times, spaced evenly on a log time axis."""

Row = Dict[str, float]
Trace = List[Row]


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
    """SE kernel, ARD lengthscales all 1.0, variance 1.0: the same start for every method."""
    return gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=np.ones(D))


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
# The three methods
# --------------------------------------------------------------------------------------------------


def _run_vijj(
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    progress: bool,
) -> Trace:
    from . import VIJJ, fit

    X, Y = data
    model = VIJJ(data, _make_kernel(X.shape[1]), Z.copy(), likelihood=_make_likelihood())
    metrics = _metrics_function(model, model.elbo, *test)
    initial = {"iteration": 0, "time": 0.0, **metrics()}
    trace = fit(model, time_budget=time_budget, callback=lambda _: metrics(), progress=progress)
    return [initial] + [dict(row) for row in trace.rows]


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


def _run_svgp_adam(
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    adam_lr: float,
    batch_size: int,
    seed: int,
    progress: bool,
) -> Trace:
    X, Y = data
    N = X.shape[0]
    model = _make_svgp(X, Z)
    data_tensors = (tf.constant(X), tf.constant(Y))
    metrics = _metrics_function(model, lambda: model.elbo(data_tensors), *test)
    rows: Trace = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = _progress_bar(progress, ADAM_NAME, time_budget)

    clock = _TrainingClock()  # compilation of the first step counts as training time
    dataset = (
        tf.data.Dataset.from_tensor_slices(data_tensors)
        .shuffle(N, seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(min(batch_size, N))
        .prefetch(tf.data.AUTOTUNE)
    )
    training_loss = model.training_loss_closure(iter(dataset), compile=True)
    optimizer = gpflow.keras.tf_keras.optimizers.Adam(adam_lr)

    @tf.function  # as a GPflow user writes it
    def optimisation_step() -> None:
        optimizer.minimize(training_loss, model.trainable_variables)

    step = 0
    next_checkpoint = 0
    checkpoints = np.empty(0)
    while True:
        optimisation_step()
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

    def format_table(self, markdown: bool = False) -> str:
        """
        One line per method: final test accuracy, final test NLL, final ELBO, total training time,
        time to target; then the target itself and the VIJJ time ratios.

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
                    f"{self.total_time(method):.2f}",
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
        if VIJJ_NAME in self.traces:
            for other, ratio in self.time_ratios(VIJJ_NAME).items():
                notes.append(f"Time to target, {VIJJ_NAME} / {other}: {_format_ratio(ratio)}")
            notes.append(
                "ELBO: the standard SVGP ELBO at each model's q(u) (for VIJJ, model.elbo(), which "
                "lies above its own Jaakkola-Jordan bound)."
            )
        if markdown:
            notes = [note if not note else note + "  " for note in notes]
        return "\n".join(text + notes)

    def __str__(self) -> str:
        return self.format_table()

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict: settings, targets, and per method its rows and summaries."""
        accuracy_target, nll_target = self.targets
        return _plain(
            {
                "settings": self.settings,
                "targets": {"test_accuracy": accuracy_target, "test_nll": nll_target},
                "time_ratios": {
                    f"{VIJJ_NAME} / {other}": ratio
                    for other, ratio in (
                        self.time_ratios() if VIJJ_NAME in self.traces else {}
                    ).items()
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
        method, the target as a dashed line, and save the figure to ``path`` (PNG by its name).

        :raises ImportError: if matplotlib (the ``[bench]`` extra) is not installed.
        """
        try:
            from matplotlib.figure import Figure
            from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
        except ImportError as error:
            raise ImportError(
                f"Plotting the comparison needs matplotlib, which comes with the [bench] extra: "
                f"{BENCH_INSTALL_HINT}"
            ) from error

        figure = Figure(figsize=(11.0, 4.2), layout="constrained")
        accuracy_axes, nll_axes = figure.subplots(1, 2)
        for method, rows in self.traces.items():
            shown = [row for row in rows if row["time"] > 0.0]  # t = 0 has no place on a log axis
            times = [row["time"] for row in shown]
            accuracy_axes.plot(times, [row["test_accuracy"] for row in shown], label=method)
            nll_axes.plot(times, [row["test_nll"] for row in shown], label=method)
        accuracy_target, nll_target = self.targets
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


def _warm_up(data: Tuple[np.ndarray, np.ndarray]) -> None:
    """
    Pay TensorFlow's one-off start-up costs (kernel registration, the first graph, thread pools)
    before any clock starts, so that they are not charged to whichever method happens to run first.
    """
    X = tf.constant(data[0][:8])
    kernel = _make_kernel(X.shape[1])

    @tf.function(autograph=False)  # plain TensorFlow inside: nothing for AutoGraph to convert
    def first_graph() -> tf.Tensor:
        with tf.GradientTape() as tape:
            L = tf.linalg.cholesky(kernel(X) + tf.eye(X.shape[0], dtype=X.dtype))
            value = tf.reduce_sum(tf.linalg.triangular_solve(L, X))
        return tape.gradient(value, kernel.trainable_variables)

    first_graph()


def run_comparison(
    X_train: np.ndarray,
    Y_train: np.ndarray,
    X_test: np.ndarray,
    Y_test: np.ndarray,
    *,
    num_inducing: int = 50,
    time_budget: float = 60.0,
    adam_lr: float = 0.01,
    batch_size: int = 100,
    seed: int = 0,
    progress: bool = False,
) -> ComparisonResult:
    """
    Train VIJJ, SVGP + Scipy and SVGP + Adam on the same data from the same start, each for
    ``time_budget`` seconds of training, and trace their test accuracy, test NLL and ELBO.

    A method may stop before its budget when its optimiser converges. Methods run one after the
    other on the same machine; run nothing else heavy meanwhile, as the times are wall-clock.

    :param X_train: training inputs [N, D], preferably standardised (the lengthscales start at 1).
    :param Y_train: training labels [N, 1] in {0, 1}.
    :param X_test: test inputs [T, D].
    :param Y_test: test labels [T, 1] in {0, 1}.
    :param num_inducing: M, the number of inducing inputs, placed by k-means on ``X_train`` and
        kept fixed.
    :param time_budget: training seconds per method (graph compilation included, evaluation not).
    :param adam_lr: Adam's learning rate (SVGP + Adam only).
    :param batch_size: mini-batch size (SVGP + Adam only).
    :param seed: seeds k-means, TensorFlow and the mini-batch order.
    :param progress: show a progress bar per method.
    """
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

    Z = kmeans_inducing_points(X_train, num_inducing, seed=seed)
    data = (X_train, Y_train)
    test = (X_test, Y_test)
    traces: Dict[str, Trace] = {}
    _warm_up(data)
    tf.random.set_seed(seed)
    traces[VIJJ_NAME] = _run_vijj(data, test, Z, time_budget, progress)
    tf.random.set_seed(seed)
    traces[SCIPY_NAME] = _run_svgp_scipy(data, test, Z, time_budget, progress)
    tf.random.set_seed(seed)
    traces[ADAM_NAME] = _run_svgp_adam(
        data, test, Z, time_budget, adam_lr, batch_size, seed, progress
    )
    settings = {
        "n_train": N,
        "n_test": X_test.shape[0],
        "d": D,
        "num_inducing": num_inducing,
        "time_budget": time_budget,
        "adam_lr": adam_lr,
        "batch_size": batch_size,
        "adam_evaluations": ADAM_EVALUATIONS,
        "seed": seed,
        "kernel": "SquaredExponential, ARD, lengthscales 1.0, variance 1.0",
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
    "ADAM_NAME",
    "ComparisonResult",
    "METHODS",
    "NLL_TOLERANCE",
    "SCIPY_NAME",
    "VIJJ_NAME",
    "run_comparison",
]
