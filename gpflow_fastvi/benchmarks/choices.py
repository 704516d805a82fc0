"""
The names and defaults of the benchmark jobs, in one place that loads no TensorFlow.

The console script (:mod:`gpflow_fastvi.cli`) offers these as choices and shows these defaults in
``gpflow-fastvi --help`` without loading TensorFlow or GPflow; the jobs themselves
(:mod:`~gpflow_fastvi.benchmarks.compare`, :mod:`~gpflow_fastvi.benchmarks.runs`,
:mod:`~gpflow_fastvi.benchmarks.scaling`, :mod:`~gpflow_fastvi.benchmarks.kl_correction`) take
them from here too, so nothing is written twice. Beyond the standard library this module imports
only :mod:`gpflow_fastvi.datasets` (NumPy), whose registry names the benchmark sets.
"""

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..datasets import BENCHMARK_SETS, DATA_DIR_VARIABLE

# --------------------------------------------------------------------------------------------------
# The methods of a comparison
# --------------------------------------------------------------------------------------------------

VIJJ_NAME = "VIJJ"
VITAYLOR_NAME = "VITaylor"
KLC_NAME = "KLCorrected"
PG_NAME = "PolyaGammaSVGP"
VICONCAVE_NAME = "VIConcave"
SCIPY_NAME = "SVGP + Scipy"
ADAM_NAME = "SVGP + Adam"
NATGRAD_NAME = "SVGP + NatGrad + Adam"
ALL_METHODS: Tuple[str, ...] = (
    VIJJ_NAME,
    VITAYLOR_NAME,
    KLC_NAME,
    PG_NAME,
    VICONCAVE_NAME,
    SCIPY_NAME,
    ADAM_NAME,
    NATGRAD_NAME,
)
"""Every method :func:`~gpflow_fastvi.benchmarks.compare.run_comparison` knows, fast ones first,
then the SVGP baselines (and ``"SVGP + Adam (lr X)"`` for any learning rate X; see
:func:`adam_method`)."""
DEFAULT_METHODS: Tuple[str, ...] = (VICONCAVE_NAME, SCIPY_NAME, ADAM_NAME)
"""The methods :func:`~gpflow_fastvi.benchmarks.compare.run_comparison` runs unless given
``methods``."""
FAST_METHODS: Tuple[str, ...] = (VIJJ_NAME, VITAYLOR_NAME, KLC_NAME, PG_NAME, VICONCAVE_NAME)
"""The methods of this package; the table gives their time-to-target ratios against baselines."""
BASELINE_PREFIX = "SVGP"
"""Methods whose names start with this are GPflow baselines."""
MULTICLASS_METHODS: Tuple[str, ...] = (
    VITAYLOR_NAME,
    VICONCAVE_NAME,
    PG_NAME,
    SCIPY_NAME,
    ADAM_NAME,
    NATGRAD_NAME,
)
"""The methods of a comparison on C > 2 classes (and ``"SVGP + Adam (lr X)"``): the models that
take C classes, and every baseline. Each uses a C-class likelihood; see
:func:`~gpflow_fastvi.benchmarks.harness.make_likelihood`."""
DEFAULT_MULTICLASS_METHODS: Tuple[str, ...] = (VICONCAVE_NAME, SCIPY_NAME, ADAM_NAME)
"""The methods ``compare`` runs on a data file of more than two classes unless given
``--methods``."""


def adam_method(learning_rate: float) -> str:
    """The name of SVGP + Adam at ``learning_rate``, e.g. ``"SVGP + Adam (lr 0.001)"``."""
    return f"{ADAM_NAME} (lr {learning_rate:g})"


def adam_learning_rate(method: str) -> Optional[float]:
    """The learning rate named by :func:`adam_method`'s ``method``; None for any other name."""
    prefix, suffix = f"{ADAM_NAME} (lr ", ")"
    if not (method.startswith(prefix) and method.endswith(suffix)):
        return None
    try:
        learning_rate = float(method[len(prefix) : -len(suffix)])
    except ValueError:
        return None
    return learning_rate if learning_rate > 0.0 else None


# --------------------------------------------------------------------------------------------------
# Defaults of ``compare`` (and of the runs of ``bench``)
# --------------------------------------------------------------------------------------------------

COMPARE_OUT = "compare-output"
"""The default output folder of ``gpflow-fastvi compare``."""
COMPARE_INDUCING = 50
"""The default number of inducing inputs of ``compare``."""
TIME_BUDGET = 60.0
"""The default training seconds per method and run of ``bench``."""
COMPARE_TIME_BUDGET = 45.0
"""The default training seconds per method of ``compare``: its three default methods, the
process's start and the warm-up fit in three minutes on two cores."""
BATCH_SIZE = 100
"""The default mini-batch size of the stochastic methods, of ``compare`` and ``bench``."""
DEFAULT_ADAM_LR = 0.01
"""Adam's default learning rate; in ``bench``, SVGP + Adam's plain default, always in the grid."""
TEST_FRACTION = 0.2
"""The share of the data ``compare`` holds out for testing when given no test file."""

# --------------------------------------------------------------------------------------------------
# ``bench``
# --------------------------------------------------------------------------------------------------

BENCH_OUT = "bench-output"
"""The default output folder of ``gpflow-fastvi bench``."""
BENCH_MODELS: Tuple[str, ...] = ALL_METHODS
"""What ``bench --models`` chooses from: the package's models, then the GPflow baselines."""
BENCH_SET_NAMES: Tuple[str, ...] = tuple(BENCHMARK_SETS)
"""The names of :data:`gpflow_fastvi.datasets.BENCHMARK_SETS`, in its order."""
BENCH_DEFAULT_SETS: Tuple[str, ...] = ("german", "svmguide1", "banana", "ijcnn1", "a9a")
"""The sets of the benchmark page."""
BENCH_INDUCING = 100
"""The default number of inducing inputs of ``bench``."""
ADAM_GRID: Tuple[float, ...] = (0.001, 0.01, 0.1)
"""The learning rates ``bench`` runs SVGP + Adam at; the report takes the best."""

# --------------------------------------------------------------------------------------------------
# ``scaling``
# --------------------------------------------------------------------------------------------------

SCALING_OUT = "scaling-output"
"""The default output folder of ``gpflow-fastvi scaling``."""
SCALING_N: Tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
"""The numbers of points n timed at m = :data:`SCALING_FIXED_M`."""
SCALING_M: Tuple[int, ...] = (25, 50, 100, 200, 400, 800)
"""The numbers of inducing inputs m timed at n = :data:`SCALING_FIXED_N`."""
SCALING_FIXED_M = 100
"""m while n varies."""
SCALING_FIXED_N = 10_000
"""n while m varies."""
SCALING_REPEATS = 3
"""Timed calls per (n, m)."""

# --------------------------------------------------------------------------------------------------
# ``kl-correction``
# --------------------------------------------------------------------------------------------------

KL_CORRECTION_OUT = "kl-correction-output"
"""The default output folder of ``gpflow-fastvi kl-correction``."""


@dataclass(frozen=True)
class RaetschSet:
    """One benchmark set of the KL-correction experiment and the paper's Table 1 figures for it."""

    benchmark: str
    """Its name in :data:`gpflow_fastvi.datasets.BENCHMARK_SETS`, which finds and verifies it."""
    num_train: int
    """The usual Rätsch training size; the rest of the (unique) patterns is the test set."""
    paper_error: Tuple[float, float]
    """The paper's GP-PPA test error in % (mean, sd over 100 splits), Table 1(a)."""
    paper_speedup: float
    """The paper's speed-up of the KL-corrected bound over the standard one, Table 1(b)."""


RAETSCH_SETS: Dict[str, RaetschSet] = {
    "banana": RaetschSet("banana", 400, (10.9, 0.5), 19.9),
    "breast_cancer": RaetschSet("breast_cancer", 200, (29.4, 5.0), 21.9),
    "diabetis": RaetschSet("diabetis", 468, (23.0, 2.0), 8.75),
    "german": RaetschSet("german_raetsch", 700, (23.9, 2.0), 103.0),
    "heart": RaetschSet("heart", 170, (17.0, 3.0), 18.1),
}
"""The sets of the KL-correction experiment, by the name ``--datasets`` takes."""
RAETSCH_NAMES: Tuple[str, ...] = tuple(RAETSCH_SETS)
"""The names of :data:`RAETSCH_SETS`, in its order."""
KL_CORRECTION_TOL = 1e-8
"""EM stops when the bound changes by less than this, relative to its size."""
KL_CORRECTION_MAX_ITER = 10_000
"""The default cap on EM iterations per run."""
KL_CORRECTION_MAXFUN = 20
"""The default number of L-BFGS-B evaluations per M-step."""

# --------------------------------------------------------------------------------------------------
# Where the inducing inputs go (``gpflow-fastvi inducing``)
# --------------------------------------------------------------------------------------------------

PLACEMENTS: Tuple[str, ...] = ("random", "kmeans", "greedy", "greedy rounds")
"""The placements of inducing inputs that ``inducing`` compares."""
INDUCING_M: Tuple[int, ...] = (8, 16, 32, 64, 128, 256)
"""The default numbers of inducing inputs of ``inducing``."""
INDUCING_WORKING_SET = 100
"""The default working set of ``inducing``'s greedy selections."""
INDUCING_ROUNDS = 2
"""The default selections of ``inducing``'s ``greedy rounds``."""


__all__ = [
    "INDUCING_M",
    "INDUCING_ROUNDS",
    "INDUCING_WORKING_SET",
    "PLACEMENTS",
    "ADAM_GRID",
    "ADAM_NAME",
    "ALL_METHODS",
    "BASELINE_PREFIX",
    "BATCH_SIZE",
    "BENCH_DEFAULT_SETS",
    "BENCH_INDUCING",
    "BENCH_MODELS",
    "BENCH_OUT",
    "BENCH_SET_NAMES",
    "COMPARE_INDUCING",
    "COMPARE_TIME_BUDGET",
    "COMPARE_OUT",
    "DATA_DIR_VARIABLE",
    "DEFAULT_ADAM_LR",
    "DEFAULT_METHODS",
    "DEFAULT_MULTICLASS_METHODS",
    "FAST_METHODS",
    "KLC_NAME",
    "KL_CORRECTION_MAXFUN",
    "KL_CORRECTION_MAX_ITER",
    "KL_CORRECTION_OUT",
    "KL_CORRECTION_TOL",
    "MULTICLASS_METHODS",
    "NATGRAD_NAME",
    "PG_NAME",
    "RAETSCH_NAMES",
    "RAETSCH_SETS",
    "RaetschSet",
    "SCALING_FIXED_M",
    "SCALING_FIXED_N",
    "SCALING_M",
    "SCALING_N",
    "SCALING_OUT",
    "SCALING_REPEATS",
    "SCIPY_NAME",
    "TEST_FRACTION",
    "TIME_BUDGET",
    "VIJJ_NAME",
    "VICONCAVE_NAME",
    "VITAYLOR_NAME",
    "adam_learning_rate",
    "adam_method",
]
