"""
:func:`fit`: the one training entry point of every model, and the :class:`Trace` it returns.

The loop is model-agnostic: a model's ``training_plan`` says what one outer iteration does; ``fit``
repeats it until the objective stops changing, an iteration cap or a time budget, timing it with
the callback's time left out, and shows a progress bar on request.
"""

import inspect
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from ..exceptions import CholeskyError

Callback = Callable[[Any], Optional[Mapping[str, Any]]]


@dataclass
class Trace:
    """What :func:`fit` did: one row per outer iteration, and why it stopped."""

    method: str
    """The training algorithm that ran, e.g. ``"analytic"`` for vi-JJ."""
    rows: List[Dict[str, Any]] = field(default_factory=list)
    """One dict per outer iteration: ``iteration``, ``time`` (seconds since the start, callback time
    excluded, graph compilation included), ``objective`` (the model's own objective after the
    iteration) and whatever the callback returned."""
    stop_reason: str = ""
    """``"converged"``, ``"max_iter"`` or ``"time_budget"``."""

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"

    def column(self, key: str) -> np.ndarray:
        """The values of one key across rows, as an array (NaN where a row lacks it)."""
        return np.array([row.get(key, np.nan) for row in self.rows], dtype=float)


def _keywords(function: Callable[..., Any]) -> List[str]:
    """The keyword-only parameters of ``function`` (a model's ``training_plan``)."""
    parameters = inspect.signature(function).parameters.values()
    return [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]


def _unknown_keywords(function: Callable[..., Any], given: Mapping[str, Any]) -> List[str]:
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return []
    return sorted(set(given) - set(_keywords(function)))


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
    **model_specific: Any,
) -> Trace:
    """
    Train ``model`` with its own fast algorithm and return a :class:`Trace`.

    For :class:`~gpflow_fastvi.VIJJ` this is vi-JJ (``method="analytic"``, the default), vi-JJ-full
    (``"full"``) or vi-JJ-hybrid (``"hybrid"``); see ``VIJJ.training_plan`` for the model-specific
    keywords (``n_upd``, ``maxfun``).

    :param data: ``None`` for models that hold their data.
    :param max_iter: cap on outer iterations. ``None`` takes the model's default, or no cap at all
        when a ``time_budget`` is given: the budget (or convergence) ends the run.
    :param tol: stop when the objective changes by at most ``tol · max(1, |objective|)`` between
        outer iterations.
    :param time_budget: stop after the outer iteration during which this many seconds had passed.
    :param callback: called as ``callback(model)`` after every outer iteration; a returned mapping is
        merged into that iteration's row (e.g. test accuracy). Its time is not counted.
    :param progress: show a progress bar: of training seconds against ``time_budget`` if one is
        given (callback time left out, as in the trace), of outer iterations otherwise.
    """
    if not hasattr(model, "training_plan"):
        raise TypeError(
            f"fit() trains gpflow_fastvi models; {type(model).__name__} has no training plan. "
            "Train GPflow models with gpflow.optimizers.Scipy or a Keras optimiser."
        )
    unknown = _unknown_keywords(model.training_plan, model_specific)
    if unknown:
        raise TypeError(
            f"fit() got keyword(s) {', '.join(unknown)} that {type(model).__name__} does not take; "
            f"its training keywords are: {', '.join(_keywords(model.training_plan)) or 'none'}. "
            "Model settings such as train_inducing go to the model's constructor."
        )
    plan = model.training_plan(data, method=method, **model_specific)
    if max_iter is None:
        max_iter = sys.maxsize if time_budget is not None else plan.max_iter
    tol = plan.tol if tol is None else tol
    if max_iter < 1:
        raise ValueError(f"max_iter must be at least 1; got {max_iter}.")
    if time_budget is not None and time_budget <= 0:
        raise ValueError(f"time_budget must be positive seconds; got {time_budget}.")

    trace = Trace(method=plan.method)
    description = f"{type(model).__name__} ({plan.method})"
    if time_budget is not None:
        bar = tqdm(total=time_budget, unit="s", disable=not progress, desc=description)
        bar.bar_format = "{l_bar}{bar}| {n:.1f}/{total:g} s {postfix}"
    else:
        bar = tqdm(total=max_iter, unit="it", disable=not progress, desc=description)
    elapsed = 0.0
    previous = None
    try:
        for iteration in range(1, max_iter + 1):
            start = time.perf_counter()
            try:
                objective = plan.step()
            except tf.errors.InvalidArgumentError as error:
                if "Cholesky" in str(error):
                    raise CholeskyError(error.message) from error
                raise
            seconds = time.perf_counter() - start
            elapsed += seconds
            if not np.isfinite(objective):
                raise FloatingPointError(
                    f"The objective became {objective} at iteration {iteration}; the last finite "
                    f"value was {previous}. Check the data for extreme values, or fix hyperparameters "
                    "that run to 0 or infinity."
                )
            row: Dict[str, Any] = {"iteration": iteration, "time": elapsed, "objective": objective}
            if callback is not None:
                row.update(callback(model) or {})
            trace.rows.append(row)
            bar.update(1 if time_budget is None else min(seconds, time_budget - bar.n))
            bar.set_postfix(iteration=iteration, objective=f"{objective:.6g}")
            if previous is not None and abs(objective - previous) <= tol * max(1.0, abs(objective)):
                trace.stop_reason = "converged"
                break
            previous = objective
            if time_budget is not None and elapsed >= time_budget:
                trace.stop_reason = "time_budget"
                break
        else:
            trace.stop_reason = "max_iter"
    finally:
        bar.close()
    return trace
