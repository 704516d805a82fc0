"""
Stochastic variational inference with closed-form natural-gradient steps on q(u)
(:cite:t:`hoffman2013stochastic`, :cite:t:`hensman2013gaussian`; for Pólya-Gamma sites
:cite:t:`wenzel2019efficient`).

One step on a mini-batch of s out of n points:

1. the model's :meth:`~gpflow_fastvi.models.site_model.SiteModel.natural_gradient_step`: the sites'
   local parameters (Pólya-Gamma cᵢ) are set in closed form for the current q(u), and q(u) takes a
   natural-gradient step of size ρₜ towards the batch's closed-form optimum scaled by n/s;
2. the hyperparameters (and any other trainable variable except ``q_mu``/``q_sqrt``) take an Adam
   step on the batch's ELBO at the new q(u), which that step returns.

Both run in one compiled function that is traced once: batches enter through an input
signature with an unknown batch size, and ρₜ is computed in the graph from a step counter.
"""

from typing import Any, Callable, List, Optional, Sequence, Set, Tuple, Union

import gpflow
import numpy as np
import tensorflow as tf

from ..distribution import (
    apply_gradients_outside_replicas,
    gradients_outside_replicas,
    scope_of,
    strategy_in_scope,
    watch_outside_replicas,
)
from ..models import SiteModel
from ..models.step_sizes import AVERAGED_POINTS, mini_batch_step_size
from ..validation import batch_tensors, positive_int
from .batches import DEFAULT_BATCH_SIZE, batches_from_arrays, batches_from_dataset
from .compiled import CompiledStep
from .log_scale import dx_dz, is_softplus, log_softplus, on_softplus, softplus_of_log
from .plans import Report, TrainingPlan
from .plateau import MAX_PASSES, Plateau

StepSize = Union[float, Callable[[tf.Tensor], tf.Tensor]]
"""A constant ρ ∈ (0, 1], or a schedule t ↦ ρₜ of the step count t = 0, 1, 2, …"""

DEFAULT_LEARNING_RATE = 0.1
"""
:func:`svi_plan`'s Adam learning rate for the hyperparameters when none is given. q(u) takes its
own closed-form natural-gradient step towards the optimum at the current hyperparameters, so Adam
only moves θ, and a rate that would make SVGP + Adam diverge (its q(u) moving by Adam too) stays
stable, and of 0.01, 0.03 and 0.1 it reached the benchmark's target soonest on every set with
no worse a final test NLL (:ref:`defaults-svi-learning-rate`). Kernel variances and lengthscales
take the rate in log scale (``log_scale``), where 0.1 is a change of about 10 % per step.
:class:`NaturalGradientSVI`, whose default ρ is Robbins–Monro (q(u) lags the hyperparameters
more), keeps 0.01.
"""


class RobbinsMonro:
    r"""
    The step-size schedule ρₜ = (t + τ)^(−κ), t = 0, 1, 2, … (:cite:t:`hoffman2013stochastic`).

    With κ ∈ (½, 1], Σ ρₜ = ∞ and Σ ρₜ² < ∞, the Robbins–Monro conditions under which SVI
    converges. With τ = 1 the first step lands on the first batch's closed-form optimum and later
    steps average over more and more batches.
    """

    def __init__(self, tau: float = 1.0, kappa: float = 0.6):
        if not tau >= 1.0:
            raise ValueError(f"tau must be at least 1 (so that every ρ ≤ 1); got {tau}.")
        if not 0.5 < kappa <= 1.0:
            raise ValueError(f"kappa must lie in (0.5, 1] (Robbins–Monro conditions); got {kappa}.")
        self.tau = float(tau)
        self.kappa = float(kappa)

    def __call__(self, t: tf.Tensor) -> tf.Tensor:
        t = tf.cast(t, gpflow.config.default_float())
        return tf.pow(t + self.tau, -self.kappa)

    def __repr__(self) -> str:
        return f"RobbinsMonro(tau={self.tau}, kappa={self.kappa})"


def input_units(X: Any) -> tf.Tensor:
    """
    The units [D] of the columns of the inputs X [N, D] in which :class:`NaturalGradientSVI`
    steps the inducing inputs: each column's standard deviation; for a column without spread
    (one row, or one value) its largest absolute value, or 1 if that is 0 too.

    Adam steps each coordinate by about its learning rate in the units the coordinate is in: on
    GPflow's Z a step of 0.1 is a tenth of the spread of standardised inputs, and 10⁵ times the
    spread of inputs of 10⁻⁶, which takes the inducing inputs far from the data. In these units a
    step is the same share of each column's spread in any units of X, and a run the same, step
    for step; for standardised inputs the units are 1.
    """
    X = tf.convert_to_tensor(X, dtype=gpflow.config.default_float())
    units = tf.math.reduce_std(X, axis=0)
    units = tf.where(units > 0, units, tf.reduce_max(tf.abs(X), axis=0))
    return tf.where(units > 0, units, tf.ones_like(units))


def _step_size_function(step_size: StepSize) -> Callable[[tf.Tensor], tf.Tensor]:
    if callable(step_size):
        return step_size
    if isinstance(step_size, (int, float, np.floating)) and 0.0 < step_size <= 1.0:
        rho = float(step_size)
        return lambda t: tf.constant(rho, dtype=gpflow.config.default_float())
    raise ValueError(
        f"step_size must be a number in (0, 1] or a schedule t -> rho_t; got {step_size!r}."
    )


class NaturalGradientSVI:
    """
    The SVI step of the module docstring for any model of the package (a
    :class:`~gpflow_fastvi.models.site_model.SiteModel`, such as
    :class:`~gpflow_fastvi.PolyaGammaSVGP`), to call in your own loop::

        svi = NaturalGradientSVI(model)
        for batch in dataset:            # (X [s, D], Y [s, 1]) mini-batches
            elbo_estimate = svi.step(batch)

    :func:`gpflow_fastvi.fit` wraps the same object with a data pipeline, a trace and a budget.

    :param model: the model; ``q_mu`` and ``q_sqrt`` are set by the natural-gradient step and left
        out of Adam whether or not they are marked trainable.
    :param step_size: ρ for q(u): a constant in (0, 1] or a schedule t ↦ ρₜ; default
        :class:`RobbinsMonro`. With the full batch, ρ = 1 is exact coordinate ascent.
    :param learning_rate: Adam's learning rate for the hyperparameters.
    :param optimizer: a Keras optimiser to use instead of Adam (``gpflow.keras.tf_keras``); for
        a model built in a :mod:`tf.distribute` strategy's scope, made in that scope too.
    :param log_scale: step each positive parameter on GPflow's softplus transform (kernel
        variances, lengthscales) in z = log s (:mod:`~gpflow_fastvi.training.log_scale`), so that
        a step changes it by about the same factor whatever its size, and each column of the
        inducing inputs in units of the spread of that column of X (:func:`input_units`, from
        the inputs :meth:`measure_inputs` is given, by default the first batch stepped on), so
        that a step moves them by the same share of the inputs' extent in any units of X;
        ``False`` steps GPflow's unconstrained values, as GPflow's own Adam loop does. The
        optimiser gets the gradient in the coordinates it searches, and the step it takes is
        carried back to the variable, so its state needs no second set of variables.
    """

    def __init__(
        self,
        model: SiteModel,
        *,
        step_size: Optional[StepSize] = None,
        learning_rate: float = 0.01,
        optimizer: Optional[Any] = None,
        log_scale: bool = True,
    ):
        if not isinstance(model, SiteModel):
            raise TypeError(
                "NaturalGradientSVI needs a gpflow_fastvi model with Gaussian sites (such as "
                f"PolyaGammaSVGP); got {type(model).__name__}."
            )
        self.model = model
        self.rho = _step_size_function(RobbinsMonro() if step_size is None else step_size)
        """The step-size schedule as used: ``rho(t)`` is ρₜ, a float64 tensor, for step t = 0, 1, ..."""
        q_ids = {id(model.q_mu.unconstrained_variable), id(model.q_sqrt.unconstrained_variable)}
        self.variables: List[tf.Variable] = [
            v for v in model.trainable_variables if id(v) not in q_ids
        ]
        logged = on_softplus(model.trainable_parameters) if log_scale else set()
        self.in_log_scale = [id(v) in logged for v in self.variables]
        """Which of :attr:`variables` are stepped in log scale."""
        located = _inducing_input_ids(model.inducing_variable) if log_scale else set()
        self.units: List[Optional[tf.Variable]] = [
            (
                tf.Variable(tf.ones([1, v.shape[1]], v.dtype), trainable=False, name="svi_units")
                if id(v) in located
                else None
            )
            for v in self.variables
        ]
        """For each of :attr:`variables`, the units [1, D] its columns are stepped in (the
        inducing inputs, :meth:`measure_inputs`), or ``None``."""
        self.inputs_measured = tf.Variable(not located, trainable=False, name="svi_measured")
        """Whether :attr:`units` are set; if not, the next step sets them from its batch."""
        # Keras keeps the slots of variables created in a strategy's scope only when the
        # optimiser is made and built in that scope too.
        with scope_of(self.variables):
            self.optimizer = optimizer or gpflow.keras.tf_keras.optimizers.Adam(learning_rate)
            if self.variables and hasattr(self.optimizer, "build"):
                # Create Adam's slots now: variables created inside the first trace make
                # TensorFlow trace the step a second time.
                self.optimizer.build(self.variables)
        self.iteration = tf.Variable(0, dtype=tf.int64, trainable=False, name="svi_iteration")
        dtype = gpflow.config.default_float()
        self.step_scale = tf.Variable(1.0, dtype=dtype, trainable=False, name="svi_step_scale")
        """What ρ is multiplied by (:meth:`scale_steps`)."""
        # Shared by every SVI of the same signature (compiled.py): what the step reads is the
        # model, this object's own variables and schedule, and the optimiser's state and settings.
        optimizer = self.optimizer
        optimizer_state = (
            type(optimizer),
            optimizer.get_config(),
            list(optimizer.variables),
            # The learning rate, a variable beside the slots (scale_steps assigns it).
            [v for _, v in sorted(vars(optimizer).items()) if isinstance(v, tf.Variable)],
        )
        own = (
            self.rho,
            self.in_log_scale,
            self.units,
            self.inputs_measured,
            self.iteration,
            self.step_scale,
        )
        self._compiled_step = CompiledStep(
            "NaturalGradientSVI.step",
            self._step,
            roots=(model, own, optimizer_state),
            shared=strategy_in_scope() is None and model._passes.pass_strategy() is None,
            # A batch is a mini-batch whatever its size (the last one of a pass may be shorter).
            rows_unknown=True,
        )

    def _step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        model = self.model
        if any(c is not None for c in self.units):
            tf.cond(self.inputs_measured, tf.no_op, lambda: self.measure_inputs(X))
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            watch_outside_replicas(tape, self.variables)
            rho = self.rho(self.iteration) * self.step_scale
            elbo = model.natural_gradient_step((X, Y), rho)
            loss = -elbo - model.log_prior_density()
        if self.variables:
            gradients = gradients_outside_replicas(tape, loss, self.variables)
            self._apply(gradients)
        self.iteration.assign_add(1)
        return elbo

    def _apply(self, gradients: Sequence[tf.Tensor]) -> None:
        """
        The optimiser's step on the hyperparameters; for those in log scale it is given the
        gradient in z = log s, and the change it makes to the variable is taken as the step in z:
        x ← x(z(x₀) + Δ), with x₀ the value before. For the inducing inputs, in units c of their
        columns, the gradient in Z / c, and the step Δ so taken moves Z by c Δ.
        """
        searched = zip(self.variables, self.in_log_scale, self.units)
        before = [(v, tf.identity(v), log, c) for v, log, c in searched if log or c is not None]
        gradients = [
            g * dx_dz(v) if log else g if c is None else g * c
            for g, v, log, c in zip(gradients, self.variables, self.in_log_scale, self.units)
        ]
        apply_gradients_outside_replicas(self.optimizer, gradients, self.variables)
        for variable, x0, log, c in before:
            step = variable - x0
            variable.assign(softplus_of_log(log_softplus(x0) + step) if log else x0 + c * step)

    def measure_inputs(self, X: Any) -> Optional[tf.Operation]:
        """Step the inducing inputs in the units of the columns of the inputs X [N, D]
        (:func:`input_units`) from now on; :meth:`step` takes them from its first batch unless
        this was called before. Returns the assignments as one op in a graph (``None``
        eagerly, where they are done)."""
        units = input_units(X)[None, :]
        assigned = [c.assign(tf.cast(units, c.dtype)) for c in self.units if c is not None]
        with tf.control_dependencies(assigned):
            # tf.group, not .op: a variable of a strategy's scope, assigned eagerly, has none.
            return tf.group(self.inputs_measured.assign(True))

    def scale_steps(self, factor: float) -> None:
        """Multiply the step on q(u) (ρ) and the optimiser's learning rate by ``factor``, from the
        next step on, without tracing the step again."""
        self.step_scale.assign(self.step_scale * factor)
        if self.variables:
            rate = self.optimizer.learning_rate
            self.optimizer.learning_rate = float(tf.convert_to_tensor(rate)) * factor

    def step(self, batch: Tuple[Any, Any]) -> tf.Tensor:
        """
        One SVI step on ``batch`` = (X [s, D], Y [s, 1]); returns the batch's ELBO estimate at the
        new q(u), before the hyperparameter step.
        """
        return self._compiled_step(*batch_tensors(batch))


def _inducing_input_ids(inducing_variable: Any) -> Set[int]:
    """The ids of the variables of the trainable inducing inputs Z [M, D] of
    ``inducing_variable`` (rank 2, not on a softplus transform)."""
    return {
        id(p.unconstrained_variable)
        for p in inducing_variable.trainable_parameters
        if p.unconstrained_variable.shape.rank == 2 and not is_softplus(p.transform)
    }


# --------------------------------------------------------------------------------------------------
# The plan fit() runs (its batches: :mod:`~gpflow_fastvi.training.batches`)


def svi_plan(
    model: SiteModel,
    data: Any,
    *,
    batch_size: Optional[int] = None,
    step_size: Optional[StepSize] = None,
    learning_rate: Optional[float] = None,
    steps_per_iteration: Optional[int] = None,
    seed: int = 0,
    plateau: bool = True,
) -> TrainingPlan:
    """
    Natural-gradient SVI as :func:`gpflow_fastvi.fit` runs it; one outer iteration (one row of the
    trace) is ``steps_per_iteration`` SVI steps, by default one pass over the data.

    :param data: ``(X, Y)`` arrays, or a ``tf.data.Dataset`` of ``(X, Y)`` pairs, single points
        (then give ``batch_size``) or batches; it is repeated as needed.
    :param batch_size: mini-batch size for arrays, default ``DEFAULT_BATCH_SIZE`` (1000); a size
        ≥ N uses every point in every step. For a ``tf.data.Dataset`` of single points, the size of
        its batches; leave it out for a dataset that is already batched.
    :param step_size: ρ for q(u); default ρ = 1 with the full batch (exact coordinate ascent) and
        the constant ``mini_batch_step_size(batch_size)`` for mini-batches; for an
        already batched ``tf.data.Dataset``, whose batch size is not known here,
        :class:`RobbinsMonro`.
    :param learning_rate: Adam's learning rate for the hyperparameters; default
        :data:`DEFAULT_LEARNING_RATE` (0.1).
    :param seed: seeds the shuffling of arrays.
    :param plateau: with mini-batches, follow :class:`Plateau` (the default); ``False`` keeps
        the steps constant and runs until ``fit``'s ``max_iter`` or ``time_budget``.

    The objective recorded per iteration is the mean of the mini-batch ELBO estimates of its steps.
    With the full batch the run ends when it changes by at most 5·10⁻⁶ nats per point (at most
    1000 iterations). With mini-batches, whose estimates can agree by chance long before q(u) has
    settled, the steps follow :class:`Plateau`, which ends the run once it has halved them
    :data:`~gpflow_fastvi.training.plateau.PLATEAU_HALVINGS` times (at most
    :data:`~gpflow_fastvi.training.plateau.MAX_PASSES` iterations); a ``step_size`` or
    ``learning_rate`` given is where the halvings start.
    """
    batch_size = positive_int(batch_size, "batch_size", optional=True)
    X = None
    if isinstance(data, tf.data.Dataset):
        batches, per_epoch = batches_from_dataset(model, data, batch_size)
        full_batch = False
    else:
        if batch_size is None:
            batch_size = DEFAULT_BATCH_SIZE
        batches, X, full_batch = batches_from_arrays(model, data, batch_size, seed)
        per_epoch = 1 if full_batch else len(X) // batch_size
    if step_size is None and full_batch:
        step_size = 1.0
    elif step_size is None and batch_size is not None:
        step_size = mini_batch_step_size(batch_size)
    steps = positive_int(steps_per_iteration, "steps_per_iteration", optional=True)
    steps = steps or per_epoch or 100
    if learning_rate is None:
        learning_rate = DEFAULT_LEARNING_RATE
    svi = NaturalGradientSVI(model, step_size=step_size, learning_rate=learning_rate)
    if X is not None:
        svi.measure_inputs(X)  # all the inputs, not a batch's sample of them

    def step() -> float:
        estimates = [svi.step(next(batches)) for _ in range(int(steps))]
        return float(tf.add_n(estimates)) / len(estimates)

    if full_batch:
        return TrainingPlan.from_step(step, max_iter=1000, tol=5e-6)
    num_data = model.num_data
    assert num_data is not None  # checked above
    schedule = Plateau(svi, int(num_data)) if plateau else None
    # The schedule judges whole passes, however many steps an iteration (a row) takes.
    steps_per_pass = per_epoch or steps

    def iterate(report: Report) -> Optional[str]:
        pass_estimates: List[float] = []
        while True:
            estimate = step()
            if not report(estimate):
                return None
            pass_estimates += [estimate] * int(steps)
            if schedule is not None and len(pass_estimates) >= steps_per_pass:
                if schedule.after_pass(float(np.mean(pass_estimates))):
                    return None
                pass_estimates = []

    return TrainingPlan(
        iterate=iterate,
        max_iter=MAX_PASSES if plateau else 100,
        tol=0.0,
        exact_objective=False,
    )


__all__ = [
    "AVERAGED_POINTS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LEARNING_RATE",
    "NaturalGradientSVI",
    "RobbinsMonro",
    "StepSize",
    "input_units",
    "mini_batch_step_size",
    "svi_plan",
]
