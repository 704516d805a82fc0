"""
:func:`fit`: the one training entry point of every model, and the :class:`Trace` it returns.

The loop is model-agnostic. A model declares its training routes as data
(``training_routes``, :class:`~gpflow_fastvi.types.Route`); ``fit`` checks the route and its
keywords against that declaration (here, and nowhere else), asks the route's driver for a plan of
one outer iteration, and :func:`~gpflow_fastvi.training.run.run_plan` repeats it until the
objective stops changing, an iteration cap or a time budget, timing it with the callback's time
left out, and shows a progress bar on request.
"""

import contextlib
from typing import Any, Callable, Mapping, Optional, Tuple

import gpflow
import tensorflow as tf

from ..distribution import apply_trainable_flags, check_strategy
from ..models import ClosedFormSiteModel, SiteModel
from ..validation import positive_int, warn_of_absent_classes
from .greedy import alternate_with_greedy_selection, check_regression_model, titsias_plan
from .persistent import persistent_plan
from .plans import TrainingPlan, alternating_plan
from .run import Callback, Trace, ValidationStop, run_plan
from .svi import svi_plan
from .watch import Watch, training_points

DRIVERS: Mapping[str, Callable[..., TrainingPlan]] = {
    "alternating": alternating_plan,
    "persistent": persistent_plan,
    "svi": svi_plan,
}
"""The training loops a :class:`~gpflow_fastvi.types.Route` can name, by ``Route.driver``."""


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
    :param tol: stop when the objective changes by at most ``tol`` nats per training point per
        outer iteration (``tol · max(1, |objective|)`` when the number of points is not known),
        on average over a window of iterations: one for the paper's bursts, ten for the
        persistent route, whose iterations are single L-BFGS-B steps. The default is the
        route's (5·10⁻⁵ for the persistent route, where the answer has stopped moving).
        The mini-batch SVI route has its own test (:class:`~gpflow_fastvi.training.plateau.Plateau`).
    :param time_budget: stop after the outer iteration during which this many seconds had passed;
        the persistent route also ends a line search under way once the run has a row, leaving
        the model at its last accepted iterate, so a run overruns its budget by at most one
        evaluation.
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

    **Divergence, and the model fit returns.** ``fit`` never returns a model worse than one it
    passed through (:mod:`~gpflow_fastvi.training.watch`): for a model whose objective is a bound
    the last iterate is the best; one whose objective is an approximation (VITaylor) is watched
    by the SVGP ELBO after every iteration (recorded as ``yardstick_elbo`` in each row) and left
    at the iteration where it was highest (:attr:`Trace.returned_iteration`). An objective no
    approximation of log p(y) can reach (above 0 for a Bernoulli or Poisson likelihood), or an
    SVGP ELBO that falls by more than 0.01 nats per point below its best, stops the run with
    ``stop_reason`` ``"diverged"`` and a :class:`~gpflow_fastvi.exceptions.DivergenceWarning`;
    where the ELBO fell while the approximation it is watched for kept rising, with
    ``"approximation"`` and an :class:`~gpflow_fastvi.exceptions.ApproximationWarning`.
    A run that reaches the route's default ``max_iter`` before its convergence test warns
    (:class:`~gpflow_fastvi.exceptions.NotConvergedWarning`).

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
        route_name, make_plan, data = _site_model_route(model, data, method, options)
        scope = model._passes.distributed_by(check_strategy(strategy))
        held = data if data is not None else getattr(model, "data", None)
        if isinstance(held, (tuple, list)) and len(held) == 2:
            warn_of_absent_classes(model.likelihood, held[1])
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
        plan = make_plan()
        watch = (
            Watch(model, data, exact=plan.exact_objective) if isinstance(model, SiteModel) else None
        )
        return run_plan(
            plan,
            model,
            method=route_name,
            max_iter=max_iter,
            tol=tol,
            time_budget=budget,
            callback=callback,
            progress=progress,
            validation=early_stop,
            watch=watch,
            points=training_points(model, data),
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
) -> Tuple[str, Callable[[], TrainingPlan], Any]:
    """
    The route ``fit`` takes for one of this package's models, checked, its plan's maker, and the
    data as the plan and the watch take them: for a closed-form model checked here, once
    (:class:`~gpflow_fastvi.types.CheckedData`, or a checked stream), for every pass of the fit.
    """
    if not isinstance(model, SiteModel):
        raise TypeError(
            f"fit() trains gpflow_fastvi models and GPflow's SGPR; {type(model).__name__} has no "
            "training routes. Train other GPflow models with gpflow.optimizers.Scipy or a Keras "
            "optimiser."
        )
    name = type(model).__name__
    route_name = model._default_method() if method is None else method
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
    if isinstance(model, ClosedFormSiteModel) and data is not None:
        data = model._passes.training_data(data)
    return route_name, lambda: DRIVERS[route.driver](model, data, **settings), data


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
