"""
:func:`run_plan`: the loop around a training plan, the same for every model — the outer
iterations timed and recorded in a :class:`Trace`, the stop (the objective stops changing, an
iteration cap, a time budget, a held-out set that stops improving), and the model put back to
its last good state when an iteration fails or is interrupted.
"""

import copy
import sys
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional

import numpy as np
import tensorflow as tf
from tqdm import TqdmWarning
from tqdm.auto import tqdm

from ..exceptions import (
    ApproximationWarning,
    CholeskyError,
    DivergenceWarning,
    InvalidCallbackError,
    InvalidDataError,
    NotConvergedWarning,
    graph_fault,
)
from ..gaussian.cholesky import cholesky_hint
from ..validation import (
    check_data,
    check_input_columns,
    non_negative_float,
    positive_int,
    targets_for_likelihood,
)
from .plans import TrainingPlan
from .snapshot import Snapshot
from .watch import Watch

Callback = Callable[[Any], Optional[Mapping[str, Any]]]
"""Called with the model after each outer iteration; may return a mapping of extra row entries."""


@dataclass(repr=False)
class Trace:
    """What :func:`fit` did: one row per outer iteration, and why it stopped."""

    method: str
    """The training algorithm that ran, e.g. ``"persistent"`` or ``"analytic"`` (vi-JJ)."""
    rows: List[Dict[str, Any]] = field(default_factory=list)
    """One dict per outer iteration: ``iteration``, ``time`` (seconds since the start, callback time
    excluded, graph compilation included), ``objective`` (the model's own objective after the
    iteration) and whatever the callback returned."""
    stop_reason: str = ""
    """``"converged"``, ``"max_iter"``, ``"time_budget"``, ``"validation"`` (the held-out NLL of
    ``fit(validation=...)`` stopped improving), ``"diverged"`` (the run reached an impossible
    objective or its SVGP ELBO collapsed, :mod:`~gpflow_fastvi.training.watch`; ``fit`` warned),
    ``"approximation"`` (the SVGP ELBO stayed down while the model's own objective, an
    approximation of it, rose; ``fit`` warned),
    or the optimiser's own message when it stopped for another reason (e.g.
    ``"L-BFGS-B: ..."``), or ``"interrupted"`` (Ctrl-C: the model is at the last iteration in
    ``rows``)."""
    returned_iteration: Optional[int] = None
    """The iteration (``rows[k]["iteration"]``) whose state ``fit`` left the model at: the last
    row's unless the run diverged, the yardstick of a model whose objective is not a bound
    (VITaylor) was higher at an earlier iteration, or a validation stop chose another."""

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"

    def __repr__(self) -> str:
        """One line, however many rows: the route, the rows, why it stopped and where it ended."""
        end = ""
        if self.rows:
            last = self.rows[-1]
            end = f", objective {last['objective']:.6g} after {last['time']:.3g} s"
        return (
            f"Trace(method={self.method!r}, {len(self.rows)} rows, "
            f"stop_reason={self.stop_reason!r}{end})"
        )

    def __len__(self) -> int:
        """The number of rows (outer iterations)."""
        return len(self.rows)

    def __getitem__(self, index: int) -> Dict[str, Any]:
        """One row, as ``trace.rows[index]``: ``trace[-1]["objective"]`` is where it ended."""
        return self.rows[index]

    def column(self, key: str) -> np.ndarray:
        """The values of one key across rows, as an array (NaN where a row lacks it)."""
        return np.array([row.get(key, np.nan) for row in self.rows], dtype=float)


class ValidationStop:
    """
    The validation-based stop of :func:`fit`: the held-out mean negative log predictive density
    after each outer iteration, a copy of the model's variables at the best one so far, and the
    count of iterations since it.
    """

    def __init__(self, model: Any, data: Any, patience: int):
        X, Y = check_data(data, getattr(model, "_target_columns", 1))
        Y = targets_for_likelihood(model.likelihood, Y)
        check_input_columns(X, model.inducing_variable, "validation inputs")
        X_held_out, Y_held_out = tf.constant(X), tf.constant(Y)
        self.model = model
        self.patience = patience
        self._nll = tf.function(
            lambda: -tf.reduce_mean(model.predict_log_density((X_held_out, Y_held_out))),
            autograph=False,
        )
        self.best = np.inf
        self.since_best = 0
        self.iterations = 0
        self.best_iteration = 0
        self._best_values: Optional[List[np.ndarray]] = None

    def __call__(self) -> float:
        """Record the current iteration; return its validation NLL."""
        nll = float(self._nll())
        self.iterations += 1
        if nll < self.best:
            self.best, self.since_best = nll, 0
            self.best_iteration = self.iterations
            self._best_values = [v.numpy() for v in self.model.variables]
        else:
            self.since_best += 1
        return nll

    @property
    def exhausted(self) -> bool:
        """Whether ``patience`` iterations in a row have not improved on the best."""
        return self.since_best >= self.patience

    def restore_best(self) -> bool:
        """Put every variable of the model back to its value at the best iteration; return
        whether that moved it."""
        if self._best_values is None or self.since_best == 0:
            return False
        for variable, value in zip(self.model.variables, self._best_values):
            variable.assign(value)
        return True


def run_plan(
    plan: TrainingPlan,
    model: Any,
    *,
    method: str,
    max_iter: Optional[int] = None,
    tol: Optional[float] = None,
    time_budget: Optional[float] = None,
    callback: Optional[Callback] = None,
    progress: bool = False,
    validation: Optional[ValidationStop] = None,
    watch: Optional[Watch] = None,
    points: Optional[int] = None,
) -> Trace:
    """
    Run ``plan``'s outer iterations as :func:`~gpflow_fastvi.fit` describes and record them in a
    :class:`Trace` named ``method``; the arguments are ``fit``'s, ``None`` taking the plan's
    defaults. With a ``watch`` the model ends at the best iterate it passed through, and a
    divergence stops the run with a warning (:mod:`~gpflow_fastvi.training.watch`).
    """
    max_iter = positive_int(max_iter, "max_iter", optional=True)
    tol = non_negative_float(tol, "tol", optional=True)
    time_budget = non_negative_float(time_budget, "time_budget", optional=True, positive=True)
    stop = StopRule(
        max_iter=(
            (sys.maxsize if time_budget is not None else plan.max_iter)
            if max_iter is None
            else max_iter
        ),
        tol=plan.tol if tol is None else tol,
        patience=plan.patience,
        time_budget=time_budget,
        points=points,
    )
    trace = Trace(method=method)
    bar = _progress_bar(f"{type(model).__name__} ({method})", stop, progress)
    report = Reporter(model, trace, stop, bar, callback, validation, watch)
    try:
        ended = _iterate_restoring(plan, report)
        if not trace.stop_reason:  # the algorithm ended by itself
            trace.stop_reason = ended or "converged"
        if trace.rows:
            trace.returned_iteration = _restore_best(report)
        if trace.stop_reason == "max_iter" and max_iter is None:
            warnings.warn(
                f"fit stopped {type(model).__name__} at its default cap of {stop.max_iter} "
                f"iterations ({method!r}) before it converged; pass max_iter or time_budget to "
                "run longer.",
                NotConvergedWarning,
                stacklevel=4,  # run_plan, fit's train, fit: the caller of fit
            )
    finally:
        bar.close()
    return trace


def _restore_best(report: "Reporter") -> int:
    """Put the model back to the best iterate the watch and the validation stop saw (the
    validation stop's choice last, as it is the user's); warn of a divergence; return the
    iteration the model is left at."""
    trace, watch, validation = report.trace, report.watch, report.validation
    returned = len(trace.rows)
    if watch is not None:
        returned = watch.restore_best(returned) or returned
        if trace.stop_reason == "approximation":
            warnings.warn(
                f"{type(report.model).__name__} stopped at iteration {len(trace.rows)}: "
                f"{report.diverged}. fit put the model back to iteration {returned}, where its "
                "SVGP ELBO was highest (stop_reason 'approximation'). VIConcave maximises the "
                "ELBO itself.",
                ApproximationWarning,
                stacklevel=5,  # _restore_best, run_plan, fit's train, fit: the caller of fit
            )
        if trace.stop_reason == "diverged":
            warnings.warn(
                f"{type(report.model).__name__} diverged at iteration {len(trace.rows)}: "
                f"{report.diverged}. fit stopped and put the model back to iteration "
                f"{returned}, the best it passed through (stop_reason 'diverged').",
                DivergenceWarning,
                stacklevel=5,  # _restore_best, run_plan, fit's train, fit: the caller of fit
            )
    if validation is not None and validation.restore_best():
        returned = validation.best_iteration
    return returned


@dataclass(frozen=True)
class StopRule:
    """When :func:`run_plan` stops, besides the plan ending by itself."""

    max_iter: int
    """The most outer iterations."""
    tol: float
    """The change of the objective per outer iteration that counts as none, per training point:
    ``|change| <= tol * points``, or ``tol * max(1, |objective|)`` when the number of points is
    not known."""
    patience: int
    """The window: the run has converged when the objective has changed by at most
    ``patience`` such changes over the last ``patience`` iterations
    (:attr:`TrainingPlan.patience`)."""
    time_budget: Optional[float]
    """Seconds of training (callback time left out), or ``None``."""
    points: Optional[int] = None
    """The number of training points, which the objective sums over."""

    def spent(self, seconds: float) -> bool:
        """Whether ``seconds`` of training have used up the time budget (never without one)."""
        return self.time_budget is not None and seconds >= self.time_budget

    def negligible(self, change: float, objective: float) -> bool:
        """Whether a change of the objective counts as none."""
        scale = self.points if self.points is not None else max(1.0, abs(objective))
        return abs(change) <= self.tol * scale


def _progress_bar(description: str, stop: StopRule, progress: bool) -> Any:
    """A tqdm bar over the iterations, or over the seconds of a time budget; hidden unless
    ``progress``."""
    with warnings.catch_warnings():
        # In a notebook without ipywidgets tqdm.auto falls back to a text bar, which is all we
        # want, with a warning that would print a local path into every rendered tutorial.
        warnings.filterwarnings("ignore", message="IProgress not found", category=TqdmWarning)
        if stop.time_budget is None:
            return tqdm(total=stop.max_iter, unit="it", disable=not progress, desc=description)
        bar = tqdm(total=stop.time_budget, unit="s", disable=not progress, desc=description)
        bar.bar_format = "{l_bar}{bar}| {n:.1f}/{total:g} s {postfix}"
        return bar


class Reporter:
    """
    The ``report(objective)`` a plan calls after each outer iteration: it times the iteration
    (the callback's time left out), checks that the objective and the model's variables are
    finite, records a row and a :class:`~gpflow_fastvi.training.snapshot.Snapshot` of the model,
    calls the callback, moves the progress bar, and says whether to go on (:class:`StopRule`,
    the validation stop).
    """

    def __init__(
        self,
        model: Any,
        trace: Trace,
        stop: StopRule,
        bar: Any,
        callback: Optional[Callback],
        validation: Optional[ValidationStop],
        watch: Optional[Watch] = None,
    ):
        self.model, self.trace, self.stop, self.bar = model, trace, stop, bar
        self.callback, self.validation, self.watch = callback, validation, watch
        self.diverged = ""  # why the run diverged, once it has
        # Where a fault of the data puts the model back: every iterate may have seen them.
        self.before_fit = Snapshot(model)
        # The state the model returns to if an iteration fails: the start until one succeeds
        # (each success gives it a new list of values; the start's list is never written to).
        self.last_good = copy.copy(self.before_fit)
        self.elapsed = 0.0
        self.previous: Optional[float] = None  # the last iteration's objective
        # The objectives of the last ``patience`` + 1 iterations: the window of the stop rule.
        self.window: Deque[float] = deque(maxlen=stop.patience + 1)
        self.started = time.perf_counter()  # when the current iteration started

    def __call__(self, objective: float, yardstick: Optional[float] = None) -> bool:
        """
        Record the iteration that reached ``objective`` (and, when the plan computed it, the
        SVGP ELBO the watch needs, ``yardstick``); return whether to go on.
        """
        values = self._finite_values(objective)
        validation_nll = None if self.validation is None else self.validation()
        if self.watch is None or not self.watch.watches_yardstick:
            yardstick = None
        elif yardstick is None:
            yardstick = self.watch.yardstick()
        seconds = time.perf_counter() - self.started
        self.elapsed += seconds
        row = self._record(objective, values, validation_nll)
        if yardstick is not None:
            row["yardstick_elbo"] = yardstick
        if self.watch is not None:
            self.diverged = self.watch(row["iteration"], objective, yardstick, self.last_good)
        row.update(self._called_back(row["iteration"]))
        budget = self.stop.time_budget
        self.bar.update(1 if budget is None else min(seconds, budget - self.bar.n))
        self.bar.set_postfix(iteration=row["iteration"], objective=f"{objective:.6g}")
        self.trace.stop_reason = self._stop_reason(objective, row["iteration"])
        self.started = time.perf_counter()
        return not self.trace.stop_reason

    def out_of_time(self) -> bool:
        """Whether the time budget is spent, counting the iteration under way (callback time
        left out)."""
        return self.stop.spent(self.elapsed + time.perf_counter() - self.started)

    def _called_back(self, iteration: int) -> Mapping[str, Any]:
        """What the callback (if any) returned for the row: a mapping, or nothing for ``None``."""
        extra = self.callback(self.model) if self.callback is not None else None
        if extra is None:
            return {}
        if not isinstance(extra, Mapping):
            raise InvalidCallbackError(
                "A fit callback returns None or a mapping of extra row entries, such as "
                f"{{'accuracy': 0.93}}; after iteration {iteration} it returned "
                f"{type(extra).__name__} {extra!r:.60}."
            )
        return extra

    def _finite_values(self, objective: float) -> Any:
        """The model's variables after the iteration, once they and ``objective`` are found
        finite: before anything else is computed from them (the validation NLL, the yardstick),
        so that a run gone non-finite says so rather than failing in a factorisation."""
        values = self.last_good.read()
        if not np.isfinite(objective) or not self.last_good.finite(values):
            raise FloatingPointError(
                f"The objective became {objective} at iteration {len(self.trace.rows) + 1}, or "
                "the model's variables stopped being finite; the last finite objective was "
                f"{self.previous}. Check the data for extreme values, or fix hyperparameters "
                "that run to 0 or infinity (gpflow.set_trainable(..., False), or a prior)."
            )
        return values

    def _record(
        self, objective: float, values: Any, validation_nll: Optional[float]
    ) -> Dict[str, Any]:
        """The iteration's row, appended to the trace, with the model's (finite) ``values``; the
        snapshot is taken before the callback, which may change the model."""
        iteration = len(self.trace.rows) + 1
        row: Dict[str, Any] = {"iteration": iteration, "time": self.elapsed, "objective": objective}
        if validation_nll is not None:
            row["validation_nll"] = validation_nll
        self.trace.rows.append(row)
        self.last_good.values = values
        return row

    def _stop_reason(self, objective: float, iteration: int) -> str:
        """Why to stop after this iteration, or ``""`` to go on."""
        if self.diverged:
            return "approximation" if self.watch is not None and self.watch.parted else "diverged"
        stop, window = self.stop, self.window
        self.previous = objective
        window.append(objective)
        if len(window) == window.maxlen and stop.negligible(
            (objective - window[0]) / stop.patience, objective
        ):
            return "converged"
        if self.validation is not None and self.validation.exhausted:
            return "validation"
        if stop.spent(self.elapsed):
            return "time_budget"
        if iteration >= stop.max_iter:
            return "max_iter"
        return ""


def _iterate_restoring(plan: TrainingPlan, report: Reporter) -> Optional[str]:
    """
    ``plan.iterate(report)``; if it fails or is interrupted, the model goes back to the last
    iteration that succeeded (or to where it started), and a failure says so: a failed
    factorisation as a :class:`~gpflow_fastvi.exceptions.CholeskyError` with the one sentence of
    TensorFlow's message that says what failed.
    """
    trace = report.trace
    try:
        return plan.iterate(report)
    except KeyboardInterrupt:
        report.last_good.restore()
        trace.stop_reason = "interrupted"
        return None
    except BaseException as error:
        report.last_good.restore()
        where = (
            f"The model was left as it was after iteration {len(trace.rows)}, the last that "
            "succeeded."
            if trace.rows
            else "The model was left as it was before fit."
        )
        data_fault = _data_fault(error)
        if data_fault is not None:
            report.before_fit.restore()
            raise InvalidDataError(
                f"{data_fault} The model was left as it was before fit."
            ) from None
        if isinstance(error, tf.errors.InvalidArgumentError) and "Cholesky" in str(error):
            raise CholeskyError(f"{cholesky_hint(error.message)} {where}") from None
        if isinstance(error, InvalidCallbackError):
            raise InvalidCallbackError(f"{error} {where}") from None
        if isinstance(error, FloatingPointError):
            raise FloatingPointError(f"{error} {where}") from error
        raise


def _data_fault(error: BaseException) -> Optional[str]:
    """
    What was wrong with the data, if ``error`` says so: an :class:`InvalidDataError` raised
    where a stream is read, or the sentence of an in-graph check of a batch
    (:func:`~gpflow_fastvi.stream_validation.in_graph_check`) from the TensorFlow error it raised.
    """
    if isinstance(error, InvalidDataError):
        return str(error)
    if isinstance(error, tf.errors.InvalidArgumentError):
        return graph_fault(error.message)
    return None
