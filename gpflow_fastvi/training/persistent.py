"""
One persistent L-BFGS-B run over the hyperparameters, with the sites stepped in closed form
between accepted iterates: the driver of routes declared ``Route("persistent", ...)``.

The paper's vi-JJ (:func:`~gpflow_fastvi.training.plans.alternating_plan`) restarts L-BFGS-B
every few evaluations, and with it the curvature memory, which with many ARD lengthscales is most
of what L-BFGS knows. Here SciPy's L-BFGS-B runs once, for the whole fit:

- every evaluation at a trial θ starts from the sites of the last *accepted* iterate (read off
  its q(u); with the data in memory the run keeps their local parameters, so that a trial θ
  need not project the data a second time to read them), takes ``n_upd`` closed-form site steps
  (each a pass that forms the optimal q(u) of the sites and reads the next sites off it) and
  returns the collapsed bound of the last sites with its θ-gradient at them, together with their
  optimal q(u) (:meth:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel._stepped_sites`), from one
  Kmm factor and one projection, assigning nothing;
- at every accepted iterate (SciPy's callback) the model adopts the q(u) of
  that iterate (:meth:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel._adopt`), kept from its
  evaluation rather than computed again: the site step stays an explicit step whose state
  follows accepted iterates, not part of the loss, and costs nothing beyond the evaluations.
  That is one outer iteration, one row of :func:`~gpflow_fastvi.fit`'s trace.

L-BFGS-B's curvature pairs then span objectives whose sites have moved since, and it can end by
itself (a stalled line search, or a tiny change it takes for convergence) well short of the
optimum. It is then started again from where it stopped, with a fresh memory, and the run has
converged only when a fresh start takes at most one step, or when the objective has changed by
at most the tolerance per iteration, on average over the last ten outer iterations
(:data:`TOL`, :data:`PATIENCE`).

Each L-BFGS-B run starts with the last evaluation when that was made where it starts (after the
warm start, and after a run that ended by itself at the point it evaluated last): that is the
value and gradient at an accepted iterate before the model adopted its sites, which is what
L-BFGS-B measures every later trial against anyway, so evaluating there again would only repeat a
pass. Once the time budget is spent the run also ends between two evaluations of a line search,
at the last accepted iterate, rather than after a line search that may take many.

For a bound maximised over its sites (VIJJ) the gradient with the sites held fixed is, by the
envelope theorem, the gradient of the bound maximised over the sites; between iterations the
objective only rises as the sites move, so L-BFGS-B's line search sees a function that changes
slowly in its favour.
"""

from typing import List, Optional, Tuple

import numpy as np
import scipy.optimize
import tensorflow as tf
from gpflow.base import RegressionData

from ..models import ClosedFormSiteModel
from ..types import CheckedData, Data, SteppedSites
from ..validation import positive_int
from .compiled import CompiledStep
from .plans import LBFGSStage, Report, TrainingPlan

PATIENCE = 10
"""The window of the persistent route's convergence test, in outer iterations (L-BFGS-B steps)."""

TOL = 5e-5
"""
The persistent route's default tolerance: the run has converged when the objective has risen by
at most this many nats per training point per iteration, on average over the last
:data:`PATIENCE` iterations. The test figures have stopped moving by then, and a tighter
tolerance buys a change in the third decimal of the test NLL for several times the time
(:ref:`defaults-persistent-tol`).
"""

WARM_START_TOL = 1e-2
"""
For a model whose objective is not a bound (VITaylor), closed-form site steps at the starting θ
before L-BFGS-B starts, until the objective changes by at most this fraction of itself from one
evaluation to the next (or :data:`WARM_START_MAX_STEPS`). The gradient holds the sites fixed,
which is the objective's gradient only near the sites' optimum, so a gradient taken while the
sites are still far from it (an overshoot of exp(f) under a Poisson likelihood, or the slow
settling of C classes from q(u) = p(u)) can leave L-BFGS-B's first line search without a descent
direction. A model of C latent functions warm-starts too, bound or not. A bound with one latent
function (VIJJ, KLCorrected) starts L-BFGS-B at once: its steps are coordinate ascent on the
bound, so the objective only rises while they settle. The figures behind the tolerance and the
choice of models are in :ref:`defaults-warm-start`.
"""

WARM_START_MAX_STEPS = 50
"""The most evaluations (each ``n_upd`` closed-form steps) of the warm start (:data:`WARM_START_TOL`)."""


def persistent_plan(
    model: ClosedFormSiteModel,
    data: Optional[RegressionData] = None,
    *,
    n_upd: int = 3,
    max_iter: int = 10_000,
    tol: float = TOL,
) -> TrainingPlan:
    """
    The plan of the module docstring: one outer iteration is one accepted L-BFGS-B iterate, after
    which the model adopts the sites and q(u) stepped ``n_upd`` times at it.

    :param data: ``(X, Y)``, or ``None`` for the data the model holds.
    :param n_upd: closed-form site steps per evaluation, each a pass over the data: the first
        through the sites of the last accepted iterate, the others through sites read at the
        trial θ. The default 3 is the best of 2, 3 and 4 for VIJJ and VITaylor together in time
        to the benchmark's target on ijcnn1 (:ref:`defaults-n-upd`).
    :param tol: stop when the objective has changed by at most ``tol`` nats per training point
        per iteration over the last :data:`PATIENCE` (ten) iterations (an iteration here is one
        L-BFGS-B step, not a burst of five, and an occasional one is tiny far from the optimum).
    """
    n_upd = positive_int(n_upd, "n_upd")
    data = model._passes.training_data(data)  # checked and converted once, for every evaluation
    # The starting q(u) is read at the starting θ until the first iterate is accepted, whichever θ
    # L-BFGS-B tries, in memory as streamed.
    model._start_frame_here()
    if not list(model.trainable_variables):  # nothing for L-BFGS-B: closed-form steps only
        closed_form = tf.function(
            lambda: model.update_sites(num_updates=n_upd, data=data), autograph=False
        )
        return TrainingPlan.from_step(lambda: float(closed_form()), max_iter=max_iter, tol=tol)
    run = PersistentRun(model, data, n_upd)
    return TrainingPlan(iterate=run.iterate, max_iter=max_iter, tol=tol, patience=PATIENCE)


class PersistentRun:
    """
    The state of one persistent run (module docstring): its L-BFGS-B stage, and with the data in
    memory the local parameters of the last accepted sites, which belong to the run, not to the
    model.
    """

    def __init__(self, model: ClosedFormSiteModel, data: Data, n_upd: int):
        self.model, self.data, self.n_upd = model, data, n_upd
        # With the data in memory, the run keeps the local parameters of the last accepted sites:
        # a trial θ then starts from them rather than reading them off q(u) where it was set,
        # which costs a second projection of the data. A stream, or a strategy's replicas (each
        # projecting its own rows), read them again. In memory, too, the data are the loss's
        # argument and the compiled steps are shared with every run of the same signature (the
        # next fold, the next model of a grid); a stream is read through the run, and its graphs
        # are the run's own.
        in_memory = model._projects_all_at_once(data)
        # Without num_data, all the rows a step is given are all the data, whatever their number,
        # and the steps of models that differ in nothing else share a signature: TensorFlow
        # traces the first number of rows as given, and one graph for any number from the second
        # on (the folds of a cross-validation, which differ by a point, and the refit on all of
        # them). The kept sites are variables of any number of rows for that: their shapes
        # enter the signature. With num_data set, the number of rows is baked in.
        any_rows = in_memory and model.num_data is None
        self.accepted_sites: Optional[List[tf.Variable]] = None
        if in_memory:
            # A pass over the data: compiled and shared as the loss is, not run op by op.
            read = CompiledStep(
                "PersistentRun.site_parameters",
                lambda *arrays: model._site_parameters(CheckedData(*arrays)),
                roots=(model,),
            )
            self.accepted_sites = [
                tf.Variable(p, trainable=False, shape=[None, *p.shape[1:]] if any_rows else None)
                for p in read(*data)
            ]
        self.lbfgs = LBFGSStage(
            self.loss,
            list(model.trainable_variables),
            maxfun=None,
            has_aux=True,
            parameters=model.trainable_parameters,
            start_from_last=True,
            inputs=data if in_memory else (),
            shared_over=(model, self.accepted_sites) if in_memory else None,
            key=("persistent", n_upd),
        )
        # Adopting the sites assigns some dozen variables (q(u), its frame, the kept sites):
        # compiled, it is one call rather than as many eager assignments through the transforms.
        self._adopt = CompiledStep(
            "PersistentRun.adopt",
            self._adopted,
            roots=(model, self.accepted_sites),
            shared=in_memory,
        )

    def loss(self, *data: tf.Tensor) -> Tuple[tf.Tensor, SteppedSites]:
        """−(objective + log prior) after ``n_upd`` steps from the last accepted sites, with the
        stepped sites as L-BFGS-B's auxiliary output; ``data`` is ``(X, Y)``, or none for the
        data of the run."""
        start = None if self.accepted_sites is None else tuple(self.accepted_sites)
        stepped = self.model._stepped_sites(
            self.n_upd, CheckedData(*data) if data else self.data, site_parameters=start
        )
        return -(stepped.objective + self.model.log_prior_density()), stepped

    def step_sites(self, x: Optional[np.ndarray] = None) -> SteppedSites:
        """Adopt the stepped sites at θ = x (the variables' values), from the last evaluation
        when it was at x, which is the usual case: L-BFGS-B accepts the last point it tried."""
        lbfgs = self.lbfgs
        if x is None or lbfgs.last_x is None or not np.array_equal(x, lbfgs.last_x):
            lbfgs.evaluate()
        stepped: SteppedSites = lbfgs.last_aux
        self._adopt(stepped)
        return stepped

    def _adopted(self, stepped: SteppedSites) -> None:
        self.model._adopt(stepped)
        if self.accepted_sites is not None:
            for variable, value in zip(self.accepted_sites, stepped.site_parameters):
                variable.assign(value)

    def report_sites(self, report: Report, x: Optional[np.ndarray] = None) -> bool:
        """Adopt the stepped sites at θ = x (:meth:`step_sites`) and report them, with the SVGP
        ELBO the evaluation computed for the watch when it did; returns whether to go on."""
        return report(*self._reported(self.step_sites(x)))

    @staticmethod
    def _reported(stepped: SteppedSites) -> Tuple[float, Optional[float]]:
        """The objective and yardstick a row records of ``stepped``."""
        yardstick = None if stepped.yardstick is None else float(stepped.yardstick)
        return float(stepped.objective), yardstick

    def warm_start(self, report: Report) -> bool:
        """
        Adopt stepped sites at the starting θ until they settle (:data:`WARM_START_TOL`), by
        the compiled evaluation L-BFGS-B uses (no second function to trace), each reported as
        an outer iteration: the model's state moves on at each, and the first row comes after
        one evaluation, not after all of them. Returns whether to go on.
        """
        previous = None
        for _ in range(WARM_START_MAX_STEPS):
            objective, yardstick = self._reported(self.step_sites())
            if not report(objective, yardstick=yardstick):
                return False
            if previous is not None and abs(objective - previous) <= WARM_START_TOL * max(
                1.0, abs(objective)
            ):
                return True
            previous = objective
        return True

    def iterate(self, report: Report) -> Optional[str]:
        """
        The plan's outer iterations: L-BFGS-B, reporting after each accepted iterate, started
        again from where it ended by itself until a fresh start takes at most one step.
        """
        reported = False  # whether the run has a row yet
        if not self.model._objective_is_bound or self.model.num_latent_gps > 1:
            # the sites and q(u) of the starting θ
            if not self.warm_start(report):
                return None
            reported = True
        stopped = False  # whether ``report`` ended the run
        steps = 0

        def accepted(intermediate: scipy.optimize.OptimizeResult) -> None:
            nonlocal stopped, steps, reported
            steps += 1
            reported = True
            if not self.report_sites(report, intermediate.x):
                stopped = True
                raise StopIteration

        def out_of_time() -> bool:
            """Out of time mid line search, once the run has a row: end at the accepted
            iterate."""
            return reported and report.out_of_time()

        restarted = False
        while True:
            steps = 0
            result = self.lbfgs(callback=accepted, out_of_time=out_of_time)
            # When ``report`` stopped the run, run_plan has its reason already.
            if stopped:
                return None
            if result.get("out_of_time", False):
                # Mid line search: the model is at the last accepted iterate, its row recorded.
                return "time_budget"
            # L-BFGS-B ended by itself. Its curvature pairs span objectives whose sites have
            # since moved, so it may stall short of the optimum: start it again. A fresh start
            # that cannot take a second step is convergence, even when its line search failed:
            # the gradient holds the stepped sites fixed, so near the optimum it is only as exact
            # as the site steps, and no descent is left to find at that accuracy. The very first
            # run may fail to step for the same reason (a model trained already; inducing inputs
            # just moved, fit(greedy_rounds=...)): it gets one start again, from the sites
            # stepped where it stands, recorded as a row.
            if steps <= 1:
                if not reported:
                    reported = True
                    if not self.report_sites(report):
                        return None
                if result.success or restarted:
                    return None
            restarted = True
