"""
:class:`Watch`: what :func:`~gpflow_fastvi.fit` keeps so that it never returns a model worse than
one it passed through, and the divergence it stops.

A bound (VIJJ, KLCorrected, VIConcave, PolyaGammaSVGP) is its own yardstick: the best iterate is
the one with the highest objective. VITaylor's objective J̃ is an approximation that can rise
while the model gets worse: on a set a classifier can get almost always right, the Taylor sites
of points far on the wrong side of the boundary have a curvature that falls as e^(−|ξ|), their
quadratics promise ever more as the kernel variance grows, and J̃ ran to +10¹³² while the test
accuracy fell from 0.997 to 0.5. So a model whose objective is not a bound is watched by its
yardstick, the SVGP ELBO at its q(u) (:meth:`~gpflow_fastvi.models.site_model.SiteModel.elbo`),
and the best iterate is the one with the highest yardstick. The persistent route computes it in
its evaluation, from the marginals at which it reads the next sites
(:attr:`~gpflow_fastvi.types.SteppedSites.yardstick`), and hands it to the report; other routes
leave it to the watch, which then takes one more pass over the data per iteration.

A run has *diverged* when its objective is one no approximation of log p(y) can reach (above 0
for a likelihood of a discrete variable, whose log-probabilities are ≤ 0), or when the yardstick
is not finite, or stays below its best by more than :data:`DIVERGED_DROP` nats per training point
for :data:`DIVERGED_PATIENCE` iterations in a row. ``fit`` then stops with ``stop_reason`` ``"diverged"``, puts the model back to the best
iterate and warns (:class:`~gpflow_fastvi.exceptions.DivergenceWarning`).

One case of the last is no divergence of the optimiser: the yardstick stays down while the
objective, an approximation, is at least where it was at the yardstick's best. L-BFGS-B is then
climbing its objective as it should, and the approximation has parted from the ELBO (VITaylor's
Taylor sites of C classes, which see the softmax's curvature only on the diagonal). ``fit`` stops
the same way, with ``stop_reason`` ``"approximation"`` and an
:class:`~gpflow_fastvi.exceptions.ApproximationWarning` that says so.
"""

import copy
from typing import Any, Callable, Optional

import numpy as np
import tensorflow as tf

from ..likelihoods import log_density_ceiling
from ..models import SiteModel
from .snapshot import Snapshot

DIVERGED_PATIENCE = 3
"""
How many iterations in a row the yardstick must stay more than :data:`DIVERGED_DROP` per point
below its best before the run counts as diverged. L-BFGS-B climbs the objective, not the
yardstick, and its first steps are the least informed: on scikit-learn's digits (10 classes,
1,438 points, 64 lengthscales) VITaylor's SVGP ELBO fell by 0.014 nats per point at iteration 2,
was back within 0.005 at iteration 3 and rose by 0.23 per point to its end; a single fall stopped
that run at iteration 1. A runaway keeps falling (or breaks the ceiling at once).
"""

DIVERGED_DROP = 0.01
"""
How far, in nats per training point, the yardstick may fall below its best before the run counts
as diverged: a fall in the mean log predictive density of the training points of about this
much, 0.01 nats, the tolerance to which the benchmarks compare test NLLs. On the near-separable
set of the module docstring the SVGP ELBO of VITaylor fell by 0.1 nats per point in the one
iteration before J̃ went above 0.
"""


def training_points(model: Any, data: Any) -> Optional[int]:
    """The number of training points: ``model.num_data`` if set, else the rows of the arrays
    given or held; ``None`` for a stream of unknown length."""
    if getattr(model, "num_data", None) is not None:
        return int(model.num_data)
    if data is None:
        data = getattr(model, "data", None)
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return int(np.shape(data[0])[0])
    return None


class Watch:
    """
    The watch of the module docstring on one run of :func:`~gpflow_fastvi.training.run_plan`.

    :param model: the model being trained.
    :param data: the training data as ``fit`` got them (``None`` for the data the model holds).
    :param exact: whether the objective the plan reports is exact (not a mini-batch estimate,
        which is watched for impossible values only).
    """

    def __init__(self, model: SiteModel, data: Any, *, exact: bool = True):
        self.model = model
        self.points = training_points(model, data)
        per_point = log_density_ceiling(model.likelihood)
        if per_point is None or (per_point > 0 and self.points is None):
            self.ceiling = np.inf
        else:
            self.ceiling = per_point * (self.points or 0)
        """The highest objective an approximation of log p(y) can reach: N times the ceiling of
        each log p(yᵢ | fᵢ) (:func:`~gpflow_fastvi.likelihoods.log_density_ceiling`)."""
        self.exact = exact
        self.watches_yardstick = exact and not getattr(model, "_objective_is_bound", True)
        """Whether the best iterate is chosen by the yardstick rather than the objective."""
        self._data = data
        self._yardstick: Optional[Callable[[], tf.Tensor]] = None  # compiled when first needed
        self.best_score = -np.inf
        self.best_objective = -np.inf
        """The objective at the best iterate."""
        self.best_iteration = 0
        self.parted = False
        """Whether the run stopped because the objective, an approximation, parted from the
        yardstick rather than because the run diverged."""
        self.falls = 0
        """Iterations in a row whose yardstick lay more than the drop below the best."""
        self._best: Optional[Snapshot] = None

    def yardstick(self) -> Optional[float]:
        """
        The yardstick at the model's current state, or ``None`` when it is not watched. A plan
        that computes it along the way (the persistent route, from the pass that reads the next
        sites) hands it to the report instead, and this function is then never compiled.
        """
        if not self.watches_yardstick:
            return None
        if self._yardstick is None:
            model, checked = self.model, self.model._passes.training_data(self._data)
            self._yardstick = tf.function(lambda: model.elbo(checked), autograph=False)
        return float(self._yardstick())

    def __call__(
        self, iteration: int, objective: float, yardstick: Optional[float], state: Snapshot
    ) -> str:
        """
        Record iteration ``iteration`` (its objective, its yardstick if watched, and ``state``, a
        snapshot of the model after it); return why the run has diverged, or ``""``.
        """
        if objective > self.ceiling:
            return (
                f"its objective reached {objective:.6g}, above {self.ceiling:g}, which no "
                f"approximation of log p(y) reaches for a {type(self.model.likelihood).__name__} "
                "likelihood"
            )
        if not self.exact:
            return ""
        score = objective if yardstick is None else yardstick
        if not np.isfinite(score):
            return f"its SVGP ELBO became {score}"
        scale = self.points if self.points is not None else max(1.0, abs(self.best_score))
        self.falls = self.falls + 1 if score < self.best_score - DIVERGED_DROP * scale else 0
        if self.falls >= DIVERGED_PATIENCE:
            what = "SVGP ELBO" if yardstick is not None else "objective"
            fell = (
                f"its {what} fell from {self.best_score:.6g} at iteration {self.best_iteration} "
                f"to {score:.6g} and stayed down for {self.falls} iterations"
            )
            self.parted = yardstick is not None and objective >= self.best_objective
            if self.parted:
                return (
                    f"{fell}, while its own objective, an approximation of the ELBO, rose from "
                    f"{self.best_objective:.6g} to {objective:.6g}: the approximation led away "
                    "from the ELBO's optimum"
                )
            return fell
        if score > self.best_score:
            self.best_score, self.best_iteration = score, iteration
            self.best_objective = objective
            self._best = copy.copy(state)
        return ""

    def restore_best(self, last_iteration: int) -> Optional[int]:
        """Put the model back to the best iterate if the run ended elsewhere; return its
        iteration, or ``None`` if the model is there already (or nothing was recorded)."""
        if self._best is None or self.best_iteration == last_iteration:
            return None
        self._best.restore()
        return self.best_iteration
