"""
The ``gpflow-fastvi`` sub-commands' parsers, one function per command that adds it to the
sub-parsers of :func:`gpflow_fastvi.cli.build_parser`, each built from the shared arguments of
:mod:`gpflow_fastvi.benchmarks.cli_args`. Like those, nothing here loads TensorFlow.
"""

import argparse
from typing import Any

from .arg_types import (
    format_number,
    format_numbers,
    fraction,
    positive_list,
)
from .choices import (
    ADAM_GRID,
    ALL_METHODS,
    BATCH_SIZE,
    BENCH_DEFAULT_SETS,
    BENCH_INDUCING,
    BENCH_MODELS,
    BENCH_OUT,
    BENCH_SET_NAMES,
    COMPARE_INDUCING,
    COMPARE_OUT,
    COMPARE_TIME_BUDGET,
    DEFAULT_ADAM_LR,
    DEFAULT_METHODS,
    DEFAULT_MULTICLASS_METHODS,
    INDUCING_M,
    INDUCING_ROUNDS,
    INDUCING_WORKING_SET,
    KL_CORRECTION_MAX_ITER,
    KL_CORRECTION_MAXFUN,
    KL_CORRECTION_OUT,
    KL_CORRECTION_TOL,
    MULTICLASS_METHODS,
    PLACEMENTS,
    RAETSCH_NAMES,
    SCALING_FIXED_M,
    SCALING_FIXED_N,
    SCALING_M,
    SCALING_N,
    SCALING_OUT,
    SCALING_REPEATS,
    TEST_FRACTION,
    TIME_BUDGET,
)
from .cli_args import (
    add_adam_lr,
    add_batch_size,
    add_benchmark_set,
    add_counts,
    add_data_dir,
    add_datasets,
    add_fixed_inducing,
    add_inducing,
    add_models,
    add_name_list,
    add_out,
    add_positive,
    add_progress,
    add_repeats,
    add_seed,
    add_time_budget,
    parse_methods,
)

_OWN_DEFAULT = "PolyaGammaSVGP runs with its own default"


def add_compare_command(commands: Any) -> None:
    """Add ``compare`` to ``commands`` (the sub-parsers of :func:`gpflow_fastvi.cli.build_parser`)."""
    compare = commands.add_parser(
        "compare",
        help="race VIConcave (and the other fast methods) against GPflow's SVGP on one data set",
        description=(
            "Train VIConcave, SVGP + Scipy (L-BFGS, full batch) and SVGP + Adam (mini-batches), "
            "or the methods chosen with --methods, from the same start, each until it converges "
            "or the wall-clock budget ends; SVGP + Scipy is called again each time L-BFGS-B "
            "stops by its own test, until a call no longer lowers the loss, as a user trains it "
            "to their answer. Print final test accuracy, test NLL, ELBO, time to target and the "
            "time ratios of the fast methods against the SVGP baselines, and write "
            "comparison.png and comparison.json. Data files may be CSV/dense text or LIBSVM "
            "(optionally gzip/bzip2/xz compressed); any two label values are accepted, the "
            "larger one being the positive class. A file of C > 2 classes runs the multi-class "
            "comparison: the label values, in increasing order, become classes 0..C-1, and each "
            "method takes its C-class likelihood (GPflow's Softmax; LogisticSoftmax for "
            "PolyaGammaSVGP; GPflow's MultiClass for SVGP + Scipy). Features are standardised "
            "with the training part's mean and standard deviation."
        ),
    )
    compare.add_argument(
        "--train",
        metavar="FILE",
        help="training data file (default: the bundled Rätsch banana set, split at random)",
    )
    compare.add_argument(
        "--test",
        metavar="FILE",
        help="test data file (default: hold out --test-fraction of the training data)",
    )
    compare.add_argument(
        "--label-column",
        metavar="K",
        type=int,
        default=0,
        help="label column of CSV/dense files; negative counts from the end (default: 0)",
    )
    compare.add_argument(
        "--methods",
        metavar="LIST",
        type=parse_methods,
        default=None,
        help=f"comma-separated methods to run, in this order, from: {', '.join(ALL_METHODS)}; "
        "or 'all'. Quote the list, as the names hold spaces. For more than two classes only "
        f"{', '.join(MULTICLASS_METHODS)} can run (default: {','.join(DEFAULT_METHODS)}; for "
        f"more than two classes {','.join(DEFAULT_MULTICLASS_METHODS)})",
    )
    add_inducing(compare, COMPARE_INDUCING)
    add_fixed_inducing(compare)
    add_time_budget(compare, COMPARE_TIME_BUDGET, "per method")
    add_batch_size(compare, BATCH_SIZE, f"SVGP + Adam and SVGP + NatGrad + Adam; {_OWN_DEFAULT}")
    add_adam_lr(
        compare,
        DEFAULT_ADAM_LR,
        f"in SVGP + Adam, and for the hyperparameters in SVGP + NatGrad + Adam; {_OWN_DEFAULT}",
    )
    add_seed(compare, "the split, k-means and mini-batches")
    compare.add_argument(
        "--test-fraction",
        metavar="F",
        type=fraction,
        default=TEST_FRACTION,
        help="share of the data held out for testing when no --test is given (default: "
        f"{format_number(TEST_FRACTION)})",
    )
    add_out(compare, COMPARE_OUT, "comparison.png and comparison.json")
    add_progress(compare)


def add_kl_correction_command(commands: Any) -> None:
    """Add ``kl-correction`` to ``commands``."""
    klc = commands.add_parser(
        "kl-correction",
        help="reproduce King & Lawrence: EM with the KL-corrected bound against the standard bound",
        description=(
            "Train KLCorrected (full GP, probit, RBF + bias + white kernel) with "
            "bound='kl_corrected' and with bound='standard' from the same start to the same "
            "tolerance, on Rätsch's benchmark sets, and report EM iterations, seconds and test "
            "error beside the paper's Table 1. Writes results.json (after every run), table.md "
            "and figure2_<set>.png. Banana's first split is realisation 1, shipped with the "
            "package; the other sets are read from raetsch_bsvm/ under --data-dir and split at "
            "random."
        ),
    )
    add_datasets(klc, RAETSCH_NAMES, ("banana",))
    add_data_dir(klc)
    add_positive(klc, "--splits", "K", int, 1, "splits per set")
    add_positive(
        klc,
        "--tol",
        "T",
        float,
        KL_CORRECTION_TOL,
        "stop when the bound changes by less than T relative to its size",
    )
    add_positive(
        klc, "--max-iter", "N", int, KL_CORRECTION_MAX_ITER, "cap on EM iterations per run"
    )
    add_positive(klc, "--maxfun", "F", int, KL_CORRECTION_MAXFUN, "L-BFGS-B evaluations per M-step")
    add_time_budget(klc, None, "per run at most")
    add_out(klc, KL_CORRECTION_OUT, "the results, table and figures")


def add_bench_commands(commands: Any) -> None:
    """Add ``bench``, ``plot`` and ``scaling`` to ``commands``."""
    bench = commands.add_parser(
        "bench",
        help="every model and GPflow baseline on the benchmark sets, traced into results.json",
        description=(
            "Train every model with its defaults and the GPflow baselines (SVGP + Scipy, "
            "SVGP + Adam at each rate of --adam-grid, SVGP + NatGrad + Adam) on the same kernel "
            "start, k-means inducing inputs (trained, or held fixed with --fixed-inducing) and "
            "logit link, for the same wall-clock budget "
            "each; record test accuracy, test NLL and ELBO against training time. results.json "
            "in --out is rewritten after every method, and runs already in it are skipped, so "
            "an interrupted run can be continued by running the same command again. Data sets "
            "other than banana are read from --data-dir and verified against their checksums; "
            "nothing is downloaded. Draw the results with `gpflow-fastvi plot DIR`."
        ),
    )
    add_datasets(bench, BENCH_SET_NAMES, BENCH_DEFAULT_SETS)
    add_models(bench, BENCH_MODELS)
    add_data_dir(bench)
    add_inducing(bench, BENCH_INDUCING)
    add_fixed_inducing(bench)
    add_time_budget(bench, TIME_BUDGET, "per method and run")
    add_repeats(bench, 1, "runs per set, seeds 0..R-1 (split, k-means, mini-batches)")
    bench.add_argument(
        "--adam-grid",
        metavar="LRS",
        type=positive_list(float),
        default=ADAM_GRID,
        help=f"SVGP + Adam's learning rates; {format_number(DEFAULT_ADAM_LR)} is always added (default: "
        f"{format_numbers(ADAM_GRID)})",
    )
    add_batch_size(bench, BATCH_SIZE, f"the SVGP mini-batch baselines; {_OWN_DEFAULT}")
    add_out(bench, BENCH_OUT, "results.json")
    add_progress(bench)

    plot = commands.add_parser(
        "plot",
        help="figures and a Markdown table from a bench results folder",
        description=(
            "Read DIR/results.json and write DIR/bench.png (accuracy and NLL against time, one "
            "column per data set), DIR/<set>.png and DIR/table.md (final accuracy and NLL, time "
            "to target, and its ratio to each baseline)."
        ),
    )
    plot.add_argument("dir", metavar="DIR", help="the --out folder of gpflow-fastvi bench")

    scaling = commands.add_parser(
        "scaling",
        help="seconds per full-batch update of the shared core against n and m",
        description=(
            "Time one compiled update (VIJJ.update_sites) on synthetic data for each n at "
            "m = --fixed-m and each m at n = --fixed-n, beside the floor 2·n·m² / (the machine's "
            "measured float64 matmul rate). Writes scaling.json, scaling.md and scaling.png."
        ),
    )
    add_counts(scaling, "--n", "points", SCALING_N)
    add_counts(scaling, "--m", "inducing inputs", SCALING_M)
    add_positive(scaling, "--fixed-m", "M", int, SCALING_FIXED_M, "m while n varies")
    add_positive(scaling, "--fixed-n", "N", int, SCALING_FIXED_N, "n while m varies")
    add_repeats(scaling, SCALING_REPEATS, "timed calls")
    add_out(scaling, SCALING_OUT, "scaling.json, scaling.md and scaling.png")


def add_inducing_command(commands: Any) -> argparse.ArgumentParser:
    """Add ``inducing`` (:mod:`gpflow_fastvi.benchmarks.inducing`) to ``commands``."""
    inducing = commands.add_parser(
        "inducing",
        help="test accuracy and NLL against M for random, k-means and greedy inducing inputs",
        description=(
            "For each M, place M inducing inputs at random rows, k-means centres, by greedy "
            "selection (trace criterion, at the starting kernel) and by fit's greedy rounds "
            "(the selection redone at the trained kernel, weighted by the sites), train VIJJ by "
            "fit with them held fixed, and print the trace term, the seconds, the ELBO and the "
            "test figures as a Markdown table."
        ),
    )
    add_inducing_arguments(inducing)
    return inducing


def add_inducing_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``inducing`` (also ``python -m gpflow_fastvi.benchmarks.inducing``)."""
    add_benchmark_set(parser)
    add_counts(parser, "--m", "inducing inputs", INDUCING_M)
    add_name_list(parser, "--placements", PLACEMENTS, "placement(s)", PLACEMENTS)
    parser.add_argument(
        "--working-set",
        metavar="J",
        type=int,
        default=INDUCING_WORKING_SET,
        help=f"greedy working set size, 0 for every row (default: {INDUCING_WORKING_SET})",
    )
    add_positive(parser, "--rounds", "R", int, INDUCING_ROUNDS, "selections of 'greedy rounds'")
    add_time_budget(parser, None, "per fit", note=", fit to convergence")
    add_seed(parser, "the split, the random rows, k-means and the greedy draws")
    add_data_dir(parser)
