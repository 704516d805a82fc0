"""
Training plans: what one outer iteration of :func:`gpflow_fastvi.fit` does for a given model.

A plan is a compiled step and nothing else; the loop around it (tolerance, budget, trace, progress)
lives in :mod:`gpflow_fastvi.training.loops` and is the same for every model. The functions that
build plans (the *drivers*: :func:`alternating_plan` here,
:func:`~gpflow_fastvi.training.persistent.persistent_plan`, :func:`~gpflow_fastvi.training.svi.svi_plan`)
drive a model through its declared protocol only: the SVI driver any
:class:`~gpflow_fastvi.models.site_model.SiteModel`, the alternating and persistent drivers a
:class:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel`.
"""

from typing import Any, Callable, Hashable, NamedTuple, Optional, Protocol, Sequence, Tuple

import gpflow
import numpy as np
import scipy.optimize
import tensorflow as tf
from gpflow.base import RegressionData

from ..distribution import gradients_outside_replicas, watch_outside_replicas
from ..models import ClosedFormSiteModel
from ..numerical_checks import trial_points
from ..validation import positive_int
from .compiled import CompiledStep
from .log_scale import LogScale


class Report(Protocol):
    """
    Called with the model's objective after each outer iteration; returns whether to go on. A
    plan that computed the model's SVGP ELBO along the way (its yardstick, for a model whose
    objective is not a bound) hands it on, so that the watch need not compute it again.
    """

    def __call__(self, objective: float, yardstick: Optional[float] = None) -> bool: ...

    def out_of_time(self) -> bool:
        """Whether the time budget is spent, counting the outer iteration under way: a plan
        whose iteration can take many evaluations (a long line search) asks between them."""
        ...


class TrainingPlan(NamedTuple):
    """A model's training algorithm as :func:`~gpflow_fastvi.training.run_plan` runs it, with its defaults."""

    iterate: Callable[[Report], Optional[str]]
    """Runs outer iterations, calling ``report(objective)`` after each, until ``report`` returns
    ``False`` or the algorithm ends by itself; then returns why it ended by itself (``None`` for
    convergence)."""
    max_iter: int
    """Default cap on outer iterations."""
    tol: float
    """Default tolerance on the change of the objective per outer iteration, in nats per training
    point (:class:`~gpflow_fastvi.training.run.StopRule`)."""
    patience: int = 1
    """The window of the convergence test, in outer iterations: the run has converged when the
    objective has changed over the last ``patience`` iterations by at most ``patience`` times the
    tolerance. One for plans whose outer iteration is a whole optimiser run (a burst of
    L-BFGS-B); more where an outer iteration is a single quasi-Newton step, of which an
    occasional one is tiny while the optimiser is far from converged."""
    exact_objective: bool = True
    """Whether the objective reported is the model's own at its state, rather than a mean of
    mini-batch estimates (SVI), which :class:`~gpflow_fastvi.training.watch.Watch` checks for
    impossible values only."""

    @classmethod
    def from_step(cls, step: Callable[[], float], max_iter: int, tol: float) -> "TrainingPlan":
        """The plan that repeats ``step`` (one outer iteration, returning the objective)."""

        def iterate(report: Report) -> Optional[str]:
            while report(step()):
                pass
            return None

        return cls(iterate=iterate, max_iter=max_iter, tol=tol)


class TrialPointFailed(Exception):
    """An :class:`LBFGSStage` loss that is not finite at a line search's trial point (a failed
    factorisation or sites that are not finite, traced unchecked:
    :mod:`~gpflow_fastvi.numerical_checks`)."""


class OutOfTime(Exception):
    """Raised between two evaluations of an :class:`LBFGSStage` run when its ``out_of_time``
    says the time budget is spent."""


class LBFGSStage:
    """
    L-BFGS-B on a loss over some variables: at most ``maxfun`` evaluations per call (a burst of the
    alternating scheme), or with ``maxfun=None`` one run until L-BFGS-B converges or a callback
    stops it (the persistent route). The loss and its gradient are compiled once, as one function
    of the flat parameter vector, and reused by every call (``gpflow.optimizers.Scipy().minimize``
    would build and trace a new function on each call). The loss is called with ``inputs`` (the
    data) as its arguments; with ``shared_over`` (the model, and any variables of the run's own
    that the loss reads) the compiled function is shared with every stage of the same loss over
    objects of the same signature and ``key`` (:mod:`~gpflow_fastvi.training.compiled`), so that
    the next model of the same shapes traces nothing.

    With ``has_aux`` the loss returns ``(value, aux)``, as in JAX's ``value_and_grad``: ``aux`` is
    whatever else the evaluation computed (for the persistent route, the stepped sites and their
    q(u)), kept for the last point evaluated (:attr:`last_x`, :attr:`last_aux`) so that a callback
    at an accepted iterate can take it instead of computing it again.

    ``parameters`` are the GPflow parameters behind ``variables`` (a model's
    ``trainable_parameters``): those on GPflow's softplus transform are searched in log scale
    (:class:`~gpflow_fastvi.training.log_scale.LogScale`); the variables, the callback and the
    result see their own values.

    With ``start_from_last`` a run that starts where the last evaluation was made takes that
    evaluation as its first instead of making it again. That is for a loss whose state moves on
    after each accepted iterate (the persistent route adopts the stepped sites there): L-BFGS-B
    measures every later trial against the value at the accepted iterate as evaluated before
    that move, and a run started at such a point (after the warm start, or again after a run
    that ended by itself) is measured the same way.
    """

    def __init__(
        self,
        loss: Callable[..., Any],
        variables: Sequence[tf.Variable],
        maxfun: Optional[int],
        *,
        has_aux: bool = False,
        parameters: Sequence[gpflow.Parameter] = (),
        start_from_last: bool = False,
        inputs: Sequence[tf.Tensor] = (),
        shared_over: Optional[Sequence[Any]] = None,
        key: Hashable = (),
    ):
        self.variables = tuple(variables)
        self.maxfun = maxfun
        self.start_from_last = start_from_last
        self.scale = LogScale(parameters, self.variables)
        """The coordinates of the search
        (:class:`~gpflow_fastvi.training.log_scale.LogScale`)."""
        self.last_x: Optional[np.ndarray] = None
        """The last point at which the loss was evaluated successfully."""
        self.last_aux: Any = None
        """The ``aux`` of the loss at :attr:`last_x` (``has_aux`` only)."""
        self._last_loss: Optional[Tuple[np.ndarray, np.ndarray]] = None  # value, gradient
        self._variables_at: Optional[np.ndarray] = None  # the point the variables hold, if known
        # The last loss, for a run's first call at the point it was evaluated at (start_from_last).
        self._reuse: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self._calls = 0  # evaluations asked for by the current run
        self._out_of_time: Optional[Callable[[], bool]] = None
        Scipy = gpflow.optimizers.Scipy

        def loss_and_gradient(x: tf.Tensor, *inputs: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, Any]:
            Scipy.assign_tensors(self.variables, Scipy.unpack_tensors(self.variables, x))
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                watch_outside_replicas(tape, self.variables)
                value, aux = loss(*inputs) if has_aux else (loss(*inputs), ())
            gradients = gradients_outside_replicas(tape, value, self.variables)
            return value, Scipy.pack_tensors(gradients), aux

        def at_trial_points(x: tf.Tensor, *inputs: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, Any]:
            with trial_points():  # a failure is a non-finite loss, not a raised (and logged) op
                return loss_and_gradient(x, *inputs)

        compiled = CompiledStep(
            "LBFGSStage.loss_and_gradient",
            at_trial_points,
            roots=(*(shared_over or ()), self.variables),
            key=(key, has_aux),
            shared=shared_over is not None,
        )
        inputs = tuple(inputs)

        def evaluate(x: np.ndarray, trial: bool = False) -> Tuple[np.ndarray, np.ndarray]:
            self._variables_at = None  # until the call returns, they may hold x or not
            value, gradient, aux = compiled(tf.constant(x), *inputs)
            if not np.isfinite(value.numpy()):
                if trial:
                    raise TrialPointFailed
                # The point itself fails: the checked loss raises the error that names why.
                loss_and_gradient(tf.constant(x), *inputs)
            self.last_x, self.last_aux = x.copy(), aux
            self._variables_at = self.last_x  # the compiled loss assigned them first
            self._last_loss = (value.numpy(), gradient.numpy())
            return self._last_loss

        def scipy_objective(z: np.ndarray) -> Tuple[Any, np.ndarray]:
            x = self.scale.from_search(z)
            self._calls += 1
            if self._calls > 1 and self._out_of_time is not None and self._out_of_time():
                raise OutOfTime
            if self._reuse is not None:  # a run's first call, at the last point evaluated
                (value, gradient), self._reuse = self._reuse, None
                return value, self.scale.gradient(x, gradient)
            at_start = np.array_equal(x, self._start)
            try:
                value, gradient = evaluate(x, trial=not at_start)
            except (TrialPointFailed, tf.errors.InvalidArgumentError):
                if at_start:
                    raise  # the current parameters themselves fail: a real error, report it
                # A line-search trial point so extreme that Kmm cannot be factorised (or the
                # sites are not finite there): +inf, so that L-BFGS-B shortens its step instead of
                # stopping training.
                return np.inf, np.zeros_like(z)
            return value, self.scale.gradient(x, gradient)

        self._evaluate = evaluate
        self._objective = scipy_objective
        self._start = np.empty(0)

    def evaluate(self) -> Tuple[float, Any]:
        """The loss (and ``aux``) at the variables' current values, by the compiled function."""
        value, _ = self._evaluate(gpflow.optimizers.Scipy.pack_tensors(self.variables).numpy())
        return float(value), self.last_aux

    def __call__(
        self,
        callback: Optional[Callable[[scipy.optimize.OptimizeResult], None]] = None,
        out_of_time: Optional[Callable[[], bool]] = None,
    ) -> scipy.optimize.OptimizeResult:
        """
        Run L-BFGS-B from the variables' current values and leave them at its result.

        :param callback: called after every accepted iterate, with the variables already set to
            it; raising ``StopIteration`` ends the run there.
        :param out_of_time: asked before every evaluation but the run's first; once it says the
            time budget is spent, the run ends at the last accepted iterate (where the variables
            are left), with ``out_of_time`` set in the result, rather than finish a line search
            that may take many evaluations.
        """
        Scipy = gpflow.optimizers.Scipy
        current = Scipy.pack_tensors(self.variables).numpy()
        z0 = self.scale.to_search(current)
        x0 = self._start = self.scale.from_search(z0)
        at_last = self.last_x is not None and np.array_equal(current, self.last_x)
        self._reuse = self._last_loss if self.start_from_last and at_last else None

        def accepted(intermediate_result: scipy.optimize.OptimizeResult) -> None:
            x = self._start = self.scale.from_search(intermediate_result.x)  # failing here is real
            # L-BFGS-B accepts the point it evaluated last, where the variables already are.
            if self._variables_at is None or not np.array_equal(x, self._variables_at):
                self._assign(x)
            accepted_x = scipy.optimize.OptimizeResult(x=x, fun=intermediate_result.fun)
            callback(accepted_x)  # type: ignore[misc]

        if self.maxfun is None:
            unlimited = np.iinfo(np.int32).max
            options = {"maxiter": unlimited, "maxfun": unlimited}
        else:
            options = {"maxfun": self.maxfun}
        self._calls, self._out_of_time = 0, out_of_time
        try:
            result = scipy.optimize.minimize(
                self._objective,
                z0,
                jac=True,
                method="L-BFGS-B",
                callback=None if callback is None else accepted,
                options=options,
            )
        except OutOfTime:
            self._assign(self._start)
            return scipy.optimize.OptimizeResult(
                x=self._start, success=False, out_of_time=True, message="out of time"
            )
        result.x = self.scale.from_search(result.x)
        # The last evaluation may have been a trial point: leave the variables at the result.
        self._assign(result.x if np.isfinite(result.fun) and np.all(np.isfinite(result.x)) else x0)
        return result

    def _assign(self, x: np.ndarray) -> None:
        Scipy = gpflow.optimizers.Scipy
        Scipy.assign_tensors(self.variables, Scipy.unpack_tensors(self.variables, tf.constant(x)))
        self._variables_at = None  # what a callback does next is its own


def alternating_plan(
    model: ClosedFormSiteModel,
    data: Optional[RegressionData] = None,
    *,
    closed_form_sites: bool,
    sites_in_lbfgs: bool,
    maxfun: int,
    n_upd: int = 1,
    max_iter: int = 1000,
    tol: float = 3e-6,
) -> TrainingPlan:
    """
    The alternating scheme of :cite:t:`izmailov2017faster` (Algorithm 1) and its variants, the
    driver of every route declared ``Route("alternating", ...)``:

    1. with ``closed_form_sites``, ``n_upd`` closed-form updates of the sites and q(u)
       (:meth:`~gpflow_fastvi.models.site_model.SiteModel.update_sites`);
    2. L-BFGS-B for at most ``maxfun`` evaluations of the model's objective with the sites'
       local parameters held fixed at those of the current q(u)
       (:meth:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel._site_parameters`), over the
       trainable hyperparameters, and also over the local parameters with ``sites_in_lbfgs``;
       then q(u) is set optimal for them at the new hyperparameters.

    The held local parameters ([N, 1] each) belong to this run, not to the model. An outer
    iteration runs stage 2 and then stage 1 of the next iteration (the very first one runs stage
    1 first as well), so that it ends with q(u) optimal for the current parameters and the
    trace's callback sees the model as a user would; without ``closed_form_sites`` the local
    parameters are L-BFGS-B's alone, read off q(u) once at the start. The compiled functions are
    traced once per :func:`fit` call. Stage 1 cannot lower a bound and stage 2 is a descent
    method on −bound, so the objective is non-decreasing up to L-BFGS-B's line-search tolerance.

    :param data: ``(X, Y)``, or ``None`` for the data the model holds.
    """
    n_upd = positive_int(n_upd, "n_upd")
    maxfun = positive_int(maxfun, "maxfun")
    data = model._passes.training_data(data)  # checked and converted once
    held = [tf.Variable(p, trainable=False) for p in model._site_parameters(data)]
    variables = list(model.trainable_variables) + (held if sites_in_lbfgs else [])

    def loss() -> tf.Tensor:
        return -(model._objective(data, tuple(held)) + model.log_prior_density())

    lbfgs = (
        LBFGSStage(loss, variables, maxfun, parameters=model.trainable_parameters)
        if variables
        else None
    )
    # Our maths uses TensorFlow control flow explicitly: AutoGraph would only slow tracing down.
    closed_form = tf.function(
        lambda: model.update_sites(num_updates=n_upd, data=data), autograph=False
    )
    hold_sites = tf.function(
        lambda: [v.assign(p) for v, p in zip(held, model._site_parameters(data))], autograph=False
    )
    refresh_q = tf.function(lambda: model._update_q(data, tuple(held)), autograph=False)
    started = False

    def step() -> float:
        nonlocal started
        if closed_form_sites and not started:
            closed_form()  # stage 1 of the first iteration
        if closed_form_sites or not started:
            hold_sites()
        started = True
        if lbfgs is not None:
            lbfgs()
        objective = refresh_q()
        if not closed_form_sites:
            return float(objective)
        # Stage 1 of the next iteration, brought forward: the site updates end by storing the
        # optimal q(u) and returning the bound, so each row of the trace sees a current q(u).
        return float(closed_form())

    return TrainingPlan.from_step(step, max_iter=max_iter, tol=tol)
