"""
:class:`Plateau`: the step-size schedule of ``fit``'s mini-batch SVI route
(:func:`~gpflow_fastvi.training.svi.svi_plan`), keyed to the progress of the ELBO estimate, and
the end of the run it decides.
"""

from typing import Any, List, Sequence

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
"""The shortest window of :class:`Plateau`, in passes: the mean of the last this many passes
against the mean of as many before them, when the estimates of single passes are precise enough
(:func:`plateau_window`)."""

PLATEAU_HALVINGS = 5
"""
How many times :class:`Plateau` halves the steps before the run has converged: ρ and Adam's rate
end at 1/32 of where they started, where their noise on q(u) and θ is a thirty-second of that of
the plateau the run started on.
"""

MAX_WINDOW = MAX_PASSES // (2 * (PLATEAU_HALVINGS + 1))
"""The longest window of :class:`Plateau`, in passes: long enough windows for every halving and
the last plateau fit in :data:`MAX_PASSES`."""


def pass_residuals(estimates: Sequence[float]) -> np.ndarray:
    """
    The residuals eₜ = xₜ − (xₜ₋₁ + xₜ₊₁)/2 of consecutive passes' mean ELBO estimates xₜ: each
    takes out a trend that is linear over three passes, and for independent noise of standard
    deviation σ per pass has variance 3σ²/2.
    """
    x = np.asarray(estimates, dtype=float)
    return x[1:-1] - (x[:-2] + x[2:]) / 2


def pass_noise(residuals: Sequence[float]) -> float:
    """
    The standard deviation σ of one pass's mean ELBO estimate about the run's trend, from its
    residuals (:func:`pass_residuals`): the median of the absolute eₜ is 0.6745 σ √1.5 for
    Gaussian noise, and is not pulled up by the few residuals of a fast rise or of a halving.
    """
    r = np.abs(np.asarray(residuals, dtype=float))
    if r.size == 0:
        raise ValueError("the noise of a pass needs at least one residual (three passes).")
    return float(np.median(r) / (0.6745 * np.sqrt(1.5)))


def plateau_window(noise: float, tol: float) -> int:
    """
    The passes per window of :class:`Plateau` for estimates of standard deviation ``noise`` per
    pass and a tolerance of ``tol`` nats per pass: the smallest w ≥ :data:`PLATEAU_PATIENCE` at
    which the difference of two windows' means, of standard deviation noise·√(2/w), is no noisier
    than the rise w·tol the test allows, so that a run still rising by more than ``tol`` per pass
    does not read as a plateau by chance: w ≥ (√2 noise / tol)^(2/3).

    Where a pass is a single batch the scatter is large against the tolerance: on 1,669 points
    of scikit-learn's ``make_classification`` (18 features, 50 inducing inputs, batches of
    1000, one step per pass) the estimates scattered by 12.7 nats about their trend against a
    tolerance of 0.17 nats per pass. Windows of three passes read that as five plateaus within 58
    steps while the full-data bound was still rising (−441 nats, on its way to −392) and the
    run ended with a test NLL of 0.145; windows of 23 passes ran 362 passes to 0.127. On 16,000
    points (16 batches per pass) it is three or four passes.
    """
    if not tol > 0:
        raise ValueError(f"the plateau tolerance must be positive; got {tol}.")
    needed = (np.sqrt(2.0) * max(noise, 0.0) / tol) ** (2.0 / 3.0)
    return int(min(MAX_WINDOW, max(PLATEAU_PATIENCE, np.ceil(needed))))


class Plateau:
    """
    The step-size schedule of ``fit``'s SVI route: q(u)'s step ρ and Adam's rate for θ stay
    constant (:func:`~gpflow_fastvi.models.step_sizes.mini_batch_step_size`,
    :data:`DEFAULT_LEARNING_RATE`) while the passes over the data raise the mean mini-batch ELBO
    estimate, and both are halved at each plateau: when the mean estimate of the last w passes is
    no more than :data:`PLATEAU_TOL` nats per point per pass above that of the w passes before
    them. The window w is :data:`PLATEAU_PATIENCE` passes or, where the estimates of single
    passes scatter more (a pass of few batches), as many as it takes for the difference of the
    two means to be no noisier than the rise it is compared with (:func:`plateau_window`, with
    the scatter measured on the run's own passes, :func:`pass_noise`), so that the noise of the
    batches does not read as a plateau. A constant step moves fast and then jitters around the
    optimum at a distance set by its size; each halving takes that distance down, and after
    :data:`PLATEAU_HALVINGS` of them the run has converged. Nothing to tune: the schedule is
    keyed to the progress of the objective, not to a count of steps.

    :param svi: the :class:`~gpflow_fastvi.NaturalGradientSVI` whose steps it halves
        (``svi.scale_steps``).
    :param points: the number of training points, which the ELBO sums over.
    """

    def __init__(self, svi: Any, points: int):
        self.svi = svi
        self.tol = PLATEAU_TOL * points
        self.passes: List[float] = []  # the mean estimates of the passes since the last halving
        self.residuals: List[float] = []  # of every pass of the run (pass_residuals)
        self.halvings = 0

    def window(self) -> int:
        """The passes per window now: :data:`PLATEAU_PATIENCE` until the run has residuals to
        measure its noise by, then :func:`plateau_window` of that noise."""
        if not self.residuals:
            return PLATEAU_PATIENCE
        return plateau_window(pass_noise(self.residuals), self.tol)

    def after_pass(self, estimate: float) -> bool:
        """Record a pass's mean ELBO estimate; return whether the run has converged."""
        self.passes.append(estimate)
        if len(self.passes) >= 3:
            self.residuals.extend(pass_residuals(self.passes[-3:]).tolist())
        window = self.window()
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
