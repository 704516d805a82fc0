"""
:class:`Plateau`: the step-size schedule of ``fit``'s mini-batch SVI route
(:func:`~gpflow_fastvi.training.svi.svi_plan`), keyed to the progress of the ELBO estimate, and
the end of the run it decides.
"""

from typing import Any, List

import numpy as np

PLATEAU_TOL = 1e-4
"""
The rise, in nats per training point per pass over the data, of the mean mini-batch ELBO
estimate that counts as progress for ``fit``'s SVI route (:class:`Plateau`). A tenfold looser
tolerance halves the steps while Adam is still moving the kernel variance and ends further from
the full-batch answer (:ref:`defaults-plateau`).
"""

MAX_PASSES = 1000
"""The default cap on the iterations of ``fit``'s SVI route over mini-batches, far above the
passes after which :class:`Plateau` ends a run (:ref:`defaults-plateau`)."""

PLATEAU_PATIENCE = 3
"""The window of :class:`Plateau`, in passes: the mean of the last this many passes against the
mean of as many before them."""

PLATEAU_HALVINGS = 5
"""
How many times :class:`Plateau` halves the steps before the run has converged: ρ and Adam's rate
end at 1/32 of where they started, where their noise on q(u) and θ is a thirty-second of that of
the plateau the run started on.
"""


class Plateau:
    """
    The step-size schedule of ``fit``'s SVI route: q(u)'s step ρ and Adam's rate for θ stay
    constant (:func:`~gpflow_fastvi.models.step_sizes.mini_batch_step_size`,
    :data:`DEFAULT_LEARNING_RATE`) while the passes over the data raise the mean mini-batch ELBO
    estimate, and both are halved at each plateau: when the mean estimate of the last
    :data:`PLATEAU_PATIENCE` passes is no more than :data:`PLATEAU_TOL` nats per point per pass
    above that of the :data:`PLATEAU_PATIENCE` passes before them (means of several passes, so
    that the noise of one pass's batches does not read as a plateau). A constant step moves fast
    and then jitters around the optimum at a distance set by its size; each halving takes that
    distance down, and after :data:`PLATEAU_HALVINGS` of them the run has converged. Nothing to
    tune: the schedule is keyed to the progress of the objective, not to a count of steps.

    :param svi: the :class:`~gpflow_fastvi.NaturalGradientSVI` whose steps it halves
        (``svi.scale_steps``).
    :param points: the number of training points, which the ELBO sums over.
    """

    def __init__(self, svi: Any, points: int):
        self.svi = svi
        self.tol = PLATEAU_TOL * points
        self.passes: List[float] = []  # the mean estimates of the passes since the last halving
        self.halvings = 0

    def after_pass(self, estimate: float) -> bool:
        """Record a pass's mean ELBO estimate; return whether the run has converged."""
        self.passes.append(estimate)
        window = PLATEAU_PATIENCE
        if len(self.passes) < 2 * window:
            return False
        earlier = float(np.mean(self.passes[-2 * window : -window]))
        later = float(np.mean(self.passes[-window:]))
        if later > earlier + window * self.tol:
            return False
        if self.halvings == PLATEAU_HALVINGS:
            return True
        self.svi.scale_steps(0.5)
        self.halvings += 1
        self.passes = []
        return False
