"""The scripts of ``experiments/``: each answers ``--help``, and takes the spellings it always has."""

import importlib

import gpflow
import numpy as np
import pytest

EXPERIMENTS = (
    "concave",
    "swap",
    "routes",
    "profile",
    "replicas",
    "soak",
    "stream_checks",
    "user_script",
    "multiclass",
    "profile_multiclass",
    "sklearn_race",
    "many_fits",
    "softmax_gap",
    "softmax_elbo",
)

RECORDING = (
    "user_script",
    "multiclass",
    "profile_multiclass",
    "sklearn_race",
    "many_fits",
    "softmax_gap",
    "softmax_elbo",
)
"""The scripts whose tables the results page renders: they write them with --record."""


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_answers_help(name: str, capsys) -> None:
    module = importlib.import_module(f"experiments.{name}")
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"])
    assert stop.value.code == 0
    assert f"python -m experiments.{name}" in capsys.readouterr().out


@pytest.mark.parametrize("name", RECORDING)
def test_a_script_behind_the_results_page_records_its_table(name: str, capsys) -> None:
    module = importlib.import_module(f"experiments.{name}")
    with pytest.raises(SystemExit):
        module.main(["--help"])
    assert "--record FILE" in capsys.readouterr().out


def test_swap_takes_its_own_spellings_of_the_shared_arguments() -> None:
    from experiments import swap

    argv = ["banana", "--num-inducing", "20", "--batch", "50", "--lr", "0.1", "--loops", "fit"]
    args = swap.build_parser().parse_args(argv + ["--models", "vijj,VITaylor"])
    assert (args.inducing, args.batch_size, args.adam_lr) == (20, 50, 0.1)
    assert args.loops == ("fit",) and args.models == ("VIJJ", "VITaylor")


def test_concave_and_replicas_parse_lists_of_sets_and_of_sizes() -> None:
    from experiments import concave, replicas

    args = concave.build_parser().parse_args(["heart", "--errors", "heart,breast_cancer"])
    assert args.errors == ("heart", "breast_cancer") and args.full is None
    args = replicas.build_parser().parse_args(["--n", "1e4,100000", "--svi-batches", ""])
    assert args.n == (10_000, 100_000) and args.svi_batches == ()


def _three_class_svgp(likelihood: gpflow.likelihoods.Likelihood) -> gpflow.models.SVGP:
    rng = np.random.default_rng(3)
    model = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(),
        likelihood,
        rng.normal(size=(6, 2)),
        num_latent_gps=3,
    )
    model.q_mu.assign(2.0 * rng.normal(size=(6, 3)))
    return model


def test_multiclass_readings_repeat_and_are_the_likelihood_s_expectation() -> None:
    from experiments.multiclass import predicted_probabilities

    model = _three_class_svgp(gpflow.likelihoods.Softmax(3))
    X = np.random.default_rng(4).normal(size=(40, 2))
    first = predicted_probabilities(model, X, block=16)
    np.testing.assert_array_equal(first, predicted_probabilities(model, X, block=16))
    np.testing.assert_allclose(first.sum(axis=1), 1.0, rtol=1e-12)
    model.likelihood.num_monte_carlo_points = 200_000  # plain Monte Carlo, sd below 0.0012
    np.testing.assert_allclose(first, model.predict_y(X)[0].numpy(), atol=0.006)


def test_multiclass_readings_of_a_quadrature_likelihood_are_its_predict_y() -> None:
    from experiments.multiclass import predicted_probabilities

    model = _three_class_svgp(gpflow.likelihoods.MultiClass(3))
    X = np.random.default_rng(4).normal(size=(10, 2))
    np.testing.assert_array_equal(predicted_probabilities(model, X), model.predict_y(X)[0])
