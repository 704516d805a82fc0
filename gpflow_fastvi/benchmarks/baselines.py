"""
The GPflow baselines of a comparison: :class:`gpflow.models.SVGP` trained by
:class:`gpflow.optimizers.Scipy` (``"SVGP + Scipy"``), by mini-batch Adam (``"SVGP + Adam"``) and
by natural-gradient steps on q(u) with Adam on the hyperparameters (``"SVGP + NatGrad + Adam"``).

They start from the same kernel, likelihood and fixed inducing inputs as the fast methods and
return learning curves of the same rows; see :mod:`gpflow_fastvi.benchmarks.methods`. TensorFlow
and GPflow are imported with this module.
"""

from typing import Any, Callable, Iterator, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from .choices import SCIPY_NAME
from .harness import (
    TrainingClock,
    advance_progress,
    labels_for,
    make_kernel,
    make_likelihood,
    metrics_function,
    progress_bar,
)
from .result import LearningCurve

ADAM_EVALUATIONS = 100
"""SVGP + Adam and SVGP + NatGrad + Adam are evaluated at about this many times, spaced evenly on a
log time axis."""

NATGRAD_GAMMA = 0.1
"""The natural-gradient step size of SVGP + NatGrad + Adam."""


def make_svgp(
    X: np.ndarray, Z: np.ndarray, train_inducing: bool, num_classes: int = 2, method: str = ""
) -> gpflow.models.SVGP:
    """An SVGP for the inputs ``X`` from the shared start, its inducing inputs starting at ``Z``
    and trained with the hyperparameters or held fixed; for C > 2 classes one latent GP per class
    and ``method``'s C-class likelihood (see :func:`~.harness.make_likelihood`)."""
    model = gpflow.models.SVGP(
        make_kernel(X.shape[1]),
        make_likelihood(num_classes, method),
        inducing_variable=gpflow.inducing_variables.InducingPoints(Z.copy()),
        num_data=X.shape[0],
        num_latent_gps=1 if num_classes == 2 else num_classes,
    )
    gpflow.set_trainable(model.inducing_variable, train_inducing)
    return model


def _tensors(
    model: gpflow.models.SVGP, data: Tuple[np.ndarray, np.ndarray]
) -> Tuple[tf.Tensor, tf.Tensor]:
    """``data`` as constants, the labels as the model's likelihood takes them."""
    return tf.constant(data[0]), tf.constant(labels_for(model.likelihood, data[1]))


def _svgp_elbo(
    model: gpflow.models.SVGP, data_tensors: Tuple[tf.Tensor, tf.Tensor]
) -> Optional[Callable[[], tf.Tensor]]:
    """SVGP's ELBO on the training data for a binary comparison; None for C > 2 classes, whose
    methods differ in their likelihoods, so that their ELBOs are not one quantity."""
    if model.num_latent_gps > 1:
        return None
    return lambda: model.elbo(data_tensors)


def run_svgp_scipy(
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    progress: bool,
    *,
    train_inducing: bool = True,
    restart: bool = False,
    num_classes: int = 2,
) -> LearningCurve:
    """
    SVGP + Scipy: L-BFGS-B over q(u) and the hyperparameters on the full ``data``, evaluated on
    ``test`` after every iteration, until it converges or ``time_budget`` seconds have passed.

    :param restart: call Scipy again each time L-BFGS-B stops by its own test, until a call no
        longer raises the ELBO by more than 10⁻⁷ relative: SVGP trained to convergence. (From the
        benchmark start on banana a single call stops after 17 iterations, at an ELBO 22 % below
        the optimum, on the relative reduction of the loss; a second call goes on to it.)
    :param num_classes: C; for C > 2, GPflow's ``MultiClass`` likelihood with C latent GPs.
    """
    model = make_svgp(data[0], Z, train_inducing, num_classes, SCIPY_NAME)
    data_tensors = _tensors(model, data)
    metrics = metrics_function(model, _svgp_elbo(model, data_tensors), *test)
    rows: LearningCurve = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = progress_bar(progress, SCIPY_NAME, time_budget)

    clock = TrainingClock()

    def step_callback(step: int, variables: Sequence[tf.Variable], values: Sequence[Any]) -> None:
        elapsed = clock.elapsed()
        with clock.paused():
            # Evaluate at the accepted iterate, not at the last point the line search tried.
            for variable, value in zip(variables, values):
                variable.assign(value)
            rows.append({"iteration": len(rows), "time": elapsed, **metrics()})  # over calls
            advance_progress(bar, elapsed)
        if elapsed >= time_budget:
            raise StopIteration  # SciPy >= 1.11 ends the optimisation cleanly on this

    loss = model.training_loss_closure(data_tensors, compile=True)

    def objective() -> float:
        """The loss the restart test reads; its evaluations are not training."""
        with clock.paused():
            return float(loss().numpy())

    while True:
        before = objective() if restart else 0.0
        gpflow.optimizers.Scipy().minimize(
            loss,
            model.trainable_variables,
            method="L-BFGS-B",
            step_callback=step_callback,
            compile=True,
            options=dict(maxiter=10**7, maxfun=10**7),
        )
        if not restart or rows[-1]["time"] >= time_budget:
            break
        after = objective()
        if before - after <= 1e-7 * abs(after):
            break
    if bar is not None:
        bar.close()
    return rows


StepFactory = Callable[
    [gpflow.models.SVGP, Iterator[Tuple[tf.Tensor, tf.Tensor]]], Callable[[], None]
]
"""Makes a mini-batch method's optimisation step from the model and an endless batch iterator."""


def run_svgp_minibatch(
    method: str,
    make_step: StepFactory,
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    batch_size: int,
    seed: int,
    progress: bool,
    train_inducing: bool = True,
    num_classes: int = 2,
) -> LearningCurve:
    """
    Train an SVGP with ``make_step``'s step on shuffled mini-batches until the budget ends, and
    evaluate it about :data:`ADAM_EVALUATIONS` times, evenly spaced on a log time axis. For
    ``num_classes`` C > 2 the SVGP has C latent GPs and GPflow's ``Softmax`` likelihood.
    """
    X, _ = data
    N = X.shape[0]
    model = make_svgp(X, Z, train_inducing, num_classes, method)
    data_tensors = _tensors(model, data)
    metrics = metrics_function(model, _svgp_elbo(model, data_tensors), *test)
    rows: LearningCurve = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = progress_bar(progress, method, time_budget)

    clock = TrainingClock()  # compilation of the first step counts as training time
    dataset = (
        tf.data.Dataset.from_tensor_slices(data_tensors)
        .shuffle(N, seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(min(batch_size, N))
        .prefetch(tf.data.AUTOTUNE)
    )
    optimisation_step = make_step(model, iter(dataset))

    step = 0
    next_checkpoint = 0
    checkpoints = np.empty(0)
    while True:
        try:
            optimisation_step()
        except tf.errors.InvalidArgumentError as error:
            # NaN parameters or a failed factorisation: the method diverged. Keep what it reached
            # and say where it failed, rather than losing every method's results.
            message = error.message
            reason = (
                "NaN in the parameters"
                if "NaN" in message
                else "a Cholesky factorisation failed" if "Cholesky" in message else message
            )
            reason = reason.strip().splitlines()[0]
            rows[-1]["failed"] = f"step {step + 1}, {clock.elapsed():.1f} s: {reason}"
            break
        step += 1
        elapsed = clock.elapsed()
        if step == 1:
            # Evaluate when the clock passes each of these times: from the end of the first step
            # (which includes compilation) to the budget, evenly spaced on a log time axis.
            checkpoints = np.geomspace(elapsed, max(elapsed, time_budget), ADAM_EVALUATIONS)
        finished = elapsed >= time_budget
        if finished or elapsed >= checkpoints[next_checkpoint]:
            with clock.paused():
                rows.append({"iteration": step, "time": elapsed, **metrics()})
                advance_progress(bar, elapsed)
            next_checkpoint = int(np.searchsorted(checkpoints, elapsed, side="right"))
            finished = finished or next_checkpoint == len(checkpoints)
        if finished:
            break
    if bar is not None:
        bar.close()
    return rows


def adam_step(adam_lr: float) -> StepFactory:
    """SVGP + Adam: one Adam step on every trainable variable, q(u) included."""

    def make_step(
        model: gpflow.models.SVGP, batches: Iterator[Tuple[tf.Tensor, tf.Tensor]]
    ) -> Callable[[], None]:
        training_loss = model.training_loss_closure(batches, compile=True)
        optimizer = gpflow.keras.tf_keras.optimizers.Adam(adam_lr)

        @tf.function  # as a GPflow user writes it
        def optimisation_step() -> None:
            optimizer.minimize(training_loss, model.trainable_variables)

        return optimisation_step

    return make_step


def natgrad_adam_step(adam_lr: float) -> StepFactory:
    """
    SVGP + NatGrad + Adam: a natural-gradient step on (q_mu, q_sqrt), which are taken out of the
    trainable variables, then an Adam step on the rest (the hyperparameters), on the same batch.
    """

    def make_step(
        model: gpflow.models.SVGP, batches: Iterator[Tuple[tf.Tensor, tf.Tensor]]
    ) -> Callable[[], None]:
        gpflow.set_trainable(model.q_mu, False)
        gpflow.set_trainable(model.q_sqrt, False)
        natgrad = gpflow.optimizers.NaturalGradient(gamma=NATGRAD_GAMMA)
        adam = gpflow.keras.tf_keras.optimizers.Adam(adam_lr)

        @tf.function  # as in GPflow's natural-gradient notebook, with one batch for both steps
        def optimisation_step() -> None:
            batch = next(batches)

            def training_loss() -> tf.Tensor:
                return model.training_loss(batch)

            natgrad.minimize(training_loss, [(model.q_mu, model.q_sqrt)])
            adam.minimize(training_loss, model.trainable_variables)

        return optimisation_step

    return make_step


__all__ = [
    "ADAM_EVALUATIONS",
    "NATGRAD_GAMMA",
    "StepFactory",
    "adam_step",
    "make_svgp",
    "natgrad_adam_step",
    "run_svgp_minibatch",
    "run_svgp_scipy",
]
