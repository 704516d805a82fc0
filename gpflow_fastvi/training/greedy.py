"""
Titsias's alternating scheme: greedy inducing inputs between rounds of training
(:cite:t:`titsias2009variational`; Algorithm 2 of the notes in the references).

A round selects the M inducing inputs greedily among the training inputs
(:func:`~gpflow_fastvi.greedy_inducing_points`) at the current hyperparameters, then trains. For
GPflow's :class:`~gpflow.models.SGPR` the training is the paper's own: L-BFGS-B on the kernel's
hyperparameters θ with the noise variance σ² fixed, then σ² in closed form
(:func:`titsias_plan`). For this package's classification models it is the model's own route,
and the selection weights the trace term by the sites' precisions at the current q(u)
(:meth:`~gpflow_fastvi.models.site_model.SiteModel._site_precisions`): points the likelihood pins
firmly count more.
"""

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import gpflow
import tensorflow as tf

from ..distribution import set_trainable
from ..exceptions import UnsupportedConfigurationError
from ..gaussian import separate_outputs, single_output_parts
from ..inducing import greedy_inducing_points
from ..validation import check_data, positive_int
from .plans import LBFGSStage, TrainingPlan
from .snapshot import Snapshot


def titsias_plan(
    model: gpflow.models.SGPR,
    *,
    inducing_selected: bool = False,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> TrainingPlan:
    """
    One outer iteration: L-BFGS-B on SGPR's bound over the trainable parameters other than the
    likelihood's variance (to convergence, warm-started), then the variance set to its optimum
    for the current optimal q(u),

        σ² = (1/N) Σᵢ E_q[(yᵢ − fᵢ)²] = (1/N) Σᵢ ((yᵢ − E fᵢ)² + Var fᵢ),

    with q(f) SGPR's own predictive at the training inputs. Each half raises the bound (the σ²
    step is an EM step: it maximises the uncollapsed bound at fixed q(u), and collapsing again
    can only add), so the objective, SGPR's ELBO, never falls. A σ² made non-trainable with
    :func:`gpflow.set_trainable` is left alone.

    :param inducing_selected: the inducing inputs are the greedy selection's (``greedy_rounds``),
        so L-BFGS-B leaves them where they are, as in the paper, even where GPflow made them
        trainable; otherwise they are optimised if they are trainable.
    """
    check_regression_model(model)
    variance = model.likelihood.variance
    X, Y = model.data
    held = {id(variance.unconstrained_variable)}
    if inducing_selected:
        held |= {id(v) for v in model.inducing_variable.trainable_variables}
    hyperparameters = [v for v in model.trainable_variables if id(v) not in held]

    def loss() -> tf.Tensor:
        return model.training_loss()

    lbfgs = (
        LBFGSStage(loss, hyperparameters, None, parameters=model.trainable_parameters)
        if hyperparameters
        else None
    )
    lower = float(getattr(model.likelihood, "variance_lower_bound", 0.0) or 0.0)

    @tf.function(autograph=False)
    def noise_step() -> tf.Tensor:
        Fmu, Fvar = model.predict_f(X)
        optimum = tf.reduce_mean(tf.square(Y - Fmu) + Fvar)
        variance.assign(tf.maximum(optimum, lower * (1.0 + 1e-6)))
        return model.elbo()

    def step() -> float:
        if lbfgs is not None:
            lbfgs()
        if variance.trainable:
            return float(noise_step())
        return float(model.elbo())

    return TrainingPlan.from_step(step, max_iter=max_iter, tol=tol)


def check_regression_model(model: gpflow.models.SGPR) -> None:
    """A clear error unless ``model`` is an SGPR with scalar (homoscedastic) Gaussian noise."""
    likelihood = model.likelihood
    variance = getattr(likelihood, "variance", None)  # a Parameter, or a function of X
    if (
        type(likelihood) is not gpflow.likelihoods.Gaussian
        or variance is None
        or variance.shape.rank != 0
    ):
        raise TypeError(
            "fit() trains an SGPR by Titsias's scheme, whose closed-form noise step needs "
            "gpflow.likelihoods.Gaussian with one scalar variance; got "
            f"{type(likelihood).__name__}. Train this model with gpflow.optimizers.Scipy."
        )


def alternate_with_greedy_selection(
    model: Any,
    data: Any,
    train: Callable[[Optional[float]], Any],
    *,
    rounds: int,
    working_set_size: Optional[int],
    time_budget: Optional[float],
) -> Any:
    """
    ``rounds`` times: select the inducing inputs greedily among the training inputs (weighted by
    the sites' precisions for a site model), then ``train(time_left)`` (a :func:`run_plan` call
    returning a :class:`~gpflow_fastvi.Trace`). The rounds' traces are joined into one, each row
    marked with its ``round``, its ``iteration`` and ``time`` counted from the first round, the
    selections' time included; the last round's ``stop_reason`` is the trace's. A time budget is
    shared by all the rounds.

    The selection shrinks one term of the bound, not the bound itself, so a round can end lower
    than the one before it (tutorial 05: banana, M = 16, unit starting lengthscales, the second
    round ended 3.7 nats below the first). A round is kept only if it ends with a higher
    objective than every round before it; otherwise the model goes back to the best round's end
    (its inducing inputs, hyperparameters and q(u)) and the rounds stop there, with
    ``stop_reason`` ``"converged"``.

    The inducing inputs are the selection's: each round trains with them held fixed (whatever the
    model's ``train_inducing``), and their ``trainable`` flag is put back when the rounds end.
    """
    rounds = positive_int(rounds, "greedy_rounds")
    if data is None:
        data = model.data
    if not isinstance(data, (tuple, list)):
        raise TypeError(
            "greedy_rounds selects the inducing inputs among the training inputs, so it needs the "
            f"data in memory as (X, Y); got {type(data).__name__}."
        )
    # One column per output for a model of the package; GPflow's SGPR, one output.
    X, Y = check_data(data, getattr(model, "_target_columns", 1))
    if separate_outputs(model.kernel, model.inducing_variable):
        raise UnsupportedConfigurationError(
            "greedy_rounds selects one set of inducing inputs for every latent function; this "
            f"model has a kernel or inducing inputs of each output's own "
            f"({type(model.kernel).__name__}, {type(model.inducing_variable).__name__})."
        )
    kernel, points = single_output_parts(model.kernel, model.inducing_variable)
    M = points.Z.shape[0]
    with _inducing_inputs_held(model):
        joined = None
        elapsed = 0.0
        best: Optional[Snapshot] = None  # the model at the end of the best round so far
        best_objective = -float("inf")
        for r in range(rounds):
            if time_budget is not None and elapsed >= time_budget:
                break
            started = time.perf_counter()
            is_sgpr = isinstance(model, gpflow.models.SGPR)  # Gaussian noise: every site alike
            weights = None if is_sgpr else model._site_precisions((X, Y))
            Z = greedy_inducing_points(
                X, kernel, M, working_set_size=working_set_size, weights=weights, seed=r
            )
            if is_sgpr:  # no q(u) to carry: SGPR's is optimal for any Z
                points.Z.assign(Z)
            else:
                model._move_inducing_inputs(Z)
            elapsed += time.perf_counter() - started
            trace = train(None if time_budget is None else max(time_budget - elapsed, 1e-9))
            for row in trace.rows:
                row["round"] = r + 1
                row["time"] += elapsed
            if joined is None:
                joined = trace
            else:
                for row in trace.rows:
                    row["iteration"] += len(joined.rows)
                joined.rows.extend(trace.rows)
                joined.stop_reason = trace.stop_reason
            if trace.rows:
                elapsed = joined.rows[-1]["time"]
                objective = trace.rows[-1]["objective"]
                if best is not None and objective <= best_objective:
                    best.restore()
                    joined.stop_reason = "converged"
                    break
                best, best_objective = Snapshot(model), objective
            if trace.stop_reason in ("interrupted", "time_budget"):
                break
        return joined


@contextmanager
def _inducing_inputs_held(model: Any) -> Iterator[None]:
    """The model's inducing inputs not trainable inside the block, their flag as it was after."""
    Z_parameter = single_output_parts(model.kernel, model.inducing_variable)[1].Z
    trainable = Z_parameter.trainable
    set_trainable(Z_parameter, False)
    try:
        yield
    finally:
        set_trainable(Z_parameter, trainable)
