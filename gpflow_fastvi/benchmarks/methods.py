"""
The methods of a comparison: how each one is set up, trained, timed and evaluated.

:func:`method_runners` gives, per name of :data:`~gpflow_fastvi.benchmarks.choices.ALL_METHODS`
(and ``"SVGP + Adam (lr X)"``), a function that trains that method from the shared start and
returns its learning curve; :func:`~gpflow_fastvi.benchmarks.compare.run_comparison` runs them one
after the other. The fast methods, here:

* ``"VIJJ"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.VIJJ` (closed-form sites and q(u),
  L-BFGS on the collapsed bound in the hyperparameters);
* ``"VITaylor"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.VITaylor` (the same scheme
  with Taylor sites);
* ``"KLCorrected"``: :func:`gpflow_fastvi.fit` on a sparse :class:`~gpflow_fastvi.KLCorrected`
  (EM: closed-form q(f̄) and q(fₙ), L-BFGS on the KL-corrected bound in the hyperparameters);
* ``"PolyaGammaSVGP"``: :func:`gpflow_fastvi.fit` on :class:`~gpflow_fastvi.PolyaGammaSVGP`
  (mini-batch SVI: closed-form natural-gradient steps on q(u), Adam on the hyperparameters),
  evaluated about :data:`PG_EVALUATIONS_PER_PASS` times per pass over the data and run until the
  budget ends, as SVGP + Adam;
* ``"VIConcave"``: :func:`gpflow_fastvi.fit` on a sparse :class:`~gpflow_fastvi.VIConcave`
  (site steps that never lower the ELBO, L-BFGS on the ELBO at the optimal q(u) in the
  hyperparameters).

The baselines (their names start with ``"SVGP"``), in :mod:`gpflow_fastvi.benchmarks.baselines`:

* ``"SVGP + Scipy"``: :class:`gpflow.models.SVGP` trained full-batch by
  :class:`gpflow.optimizers.Scipy` (L-BFGS-B over q(u) and the hyperparameters);
* ``"SVGP + Adam"``: the same SVGP trained by mini-batch Adam (stochastic variational inference)
  at the learning rate ``adam_lr``; ``"SVGP + Adam (lr 0.1)"`` (see
  :func:`~gpflow_fastvi.benchmarks.choices.adam_method`) names the same method at another learning
  rate, so that one comparison can hold a grid of them;
* ``"SVGP + NatGrad + Adam"``: the same SVGP, each mini-batch step a
  :class:`gpflow.optimizers.NaturalGradient` step
  (γ = :data:`~gpflow_fastvi.benchmarks.baselines.NATGRAD_GAMMA`) on q(u) followed by an Adam step
  on the hyperparameters, both on the same mini-batch.

Shared set-up: a :class:`~gpflow.kernels.SquaredExponential` kernel with one lengthscale per input
dimension, all initialised at √D (the data are expected standardised, so that two points are about
√(2D) apart: at lengthscale 1 in 24 dimensions K is nearly diagonal, and on german every method
settles at the constant predictor), variance 1.0; the same k-means inducing inputs, trained with
the hyperparameters by every method (as a GPflow user's SVGP trains them) or held fixed by every
method (``train_inducing=False``, the source papers' protocol); the logit link, ``Bernoulli(invlink=tf.sigmoid)``; the same
mini-batch size and Adam learning rate for every SVGP mini-batch baseline; PolyaGammaSVGP, like the
other models, runs with its defaults (batches of 1000, the same Adam learning rate).

Each method's learning curve is a list of rows, ``{"iteration", "time", "test_accuracy",
"test_nll", "elbo"}``, starting with the untrained model at time 0. ``time`` is training wall-clock
seconds since the method started, graph compilation included and the evaluations themselves
excluded (the clock is paused while a row is computed). The ELBO is on the full training data and
is the same quantity for every method, GPflow's SVGP ELBO (by quadrature) at the method's q(u):
SVGP's own ELBO for the baselines; :meth:`VIJJ.elbo` and :meth:`VITaylor.elbo` for VIJJ and
VITaylor (for VIJJ it lies above the Jaakkola–Jordan bound VIJJ optimises; VITaylor's own objective
is an approximation, not a bound); ``gpflow.models.SVGP.elbo(model, data)`` for PolyaGammaSVGP,
whose own ``elbo`` is the closed-form Pólya-Gamma bound, which lies below it;
:meth:`KLCorrected.elbo` for KLCorrected (the SVGP ELBO of its predictive, the noise ε integrated
out).

TensorFlow and GPflow are imported with this module; keep it out of ``gpflow_fastvi/__init__.py``.
"""

import warnings
from typing import Any, Callable, Dict, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from .baselines import adam_step, natgrad_adam_step, run_svgp_minibatch, run_svgp_scipy
from .choices import (
    ADAM_NAME,
    KLC_NAME,
    NATGRAD_NAME,
    PG_NAME,
    SCIPY_NAME,
    VICONCAVE_NAME,
    VIJJ_NAME,
    VITAYLOR_NAME,
    adam_learning_rate,
)
from .harness import (
    TrainingClock,
    advance_progress,
    make_kernel,
    make_likelihood,
    metrics_function,
    progress_bar,
)
from .result import LearningCurve, Row

PG_EVALUATIONS_PER_PASS = 1
"""PolyaGammaSVGP is evaluated about this many times per pass over the training data (once every
N / (this · batch size) mini-batch steps, and at least once per step): with its default batches of
1000 a pass over ijcnn1 is about 50 steps, a quarter of a second."""

WARM_UP_BUDGET = 0.2
"""Seconds each method trains on a tiny slice of the data before any clock starts."""


# --------------------------------------------------------------------------------------------------
# The fast methods
# --------------------------------------------------------------------------------------------------


def run_data_holding_model(
    model_name: str,
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    progress: bool,
    train_inducing: bool = True,
    num_classes: int = 2,
) -> LearningCurve:
    """
    VIJJ, VITaylor, KLCorrected or VIConcave (``model_name``), trained by :func:`gpflow_fastvi.fit`
    with its defaults, its inducing inputs trained with the hyperparameters or held fixed. For
    ``num_classes`` C > 2 (VITaylor and VIConcave), GPflow's ``Softmax(C)`` with C latent GPs;
    the rows then carry no ELBO (see :func:`~.baselines.run_svgp_scipy`).
    """
    import gpflow_fastvi

    X, _ = data
    model_class = getattr(gpflow_fastvi, model_name)
    model = model_class(
        make_kernel(X.shape[1]),
        make_likelihood(num_classes, model_name),
        Z.copy(),
        train_inducing=train_inducing,
        num_latent_gps=1 if num_classes == 2 else num_classes,
        data=data,
    )
    metrics = metrics_function(model, model.elbo if num_classes == 2 else None, *test)
    initial = {"iteration": 0, "time": 0.0, **metrics()}
    trace = gpflow_fastvi.fit(
        model, time_budget=time_budget, callback=lambda _: metrics(), progress=progress
    )
    return [initial] + [dict(row) for row in trace.rows]


def pg_steps_per_iteration(N: int, batch_size: int) -> int:
    """Mini-batch steps between PolyaGammaSVGP evaluations: see :data:`PG_EVALUATIONS_PER_PASS`."""
    return max(1, N // (PG_EVALUATIONS_PER_PASS * batch_size))


def pg_batch_size(N: int) -> int:
    """PolyaGammaSVGP's mini-batch size in a comparison: its own default, as a user gets it."""
    from gpflow_fastvi.training.svi import DEFAULT_BATCH_SIZE

    return min(DEFAULT_BATCH_SIZE, N)


def run_polya_gamma(
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    time_budget: float,
    seed: int,
    progress: bool,
    train_inducing: bool = True,
    num_classes: int = 2,
) -> LearningCurve:
    """
    PolyaGammaSVGP, trained by :func:`gpflow_fastvi.fit` with its defaults (mini-batches, step size
    ρ and Adam's learning rate for the hyperparameters) until ``time_budget`` seconds have passed.
    For ``num_classes`` C > 2, :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax` with C latent
    GPs, and rows without an ELBO.
    """
    from gpflow_fastvi import PolyaGammaSVGP, fit

    X, Y = data
    N = X.shape[0]
    model = PolyaGammaSVGP(
        make_kernel(X.shape[1]),
        make_likelihood(num_classes, PG_NAME),
        gpflow.inducing_variables.InducingPoints(Z.copy()),
        num_data=N,
        train_inducing=train_inducing,
        num_latent_gps=1 if num_classes == 2 else num_classes,
    )
    data_tensors = (tf.constant(X), tf.constant(Y))
    # SVGP's quadrature ELBO at this q(u), comparable with the baselines' (the model's own elbo is
    # the Pólya-Gamma bound, which lies below it).
    elbo = (lambda: gpflow.models.SVGP.elbo(model, data_tensors)) if num_classes == 2 else None
    metrics = metrics_function(model, elbo, *test)
    rows: LearningCurve = [{"iteration": 0, "time": 0.0, **metrics()}]
    bar = progress_bar(progress, PG_NAME, time_budget)

    # fit() keeps its own training time; this clock (paused likewise) only drives the progress bar.
    clock = TrainingClock()

    def callback(_: Any) -> Row:
        elapsed = clock.elapsed()
        with clock.paused():
            row = metrics()
            advance_progress(bar, elapsed)
        return row

    trace = fit(
        model,
        data,
        steps_per_iteration=pg_steps_per_iteration(N, pg_batch_size(N)),
        seed=seed,
        max_iter=10**9,  # run until the budget ends, as SVGP + Adam: the estimates are noisy,
        tol=0.0,  # so a change-of-objective test would stop it at random
        time_budget=time_budget,
        callback=callback,
    )
    if bar is not None:
        bar.close()
    return rows + [dict(row) for row in trace.rows]


# --------------------------------------------------------------------------------------------------
# Every method, ready to run
# --------------------------------------------------------------------------------------------------


def method_runners(
    methods: Sequence[str],
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    *,
    time_budget: float,
    adam_lr: float,
    batch_size: int,
    seed: int,
    progress: bool,
    train_inducing: bool = True,
    num_classes: int = 2,
    scipy_to_convergence: bool = False,
) -> Dict[str, Callable[[], LearningCurve]]:
    """
    Per method name, a function that trains that method from the shared start on ``data`` with
    the fixed inducing inputs ``Z`` for ``time_budget`` seconds, and returns its learning curve on
    ``test``: every name of :data:`~gpflow_fastvi.benchmarks.choices.ALL_METHODS`, and those of
    ``methods`` that name SVGP + Adam at another learning rate.

    :param adam_lr: Adam's learning rate: SVGP + Adam, and the hyperparameter steps of
        SVGP + NatGrad + Adam (PolyaGammaSVGP runs with its own default,
        :data:`gpflow_fastvi.training.svi.DEFAULT_LEARNING_RATE`).
    :param batch_size: mini-batch size of the SVGP mini-batch baselines (PolyaGammaSVGP runs with
        its own default, :func:`pg_batch_size`).
    :param seed: seeds the mini-batch order.
    :param progress: show a progress bar per method.
    :param train_inducing: every method trains its inducing inputs, from ``Z``, with the
        hyperparameters (as a GPflow user's SVGP does); ``False`` holds them fixed for every
        method (the source papers' protocol).
    :param num_classes: C, the number of classes of the labels; for C > 2 every method takes its
        C-class likelihood (see :func:`~.harness.make_likelihood`), and only the methods of
        :data:`~gpflow_fastvi.benchmarks.choices.MULTICLASS_METHODS` can run.
    :param scipy_to_convergence: SVGP + Scipy calls GPflow's Scipy again each time L-BFGS-B stops
        by its own test, until a call no longer lowers the loss (``restart`` of
        :func:`~.baselines.run_svgp_scipy`), as a user who sees it stop short does; else once.
    """
    minibatch = (
        data,
        test,
        Z,
        time_budget,
        batch_size,
        seed,
        progress,
        train_inducing,
        num_classes,
    )

    def adam_runner(method: str, learning_rate: float) -> Callable[[], LearningCurve]:
        """SVGP + Adam at ``learning_rate``, run under the name ``method``."""
        return lambda: run_svgp_minibatch(method, adam_step(learning_rate), *minibatch)

    def fast(model_name: str) -> Callable[[], LearningCurve]:
        return lambda: run_data_holding_model(
            model_name, data, test, Z, time_budget, progress, train_inducing, num_classes
        )

    return {
        VIJJ_NAME: fast("VIJJ"),
        VITAYLOR_NAME: fast("VITaylor"),
        KLC_NAME: fast("KLCorrected"),
        PG_NAME: lambda: run_polya_gamma(
            data, test, Z, time_budget, seed, progress, train_inducing, num_classes
        ),
        VICONCAVE_NAME: fast("VIConcave"),
        SCIPY_NAME: lambda: run_svgp_scipy(
            data,
            test,
            Z,
            time_budget,
            progress,
            train_inducing=train_inducing,
            restart=scipy_to_convergence,
            num_classes=num_classes,
        ),
        ADAM_NAME: lambda: run_svgp_minibatch(ADAM_NAME, adam_step(adam_lr), *minibatch),
        NATGRAD_NAME: lambda: run_svgp_minibatch(
            NATGRAD_NAME, natgrad_adam_step(adam_lr), *minibatch
        ),
        **{
            method: adam_runner(method, learning_rate)
            for method in methods
            if (learning_rate := adam_learning_rate(method)) is not None
        },
    }


def warm_up(
    methods: Sequence[str],
    data: Tuple[np.ndarray, np.ndarray],
    test: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    *,
    adam_lr: float,
    batch_size: int,
    seed: int,
    train_inducing: bool = True,
    num_classes: int = 2,
) -> None:
    """
    Pay the process's one-off costs before any clock starts, so that they are not charged to
    whichever method happens to run first: TensorFlow's start-up (kernel registration, thread
    pools) and the first use of each code path (GPflow's conditionals, Keras optimisers, SciPy).
    Each of ``methods`` is run for :data:`WARM_UP_BUDGET` seconds on the first 64 points of
    ``data`` and ``test`` and the first 8 inducing inputs of ``Z``, without progress bars; the
    results are discarded. Every method builds its own models and compiles its own functions again
    in the timed run, as a user's fresh model would.
    """
    tiny = method_runners(
        methods,
        (data[0][:64], data[1][:64]),
        (test[0][:64], test[1][:64]),
        Z[:8],
        time_budget=WARM_UP_BUDGET,
        adam_lr=adam_lr,
        batch_size=batch_size,
        seed=seed,
        progress=False,
        train_inducing=train_inducing,
        num_classes=num_classes,
    )
    with warnings.catch_warnings():  # the slice may lack a class, of which fit warns
        warnings.simplefilter("ignore")
        for method in methods:
            tiny[method]()


__all__ = [
    "PG_EVALUATIONS_PER_PASS",
    "WARM_UP_BUDGET",
    "method_runners",
    "pg_batch_size",
    "pg_steps_per_iteration",
    "run_data_holding_model",
    "run_polya_gamma",
    "warm_up",
]
