"""
One persistent L-BFGS-B run over the hyperparameters, with the sites stepped in closed form
between accepted iterates: the driver of routes declared ``Route("persistent", ...)``.

The paper's vi-JJ (:func:`~gpflow_fastvi.training.plans.alternating_plan`) restarts L-BFGS-B
every few evaluations, and with it the curvature memory, which with many ARD lengthscales is most
of what L-BFGS knows. Here SciPy's L-BFGS-B runs once, for the whole fit:

- every evaluation at a trial θ starts from the sites of the last *accepted* iterate, takes
  ``n_upd`` closed-form site steps and returns the collapsed bound with its θ-gradient at the
  stepped sites (:meth:`~gpflow_fastvi.models.base.GaussianSitesModel.stepped_objective`), from
  one Kmm factor and one projection, assigning nothing;
- after every accepted iterate (SciPy's callback) the sites and q(u) take the same steps at the
  accepted θ (:meth:`~gpflow_fastvi.models.base.GaussianSitesModel.update_sites`): the site step
  stays an explicit step whose state follows accepted iterates, not part of the loss. That is one
  outer iteration, one row of :func:`~gpflow_fastvi.fit`'s trace.

For a bound maximised over its sites (VIJJ) the gradient with the sites held fixed is, by the
envelope theorem, the gradient of the bound maximised over the sites; between iterations the
objective only rises as the sites move, so L-BFGS-B's line search sees a function that changes
slowly in its favour.
"""

from typing import Optional

import scipy.optimize
import tensorflow as tf

from ..models import GaussianSitesModel
from ..validation import positive_int
from .plans import LBFGSStage, Report, TrainingPlan


def persistent_plan(
    model: GaussianSitesModel,
    data: None = None,
    *,
    n_upd: int = 2,
    max_iter: int = 10_000,
    tol: float = 1e-7,
) -> TrainingPlan:
    """
    The plan of the module docstring: one outer iteration is one L-BFGS-B iteration followed by
    ``n_upd`` closed-form site steps at the accepted hyperparameters.

    :param data: ``None``: the model holds its data.
    :param n_upd: closed-form site steps per evaluation, from the last accepted sites.
    :param tol: stop when the objective changes by at most ``tol · max(1, |objective|)`` from one
        iteration to the next (an iteration here is one L-BFGS-B step, not a burst of five).
    """
    n_upd = positive_int(n_upd, "n_upd")
    site_ids = {id(p.unconstrained_variable) for p in model.site_parameters}
    variables = [v for v in model.trainable_variables if id(v) not in site_ids]
    closed_form = tf.function(lambda: model.update_sites(num_updates=n_upd), autograph=False)

    def loss() -> tf.Tensor:
        return -(model.stepped_objective(n_upd) + model.log_prior_density())

    lbfgs = LBFGSStage(loss, variables, maxfun=None) if variables else None

    def iterate(report: Report) -> Optional[str]:
        objective = float(closed_form())  # the sites and q(u) of the starting θ
        if lbfgs is None:  # nothing for L-BFGS-B: closed-form steps only
            while report(objective):
                objective = float(closed_form())
            return None

        def accepted(_: scipy.optimize.OptimizeResult) -> None:  # θ is already the accepted one
            if not report(float(closed_form())):
                raise StopIteration

        result = lbfgs(callback=accepted)
        # When ``report`` stopped the run, run_plan has its reason already and ignores this one.
        return None if result.success else f"L-BFGS-B stopped: {result.message}"

    return TrainingPlan(iterate=iterate, max_iter=max_iter, tol=tol)
