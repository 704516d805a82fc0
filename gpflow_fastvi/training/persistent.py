"""
One persistent L-BFGS-B run over the hyperparameters, with the sites stepped in closed form
between accepted iterates: the driver of routes declared ``Route("persistent", ...)``.

The paper's vi-JJ (:func:`~gpflow_fastvi.training.plans.alternating_plan`) restarts L-BFGS-B
every few evaluations, and with it the curvature memory, which with many ARD lengthscales is most
of what L-BFGS knows. Here SciPy's L-BFGS-B runs once, for the whole fit:

- every evaluation at a trial θ starts from the sites of the last *accepted* iterate, takes
  ``n_upd`` closed-form site steps and returns the collapsed bound with its θ-gradient at the
  stepped sites, together with those sites and their optimal q(u)
  (:meth:`~gpflow_fastvi.models.base.GaussianSitesModel.stepped_sites`), from one Kmm factor and
  one projection, assigning nothing;
- at every accepted iterate (SciPy's callback) the model adopts the stepped sites and q(u) of
  that iterate (:meth:`~gpflow_fastvi.models.base.GaussianSitesModel.adopt`), kept from its
  evaluation rather than computed again: the site step stays an explicit step whose state
  follows accepted iterates, not part of the loss, and costs nothing beyond the evaluations.
  That is one outer iteration, one row of :func:`~gpflow_fastvi.fit`'s trace.

L-BFGS-B's curvature pairs then span objectives whose sites have moved since, and it can end by
itself (a stalled line search, or a tiny change it takes for convergence) well short of the
optimum. It is then started again from where it stopped, with a fresh memory, and the run has
converged only when a fresh start takes at most one step, or when the objective has changed by
at most the tolerance over five outer iterations in a row.

For a bound maximised over its sites (VIJJ) the gradient with the sites held fixed is, by the
envelope theorem, the gradient of the bound maximised over the sites; between iterations the
objective only rises as the sites move, so L-BFGS-B's line search sees a function that changes
slowly in its favour.
"""

from typing import Optional, Tuple

import numpy as np
import scipy.optimize
import tensorflow as tf

from ..models import GaussianSitesModel
from ..types import SteppedSites
from ..validation import positive_int
from .plans import LBFGSStage, Report, TrainingPlan

PATIENCE = 5
"""Outer iterations in a row whose change is within the tolerance before the run has converged."""


def persistent_plan(
    model: GaussianSitesModel,
    data: None = None,
    *,
    n_upd: int = 2,
    max_iter: int = 10_000,
    tol: float = 1e-7,
) -> TrainingPlan:
    """
    The plan of the module docstring: one outer iteration is one accepted L-BFGS-B iterate, after
    which the model adopts the sites and q(u) stepped ``n_upd`` times at it.

    :param data: ``None``: the model holds its data.
    :param n_upd: closed-form site steps per evaluation, from the last accepted sites.
    :param tol: stop when the objective changes by at most ``tol · max(1, |objective|)`` from one
        iteration to the next for ``PATIENCE`` (five) iterations in a row (an iteration here is one
        L-BFGS-B step, not a burst of five, and an occasional one is tiny far from the optimum).
    """
    n_upd = positive_int(n_upd, "n_upd")
    site_ids = {id(p.unconstrained_variable) for p in model.site_parameters}
    variables = [v for v in model.trainable_variables if id(v) not in site_ids]

    def loss() -> Tuple[tf.Tensor, SteppedSites]:
        stepped = model.stepped_sites(n_upd)
        return -(stepped.objective + model.log_prior_density()), stepped

    if not variables:  # nothing for L-BFGS-B: closed-form steps only
        closed_form = tf.function(lambda: model.update_sites(num_updates=n_upd), autograph=False)
        return TrainingPlan.from_step(lambda: float(closed_form()), max_iter=max_iter, tol=tol)

    lbfgs = LBFGSStage(loss, variables, maxfun=None, has_aux=True)

    def step_sites(x: Optional[np.ndarray] = None) -> float:
        """Adopt the stepped sites at θ = x (the variables' values), from the last evaluation
        when it was at x, which is the usual case: L-BFGS-B accepts the last point it tried."""
        if x is None or lbfgs.last_x is None or not np.array_equal(x, lbfgs.last_x):
            lbfgs.evaluate()
        stepped: SteppedSites = lbfgs.last_aux
        model.adopt(stepped)
        return float(stepped.objective)

    def iterate(report: Report) -> Optional[str]:
        step_sites()  # the sites and q(u) of the starting θ
        stopped = False  # whether ``report`` ended the run
        steps = 0

        def accepted(intermediate: scipy.optimize.OptimizeResult) -> None:
            nonlocal stopped, steps
            steps += 1
            if not report(step_sites(intermediate.x)):
                stopped = True
                raise StopIteration

        restarted = False
        while True:
            steps = 0
            result = lbfgs(callback=accepted)
            # When ``report`` stopped the run, run_plan has its reason already.
            if stopped:
                return None
            # L-BFGS-B ended by itself. Its curvature pairs span objectives whose sites have
            # since moved, so it may stall short of the optimum: start it again. A fresh start
            # that cannot take a second step is convergence, even when its line search failed:
            # the gradient holds the stepped sites fixed, so near the optimum it is only as exact
            # as the site steps, and no descent is left to find at that accuracy. On the very
            # first run a failure is reported.
            if steps <= 1:
                return None if result.success or restarted else f"L-BFGS-B: {result.message}"
            restarted = True

    return TrainingPlan(iterate=iterate, max_iter=max_iter, tol=tol, patience=PATIENCE)
