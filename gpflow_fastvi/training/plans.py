"""
Training plans: what one outer iteration of :func:`gpflow_fastvi.fit` does for a given model.

A plan is a compiled step and nothing else; the loop around it (tolerance, budget, trace, progress)
lives in :mod:`gpflow_fastvi.training.loops` and is the same for every model.
"""

from typing import TYPE_CHECKING, Callable, List, NamedTuple, Optional, Sequence, Tuple

import gpflow
import numpy as np
import scipy.optimize
import tensorflow as tf

if TYPE_CHECKING:  # pragma: no cover
    from ..models.base import GaussianSitesModel


class TrainingPlan(NamedTuple):
    """One outer iteration of a model's training algorithm, and its defaults."""

    method: str
    """The algorithm's name, recorded in the trace."""
    step: Callable[[], float]
    """Runs one outer iteration and returns the model's objective (to be maximised) after it."""
    max_iter: int
    """Default cap on outer iterations."""
    tol: float
    """Default relative tolerance on the change of the objective between outer iterations."""


class LBFGSStage:
    """
    A few L-BFGS-B evaluations of a loss over some variables. The loss and its gradient are compiled
    once, as one function of the flat parameter vector, and reused by every outer iteration
    (``gpflow.optimizers.Scipy().minimize`` would build and trace a new function on each call).
    """

    def __init__(
        self, loss: Callable[[], tf.Tensor], variables: Sequence[tf.Variable], maxfun: int
    ):
        self.variables = tuple(variables)
        self.maxfun = maxfun
        Scipy = gpflow.optimizers.Scipy

        @tf.function(autograph=False)
        def loss_and_gradient(x: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
            Scipy.assign_tensors(self.variables, Scipy.unpack_tensors(self.variables, x))
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(self.variables)
                value = loss()
            gradients = tape.gradient(
                value, self.variables, unconnected_gradients=tf.UnconnectedGradients.ZERO
            )
            return value, Scipy.pack_tensors(gradients)

        def scipy_objective(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
            try:
                value, gradient = loss_and_gradient(tf.constant(x))
            except tf.errors.InvalidArgumentError:
                if np.array_equal(x, self._start):
                    raise  # the current parameters themselves fail: a real error, report it
                # A line-search trial point so extreme that Kmm cannot be factorised: report it as
                # +inf, so that L-BFGS-B shortens its step instead of stopping training.
                return np.inf, np.zeros_like(x)
            return value.numpy(), gradient.numpy()

        self._objective = scipy_objective
        self._start = np.empty(0)

    def __call__(self) -> scipy.optimize.OptimizeResult:
        Scipy = gpflow.optimizers.Scipy
        x0 = self._start = Scipy.pack_tensors(self.variables).numpy()
        result = scipy.optimize.minimize(
            self._objective, x0, jac=True, method="L-BFGS-B", options={"maxfun": self.maxfun}
        )
        x = result.x if np.isfinite(result.fun) and np.all(np.isfinite(result.x)) else x0
        Scipy.assign_tensors(self.variables, Scipy.unpack_tensors(self.variables, tf.constant(x)))
        return result


_METHODS = {
    # method: (closed-form site updates?, site parameters in L-BFGS-B?, default maxfun)
    "analytic": (True, False, 5),
    "full": (False, True, 20),
    "hybrid": (True, True, 5),
}


def alternating_plan(
    model: "GaussianSitesModel",
    *,
    method: str,
    n_upd: int,
    maxfun: Optional[int],
    site_variables: List[tf.Variable],
    max_iter: int = 1000,
    tol: float = 1e-5,
) -> TrainingPlan:
    """
    The alternating scheme of :cite:t:`izmailov2017faster` (Algorithm 1) and its variants:

    1. ``n_upd`` closed-form updates of the site parameters and q(u) (``analytic``, ``hybrid``);
    2. L-BFGS-B for at most ``maxfun`` evaluations of the collapsed bound, over the trainable
       hyperparameters (``analytic``) or over them and the site parameters (``full``, ``hybrid``).

    An outer iteration runs stage 2 and then stage 1 of the next iteration (the very first one
    runs stage 1 first as well), so that it ends with q(u) optimal for the current parameters and
    the trace's callback sees the model as a user would; ``full`` only refreshes q(u) there. Only
    two functions are compiled, once per :func:`fit` call. Stage 1 cannot lower the bound and
    stage 2 is a descent method on −bound, so the objective is non-decreasing up to L-BFGS-B's
    line-search tolerance.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)}; got {method!r}.")
    if not isinstance(n_upd, (int, np.integer)) or n_upd < 1:
        raise ValueError(f"n_upd must be a positive integer; got {n_upd!r}.")
    closed_form_sites, sites_in_lbfgs, default_maxfun = _METHODS[method]
    maxfun = default_maxfun if maxfun is None else maxfun
    if not isinstance(maxfun, (int, np.integer)) or maxfun < 1:
        raise ValueError(f"maxfun must be a positive integer; got {maxfun!r}.")

    site_ids = {id(v) for v in site_variables}
    variables = [v for v in model.trainable_variables if id(v) not in site_ids]
    if sites_in_lbfgs:
        variables += site_variables
    lbfgs = LBFGSStage(model._training_loss, variables, int(maxfun)) if variables else None
    # Our maths uses TensorFlow control flow explicitly: AutoGraph would only slow tracing down.
    closed_form = tf.function(
        lambda: model.update_sites(int(n_upd) if closed_form_sites else 0), autograph=False
    )
    started = False

    def step() -> float:
        nonlocal started
        if closed_form_sites and not started:
            closed_form()  # stage 1 of the first iteration
        started = True
        if lbfgs is not None:
            lbfgs()
        # Stage 1 of the next iteration, brought forward: the site updates end by storing the
        # optimal q(u) and returning the bound, so each row of the trace sees a current q(u).
        return float(closed_form())

    return TrainingPlan(method=method, step=step, max_iter=max_iter, tol=tol)
