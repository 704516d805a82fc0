"""
The ``compare`` job: the fast methods of this package against GPflow's SVGP, on one data set, for
the same wall-clock budget.

:func:`run_comparison` checks its inputs, places the inducing inputs, warms every chosen method up
and then trains each in turn from the same start (see :mod:`gpflow_fastvi.benchmarks.methods` for
the methods and :mod:`gpflow_fastvi.benchmarks.baselines` for the SVGP baselines), and returns a
:class:`~gpflow_fastvi.benchmarks.result.ComparisonResult` of their learning curves.
``gpflow-fastvi compare`` runs it on one data set; ``gpflow-fastvi bench`` on each benchmark set
(:mod:`gpflow_fastvi.benchmarks.runs`).

TensorFlow and GPflow are imported with this module; keep it out of ``gpflow_fastvi/__init__.py``.
"""

import argparse
import os
from typing import Callable, Dict, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import get_enable_check_shapes

from ..exceptions import InvalidDataError
from ..validation import check_data
from .baselines import ADAM_EVALUATIONS, NATGRAD_GAMMA
from .choices import (
    ALL_METHODS,
    BATCH_SIZE,
    COMPARE_INDUCING,
    COMPARE_TIME_BUDGET,
    DEFAULT_ADAM_LR,
    DEFAULT_METHODS,
    DEFAULT_MULTICLASS_METHODS,
    MULTICLASS_METHODS,
    NATGRAD_NAME,
    PG_NAME,
    adam_learning_rate,
    adam_method,
)
from .cli_args import shows_progress
from .harness import likelihood_name
from .methods import method_runners, pg_batch_size, pg_steps_per_iteration, warm_up
from .result import ComparisonResult, LearningCurve


def check_inputs(
    X_train: np.ndarray,
    Y_train: np.ndarray,
    X_test: np.ndarray,
    Y_test: np.ndarray,
    num_classes: Optional[int] = None,
) -> Tuple[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], int]:
    """
    The data as float copies, checked by :func:`gpflow_fastvi.validation.check_data`, with the same
    features in both parts, and C, the number of classes: labels must be whole numbers in
    {0, ..., C − 1} (GPflow's baselines read them as given), C being ``num_classes`` or, when that
    is None, the largest label plus one (at least 2). Two classes are GPflow's Bernoulli
    convention {0, 1}; more are the classes of GPflow's ``Softmax`` and ``MultiClass``.
    """
    checked = []
    for name, X, Y in (("train", X_train, Y_train), ("test", X_test, Y_test)):
        try:
            X, Y = check_data((X, Y))
        except InvalidDataError as error:
            raise InvalidDataError(f"The {name} data: {error}") from error
        if not np.all((Y >= 0.0) & (Y == np.round(Y))):
            raise InvalidDataError(
                f"{name} labels must be class indices 0, 1, ... (0 or 1 for two classes, GPflow's "
                "Bernoulli convention); the loaders in gpflow_fastvi.datasets map any label "
                "values to them."
            )
        checked += [X, Y]
    X_train, Y_train, X_test, Y_test = checked
    if X_train.shape[1] != X_test.shape[1]:
        raise InvalidDataError(
            f"X_train has {X_train.shape[1]} features but X_test has {X_test.shape[1]}"
        )
    largest = int(max(Y_train.max(), Y_test.max()))
    if num_classes is None:
        num_classes = max(2, largest + 1)
    elif num_classes < 2 or largest >= num_classes:
        raise InvalidDataError(
            f"num_classes is {num_classes}, but the labels run to {largest}; labels must lie in "
            "{0, ..., num_classes - 1}, with num_classes at least 2"
        )
    return (X_train, Y_train, X_test, Y_test), num_classes


def default_methods(num_classes: int) -> Tuple[str, ...]:
    """The methods a comparison runs unless given others: those of
    :data:`~gpflow_fastvi.benchmarks.choices.DEFAULT_METHODS` for two classes, of
    :data:`~gpflow_fastvi.benchmarks.choices.DEFAULT_MULTICLASS_METHODS` for more."""
    return DEFAULT_METHODS if num_classes == 2 else DEFAULT_MULTICLASS_METHODS


def check_methods(methods: Sequence[str], num_classes: int = 2) -> Tuple[str, ...]:
    """
    ``methods`` as a tuple without repeats; a ValueError names any unknown one, and, for
    ``num_classes`` > 2, any that cannot take C classes (see
    :data:`~gpflow_fastvi.benchmarks.choices.MULTICLASS_METHODS`).
    """
    if isinstance(methods, str):
        methods = [methods]

    def outside(names: Sequence[str]) -> list:
        """The methods that are neither in ``names`` nor SVGP + Adam at some rate."""
        return [m for m in methods if m not in names and adam_learning_rate(m) is None]

    unknown = outside(ALL_METHODS)
    if unknown:
        raise ValueError(
            f"unknown method(s) {', '.join(map(repr, unknown))}; the methods are "
            f"{', '.join(map(repr, ALL_METHODS))}, or {adam_method(0.1)!r} for another Adam rate"
        )
    if not methods:
        raise ValueError(f"methods is empty; choose from {', '.join(map(repr, ALL_METHODS))}")
    if num_classes > 2:
        binary_only = outside(MULTICLASS_METHODS)
        if binary_only:
            raise ValueError(
                f"{', '.join(map(repr, binary_only))} cannot take {num_classes} classes; the "
                f"methods for more than two classes are {', '.join(map(repr, MULTICLASS_METHODS))}"
            )
    return tuple(dict.fromkeys(methods))


def run_comparison(
    X_train: np.ndarray,
    Y_train: np.ndarray,
    X_test: np.ndarray,
    Y_test: np.ndarray,
    *,
    methods: Optional[Sequence[str]] = None,
    num_inducing: int = COMPARE_INDUCING,
    time_budget: float = COMPARE_TIME_BUDGET,
    adam_lr: float = DEFAULT_ADAM_LR,
    batch_size: int = BATCH_SIZE,
    seed: int = 0,
    progress: bool = False,
    train_inducing: bool = True,
    num_classes: Optional[int] = None,
    scipy_to_convergence: bool = True,
    on_method_done: Optional[Callable[[str, LearningCurve], None]] = None,
) -> ComparisonResult:
    """
    Train each of ``methods`` on the same data from the same start, each for ``time_budget``
    seconds of training, and trace their test accuracy, test NLL and ELBO.

    A method may stop before its budget when its optimiser converges (the models trained by
    :func:`gpflow_fastvi.fit`, and SVGP + Scipy); the stochastic ones run until the budget ends.
    SVGP + Scipy is trained as a GPflow user trains it to their answer: GPflow's Scipy, called
    again each time L-BFGS-B stops by its own test until a call no longer lowers the loss (from
    k-means inducing inputs a single call often stops far short of it). Methods run one after
    the other, in the order given, on the same machine; run nothing else heavy meanwhile, as the
    times are wall-clock.

    With more than two classes every method takes its C-class likelihood (GPflow's ``Softmax``,
    except :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax` for PolyaGammaSVGP and GPflow's
    ``MultiClass`` for SVGP + Scipy; see :func:`~gpflow_fastvi.benchmarks.harness.make_likelihood`)
    and C latent GPs; the test NLL is −log of the true class's predicted probability, and the rows
    carry no ELBO, as the likelihoods' ELBOs are not one quantity.

    :param X_train: training inputs [N, D], preferably standardised (the lengthscales start at √D).
    :param Y_train: training labels [N, 1]: classes {0, 1}, or {0, ..., C − 1}.
    :param X_test: test inputs [T, D].
    :param Y_test: test labels [T, 1], the classes of ``Y_train``.
    :param methods: names from :data:`~gpflow_fastvi.benchmarks.choices.ALL_METHODS` (default
        :data:`~gpflow_fastvi.benchmarks.choices.DEFAULT_METHODS`: VIConcave, SVGP + Scipy and
        SVGP + Adam; for C > 2 classes
        :data:`~gpflow_fastvi.benchmarks.choices.DEFAULT_MULTICLASS_METHODS`: VIConcave,
        SVGP + Scipy and SVGP + Adam); repeats are dropped.
    :param num_inducing: M, the number of inducing inputs, placed by k-means on ``X_train``.
    :param train_inducing: every method trains the inducing inputs with the hyperparameters, as
        a GPflow user's SVGP does (the default); ``False`` holds them at the k-means centres for
        every method, the source papers' protocol.
    :param time_budget: training seconds per method (graph compilation included, evaluation not).
    :param adam_lr: Adam's learning rate: SVGP + Adam, and the hyperparameter steps of
        SVGP + NatGrad + Adam (PolyaGammaSVGP runs with its own defaults, as every model of the
        package does).
    :param batch_size: mini-batch size of SVGP + Adam and SVGP + NatGrad + Adam (PolyaGammaSVGP
        runs with its own default).
    :param seed: seeds k-means, TensorFlow and the mini-batch order.
    :param progress: show a progress bar per method.
    :param num_classes: C; None takes the largest label plus one (at least 2).
    :param scipy_to_convergence: ``False`` calls GPflow's Scipy once (as ``bench`` does).
    :param on_method_done: called as ``on_method_done(method, curve)`` as soon as each method has
        run, so that a caller can save what has finished.
    :raises ValueError: for an unknown method name, a method that cannot take the data's C
        classes, or bad data or settings.
    """
    (X_train, Y_train, X_test, Y_test), C = check_inputs(
        X_train, Y_train, X_test, Y_test, num_classes
    )
    methods = check_methods(default_methods(C) if methods is None else methods, C)
    N, D = X_train.shape
    if not 0 < num_inducing <= N:
        raise ValueError(f"num_inducing must be between 1 and N = {N}; got {num_inducing}")
    if not time_budget > 0.0:
        raise ValueError(f"time_budget must be positive; got {time_budget}")
    if not adam_lr > 0.0:
        raise ValueError(f"adam_lr must be positive; got {adam_lr}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")

    from gpflow_fastvi import kmeans_inducing_points

    Z = kmeans_inducing_points(X_train, num_inducing, seed=seed)
    data, test = (X_train, Y_train), (X_test, Y_test)
    warm_up(
        methods,
        data,
        test,
        Z,
        adam_lr=adam_lr,
        batch_size=batch_size,
        seed=seed,
        train_inducing=train_inducing,
        num_classes=C,
    )
    timed = method_runners(
        methods,
        data,
        test,
        Z,
        time_budget=time_budget,
        adam_lr=adam_lr,
        batch_size=batch_size,
        seed=seed,
        progress=progress,
        train_inducing=train_inducing,
        num_classes=C,
        scipy_to_convergence=scipy_to_convergence,
    )
    traces: Dict[str, LearningCurve] = {}
    for method in methods:
        tf.random.set_seed(seed)
        traces[method] = timed[method]()
        if on_method_done is not None:
            on_method_done(method, traces[method])
    settings = {
        "n_train": N,
        "n_test": X_test.shape[0],
        "d": D,
        "num_inducing": num_inducing,
        "time_budget": time_budget,
        "adam_lr": adam_lr,
        "batch_size": batch_size,
        "adam_evaluations": ADAM_EVALUATIONS,
        "methods": list(methods),
        "scipy_to_convergence": scipy_to_convergence,
        "seed": seed,
        **({"natgrad_gamma": NATGRAD_GAMMA} if NATGRAD_NAME in methods else {}),
        **(
            {
                "pg_batch_size": pg_batch_size(N),
                "pg_steps_per_iteration": pg_steps_per_iteration(N, pg_batch_size(N)),
            }
            if PG_NAME in methods
            else {}
        ),
        "kernel": "SquaredExponential, ARD, lengthscales sqrt(D), variance 1.0",
        "num_classes": C,
        "likelihood": (
            likelihood_name(2, "")
            if C == 2
            else {method: likelihood_name(C, method) for method in methods}
        ),
        "inducing_points": (
            "k-means on X_train, trained" if train_inducing else "k-means on X_train, fixed"
        ),
        "train_inducing": train_inducing,
        "check_shapes": get_enable_check_shapes().value,
        "gpflow": gpflow.__version__,
        "tensorflow": tf.__version__,
        "devices": [device.name for device in tf.config.list_logical_devices()],
    }
    return ComparisonResult(traces=traces, settings=settings)


# --------------------------------------------------------------------------------------------------
# ``gpflow-fastvi compare``
# --------------------------------------------------------------------------------------------------


def load_data(args: argparse.Namespace) -> Tuple[str, Tuple[np.ndarray, ...]]:
    """
    The name of the data set ``compare``'s arguments name and its standardised
    ``(X_train, Y_train, X_test, Y_test)``: the bundled banana set, one file split at random, or
    a training and a test file. A file may hold two classes or more (the classes of the training
    part, in increasing order of their values, become 0, ..., C − 1); prints which label became
    which class.
    """
    from ..datasets import load_banana, load_file, load_train_test, standardise, train_test_split

    if args.train is None:
        name = "banana (bundled)"
        X_train, Y_train, X_test, Y_test = train_test_split(
            *load_banana(), test_fraction=args.test_fraction, seed=args.seed
        )
        classes = (-1.0, 1.0)
    elif args.test is None:
        name = os.path.basename(args.train)
        X, Y, classes = load_file(
            args.train, args.label_column, return_classes=True, multiclass=True
        )
        X_train, Y_train, X_test, Y_test = train_test_split(
            X, Y, test_fraction=args.test_fraction, seed=args.seed
        )
    else:
        name = f"{os.path.basename(args.train)} / {os.path.basename(args.test)}"
        *split, classes = load_train_test(
            args.train, args.test, args.label_column, return_classes=True, multiclass=True
        )
        X_train, Y_train, X_test, Y_test = split
    if len(classes) == 2:
        negative, positive = classes
        print(f"labels: {negative!r} -> 0, {positive!r} -> 1 (the positive class)")
    else:
        mapping = ", ".join(f"{value!r} -> {index}" for index, value in enumerate(classes))
        print(f"labels: {len(classes)} classes, {mapping}")
    X_train, X_test = standardise(X_train, X_test)
    return name, (X_train, Y_train, X_test, Y_test)


def command(args: argparse.Namespace) -> int:
    """``gpflow-fastvi compare``: run the comparison, print its table, write its figure and traces."""
    name, (X_train, Y_train, X_test, Y_test) = load_data(args)
    n_train, d = X_train.shape
    # C as run_comparison infers it, from both parts (a split may leave a class in the test part only)
    _, C = check_inputs(X_train, Y_train, X_test, Y_test)
    if args.inducing > n_train:
        raise ValueError(f"--inducing {args.inducing} is more than the {n_train} training points")
    methods = args.methods
    if methods is None:
        methods = default_methods(C)
    elif C > 2 and methods == ALL_METHODS:  # --methods all: every method that takes C classes
        methods = MULTICLASS_METHODS
    methods = check_methods(methods, C)
    print(f"Data: {name}")
    print(f"n_train = {n_train}, n_test = {X_test.shape[0]}, d = {d}, m = {args.inducing}")
    if C > 2:
        likelihoods = "; ".join(f"{method}: {likelihood_name(C, method)}" for method in methods)
        print(f"Likelihoods: {likelihoods}")
    print(
        f"Time budget: {args.time_budget:g} s per method ({', '.join(methods)}). Training...",
        flush=True,
    )
    result = run_comparison(
        X_train,
        Y_train,
        X_test,
        Y_test,
        methods=methods,
        num_inducing=args.inducing,
        num_classes=C,
        time_budget=args.time_budget,
        adam_lr=args.adam_lr,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=shows_progress(args.progress),
        train_inducing=not args.fixed_inducing,
    )
    result.settings["dataset"] = name
    print()
    print(result.format_table())
    print()
    title = f"{name}: n = {n_train}, d = {d}, m = {args.inducing}" + (
        f", {C} classes" if C > 2 else ""
    )
    png_path, json_path = result.save(args.out, title=title)
    print(f"Wrote {png_path}")
    print(f"Wrote {json_path}")
    return 0


__all__ = ["check_methods", "default_methods", "command", "load_data", "run_comparison"]
