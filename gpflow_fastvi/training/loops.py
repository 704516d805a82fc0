"""
:func:`fit`: the one training entry point of every model, and the :class:`Trace` it returns.

The loop is model-agnostic. A model declares its training routes as data
(``training_routes``, :class:`~gpflow_fastvi.types.Route`); ``fit`` checks the route and its
keywords against that declaration (here, and nowhere else), asks the route's driver for a plan of
one outer iteration, and :func:`run_plan` repeats it until the objective stops changing, an
iteration cap or a time budget, timing it with the callback's time left out, and shows a progress
bar on request.
"""

import contextlib
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from tqdm import TqdmWarning
from tqdm.auto import tqdm

from ..distribution import apply_trainable_flags, check_strategy
from ..exceptions import CholeskyError
from ..models import SiteModel
from ..validation import (
    check_data,
    check_input_columns,
    non_negative_float,
    positive_int,
    targets_for_likelihood,
)
from .greedy import alternate_with_greedy_selection, check_regression_model, titsias_plan
from .persistent import persistent_plan
from .plans import TrainingPlan, alternating_plan
from .snapshot import Snapshot
from .svi import svi_plan

DRIVERS: Mapping[str, Callable[..., TrainingPlan]] = {
    "alternating": alternating_plan,
    "persistent": persistent_plan,
    "svi": svi_plan,
}
"""The training loops a :class:`~gpflow_fastvi.types.Route` can name, by ``Route.driver``."""

Callback = Callable[[Any], Optional[Mapping[str, Any]]]


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
    ``fit(validation=...)`` stopped improving), or the optimiser's own message when it stopped for
    another reason (e.g. ``"L-BFGS-B: ..."``), or ``"interrupted"`` (Ctrl-C: the model is at the
    last iteration in ``rows``)."""

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


def fit(
    model: Any,
    data: Any = None,
    *,
    method: Optional[str] = None,
    max_iter: Optional[int] = None,
    tol: Optional[float] = None,
    time_budget: Optional[float] = None,
    callback: Optional[Callback] = None,
    progress: bool = False,
    validation: Any = None,
    validation_patience: int = 10,
    strategy: Optional[tf.distribute.Strategy] = None,
    greedy_rounds: Optional[int] = None,
    greedy_working_set: Optional[int] = None,
    **options: Any,
) -> Trace:
    """
    Train ``model`` with its own fast algorithm and return a :class:`Trace`.

    ``method`` names one of the model's ``training_routes`` (default: its ``default_route``), and
    ``options`` are that route's keywords, such as ``n_upd`` and ``maxfun``; ``VIJJ.training_routes``
    lists them with their defaults. For :class:`~gpflow_fastvi.VIJJ` the routes are one persistent
    L-BFGS-B run with closed-form site steps (``"persistent"``, the default) and the paper's vi-JJ
    (``"analytic"``), vi-JJ-full (``"full"``) and vi-JJ-hybrid (``"hybrid"``).

    :param data: for a model built with SVGP's signature, ``(X, Y)`` or a finite
        ``tf.data.Dataset`` of ``(X [b, D], Y [b, 1])`` batches. The closed-form models' default
        route streams a dataset once per pass, so memory is O(b·M + M²) whatever the number of
        points (:mod:`gpflow_fastvi.datasets` builds such a dataset lazily from a file);
        :class:`~gpflow_fastvi.PolyaGammaSVGP` takes its mini-batches from it. ``None`` for a
        model that holds its data.
    :param max_iter: cap on outer iterations. ``None`` takes the route's default, or no cap at all
        when a ``time_budget`` is given: the budget (or convergence) ends the run.
    :param tol: stop when the objective changes by at most ``tol · max(1, |objective|)`` between
        outer iterations (for as many iterations in a row as the route's plan asks: one for the
        paper's bursts, several for the persistent route, whose iterations are single steps).
    :param time_budget: stop after the outer iteration during which this many seconds had passed.
    :param callback: called as ``callback(model)`` after every outer iteration; a returned mapping is
        merged into that iteration's row (e.g. test accuracy). Its time is not counted.
    :param progress: show a progress bar: of training seconds against ``time_budget`` if one is
        given (callback time left out, as in the trace), of outer iterations otherwise.
    :param validation: held-out ``(X, Y)``, not in the training data, for a validation-based stop:
        after every outer iteration the mean negative log predictive density of these points is
        recorded (``validation_nll``, its time counted as training time); the run stops when it
        has not improved for ``validation_patience`` iterations in a row (``stop_reason``
        ``"validation"``), and however the run ends the model is left at the iteration with the
        lowest ``validation_nll`` (all its variables: hyperparameters, sites and q(u)). Without
        it, training maximises the objective, as ``gpflow.optimizers.Scipy`` would. The
        benchmarks show why one may want it: with ARD lengthscales and fixed inducing inputs the
        SVGP ELBO itself can keep rising along hyperparameters that predict worse.
    :param validation_patience: iterations without improvement of ``validation_nll`` that stop
        the run.
    :param strategy: a :mod:`tf.distribute` strategy whose replicas share every pass over the
        data, each summing its own share, with one all-reduce per pass
        (:mod:`gpflow_fastvi.distribution`). By default the model's
        :attr:`~gpflow_fastvi.models.passes.DataPasses.distribute_strategy`: that of the
        enclosing ``strategy.scope()``, else the one the model was built in, if any. A model
        built in another strategy's scope is refused; one built outside every scope keeps its
        variables on the host and its passes are shared all the same. Flags that
        :func:`gpflow.set_trainable` set on variables created in a scope are applied first
        (:func:`~gpflow_fastvi.distribution.apply_trainable_flags`).
    :param greedy_rounds: Titsias's alternating scheme (:mod:`gpflow_fastvi.training.greedy`):
        this many rounds of choosing the model's M inducing inputs greedily among the training
        inputs (:func:`~gpflow_fastvi.greedy_inducing_points`, weighted by the sites' precisions
        at the current q(u), which moves with them) and then training as without it; ``max_iter``
        and ``tol`` apply to each round, ``time_budget`` to them all. A round that does not end
        with a higher objective than the rounds before it is undone, and ends the rounds. Needs
        the data in memory; not with ``validation``.
    :param greedy_working_set: the selection's working set size (``None``: every training input).

    **GPflow's SGPR.** ``fit(sgpr)`` trains a :class:`gpflow.models.SGPR` by Titsias's scheme
    (:func:`~gpflow_fastvi.training.greedy.titsias_plan`, ``method="titsias"``): L-BFGS-B on the
    kernel's hyperparameters, then the noise variance in closed form, repeated; with
    ``greedy_rounds``, the paper's whole Algorithm 2.

    **Failures.** After every outer iteration the model's variables (hyperparameters and q(u))
    are copied. If a later iteration fails (a Cholesky factorisation that escalating jitter could
    not save, a non-finite objective or variable, an exception in the callback), the model is put
    back to that copy, the last iteration that succeeded, or its state before ``fit``, and the
    error is raised, naming the cause: :class:`~gpflow_fastvi.CholeskyError` or
    ``FloatingPointError``. Interrupted (Ctrl-C, ``KeyboardInterrupt``), the model is put back the
    same way and ``fit`` returns the trace so far, with ``stop_reason`` ``"interrupted"``.
    """
    if isinstance(model, gpflow.models.SGPR):
        route_name, make_plan, scope = _sgpr_route(
            model, data, method, strategy, options, inducing_selected=greedy_rounds is not None
        )
    else:
        route_name, make_plan = _site_model_route(model, data, method, options)
        scope = model.distributed_by(check_strategy(strategy))
    early_stop = (
        None
        if validation is None
        else ValidationStop(
            model, validation, positive_int(validation_patience, "validation_patience")
        )
    )
    if greedy_rounds is not None and early_stop is not None:
        raise ValueError(
            "fit() takes greedy_rounds or validation, not both: a validation stop would restore "
            "inducing inputs of an earlier round."
        )

    def train(budget: Optional[float]) -> Trace:
        return run_plan(
            make_plan(),
            model,
            method=route_name,
            max_iter=max_iter,
            tol=tol,
            time_budget=budget,
            callback=callback,
            progress=progress,
            validation=early_stop,
        )

    with scope:
        if isinstance(model, SiteModel):
            apply_trainable_flags(model)
        if greedy_rounds is None:
            return train(time_budget)
        return alternate_with_greedy_selection(
            model,
            data,
            train,
            rounds=greedy_rounds,
            working_set_size=greedy_working_set,
            time_budget=time_budget,
        )


def _site_model_route(
    model: Any, data: Any, method: Optional[str], options: Mapping[str, Any]
) -> Tuple[str, Callable[[], TrainingPlan]]:
    """The route ``fit`` takes for one of this package's models, checked, and its plan's maker."""
    if not isinstance(model, SiteModel):
        raise TypeError(
            f"fit() trains gpflow_fastvi models and GPflow's SGPR; {type(model).__name__} has no "
            "training routes. Train other GPflow models with gpflow.optimizers.Scipy or a Keras "
            "optimiser."
        )
    name = type(model).__name__
    route_name = model.default_method() if method is None else method
    if route_name not in model.training_routes:
        raise ValueError(
            f"method must be one of {sorted(model.training_routes)} for {name}; got {method!r}."
        )
    route = model.training_routes[route_name]
    unknown = sorted(set(options) - set(route.options))
    if unknown:
        raise TypeError(
            f"fit() got keyword(s) {', '.join(unknown)} that {name} (method={route_name!r}) does "
            f"not take; its training keywords are: {', '.join(route.options) or 'none'}. "
            "Model settings such as train_inducing go to the model's constructor."
        )
    holds_data = getattr(model, "data", None) is not None
    if holds_data and data is not None:
        raise ValueError(
            f"This {name} holds its training data (given to the constructor); call fit(model) "
            "without data, or build it without data (SVGP's signature) to pass data to fit."
        )
    if not holds_data and data is None:
        raise ValueError(f"This {name} was built without data: call fit(model, (X, Y), ...).")
    settings = {**route.settings, **route.options, **options}
    return route_name, lambda: DRIVERS[route.driver](model, data, **settings)


def _sgpr_route(
    model: gpflow.models.SGPR,
    data: Any,
    method: Optional[str],
    strategy: Optional[tf.distribute.Strategy],
    options: Mapping[str, Any],
    *,
    inducing_selected: bool,
) -> Tuple[str, Callable[[], TrainingPlan], Any]:
    """Titsias's scheme for GPflow's SGPR, the one route ``fit`` offers it, checked."""
    if method not in (None, "titsias"):
        raise ValueError(f"method must be 'titsias' for SGPR; got {method!r}.")
    if data is not None:
        raise ValueError("An SGPR holds its training data: call fit(model) without data.")
    if strategy is not None:
        raise ValueError(
            "fit() trains an SGPR on one device; strategy is for this package's models."
        )
    if options:
        raise TypeError(
            f"fit() got keyword(s) {', '.join(sorted(options))} that SGPR (method='titsias') does "
            "not take; it takes none."
        )
    check_regression_model(model)
    plan = lambda: titsias_plan(model, inducing_selected=inducing_selected)  # noqa: E731
    return "titsias", plan, contextlib.nullcontext()


class ValidationStop:
    """
    The validation-based stop of :func:`fit`: the held-out mean negative log predictive density
    after each outer iteration, a copy of the model's variables at the best one so far, and the
    count of iterations since it.
    """

    def __init__(self, model: Any, data: Any, patience: int):
        X, Y = check_data(data)
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
        self._best_values: Optional[List[np.ndarray]] = None

    def __call__(self) -> float:
        """Record the current iteration; return its validation NLL."""
        nll = float(self._nll())
        if nll < self.best:
            self.best, self.since_best = nll, 0
            self._best_values = [v.numpy() for v in self.model.variables]
        else:
            self.since_best += 1
        return nll

    @property
    def exhausted(self) -> bool:
        """Whether ``patience`` iterations in a row have not improved on the best."""
        return self.since_best >= self.patience

    def restore_best(self) -> None:
        """Put every variable of the model back to its value at the best iteration."""
        if self._best_values is not None and self.since_best > 0:
            for variable, value in zip(self.model.variables, self._best_values):
                variable.assign(value)


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
) -> Trace:
    """
    Run ``plan``'s outer iterations as :func:`fit` describes and record them in a :class:`Trace`
    named ``method``; the arguments are :func:`fit`'s, ``None`` taking the plan's defaults.
    """
    max_iter = positive_int(max_iter, "max_iter", optional=True)
    tol = non_negative_float(tol, "tol", optional=True)
    time_budget = non_negative_float(time_budget, "time_budget", optional=True, positive=True)
    if max_iter is None:
        max_iter = sys.maxsize if time_budget is not None else plan.max_iter
    tol = plan.tol if tol is None else tol

    trace = Trace(method=method)
    description = f"{type(model).__name__} ({method})"
    with warnings.catch_warnings():
        # In a notebook without ipywidgets tqdm.auto falls back to a text bar, which is all we
        # want, with a warning that would print a local path into every rendered tutorial.
        warnings.filterwarnings("ignore", message="IProgress not found", category=TqdmWarning)
        if time_budget is not None:
            bar = tqdm(total=time_budget, unit="s", disable=not progress, desc=description)
            bar.bar_format = "{l_bar}{bar}| {n:.1f}/{total:g} s {postfix}"
        else:
            bar = tqdm(total=max_iter, unit="it", disable=not progress, desc=description)
    last_good = Snapshot(model)  # the state the model returns to if an iteration fails
    progress_state: Dict[str, Any] = {"elapsed": 0.0, "previous": None, "small_changes": 0}
    clock = [time.perf_counter()]  # when the current iteration started, callback time left out

    def report(objective: float) -> bool:
        validation_nll = None if validation is None else validation()
        seconds = time.perf_counter() - clock[0]
        elapsed = progress_state["elapsed"] = progress_state["elapsed"] + seconds
        previous = progress_state["previous"]
        iteration = len(trace.rows) + 1
        values = last_good.read()
        if not np.isfinite(objective) or not last_good.finite(values):
            raise FloatingPointError(
                f"The objective became {objective} at iteration {iteration}, or the model's "
                f"variables stopped being finite; the last finite objective was {previous}. Check "
                "the data for extreme values, or fix hyperparameters that run to 0 or infinity "
                "(gpflow.set_trainable(..., False), or a prior)."
            )
        row: Dict[str, Any] = {"iteration": iteration, "time": elapsed, "objective": objective}
        if validation_nll is not None:
            row["validation_nll"] = validation_nll
        trace.rows.append(row)
        last_good.values = values  # taken before the callback, which may change the model
        if callback is not None:
            row.update(callback(model) or {})
        bar.update(1 if time_budget is None else min(seconds, time_budget - bar.n))
        bar.set_postfix(iteration=iteration, objective=f"{objective:.6g}")
        progress_state["previous"] = objective
        small = previous is not None and abs(objective - previous) <= tol * max(1.0, abs(objective))
        progress_state["small_changes"] = progress_state["small_changes"] + 1 if small else 0
        if progress_state["small_changes"] >= plan.patience:
            trace.stop_reason = "converged"
        elif validation is not None and validation.exhausted:
            trace.stop_reason = "validation"
        elif time_budget is not None and elapsed >= time_budget:
            trace.stop_reason = "time_budget"
        elif iteration >= max_iter:
            trace.stop_reason = "max_iter"
        clock[0] = time.perf_counter()
        return not trace.stop_reason

    try:
        try:
            ended = plan.iterate(report)
        except KeyboardInterrupt:
            last_good.restore()
            trace.stop_reason = "interrupted"
            ended = None
        except BaseException as error:
            last_good.restore()
            where = (
                f"The model was left as it was after iteration {len(trace.rows)}, the last that "
                "succeeded."
                if trace.rows
                else "The model was left as it was before fit."
            )
            if isinstance(error, tf.errors.InvalidArgumentError) and "Cholesky" in str(error):
                raise CholeskyError(f"{cholesky_hint(error.message)} {where}") from None
            if isinstance(error, FloatingPointError):
                raise FloatingPointError(f"{error} {where}") from error
            raise
        if not trace.stop_reason:  # the algorithm ended by itself
            trace.stop_reason = ended or "converged"
        if validation is not None:
            validation.restore_best()
    finally:
        bar.close()
    return trace


def cholesky_hint(message: str) -> str:
    """
    The sentence of a failed factorisation's message that says what failed and why (the checks of
    :mod:`gpflow_fastvi.gaussian.cholesky`), without the graph trace TensorFlow puts around it.
    """
    found = re.search(r"Cholesky factorisation of[^\n]*?(?=: Tensor had|\n|$)", message)
    if found:
        return found.group(0).rstrip(".") + "."
    return (
        "A Cholesky factorisation failed: a matrix that should be positive definite is not. "
        "Usual causes: duplicate inducing inputs, a kernel variance or lengthscale that collapsed "
        "to 0, or extreme values in the data."
    )
