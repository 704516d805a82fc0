"""
The scripts of ``experiments/``: each answers ``--help``, takes the spellings it always has, and
times or reads what the package computes (the functions behind the measurements, on tiny data).
"""

import importlib
from typing import Tuple

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.scaling import synthetic_data
from gpflow_fastvi.models.step_sizes import FULL_DATA_STEPS
from gpflow_fastvi.training.persistent import PersistentRun

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
    "class_cost",
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


def _three_classes(n: int = 60) -> Tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(5).normal(size=(n, 2))
    return X, np.sum(X > 0, axis=1, keepdims=True).astype(np.float64)  # classes 0, 1, 2


@pytest.mark.parametrize("cls", [fv.VIConcave, fv.VITaylor], ids=lambda c: c.__name__)
def test_profile_multiclass_times_the_loss_fit_evaluates_on_the_persistent_route(cls: type) -> None:
    from experiments import profile_multiclass

    X, Y = _three_classes()
    model = profile_multiclass.build(cls, X, Y, X[:6].copy(), 3)
    timed = profile_multiclass.evaluation(model, X, Y)
    data = model._passes.checked_training_data((X, Y))
    loss, _ = PersistentRun(model, data, profile_multiclass.N_UPD).loss(*data)
    np.testing.assert_allclose(timed().numpy(), -loss.numpy(), rtol=1e-10)


def test_profile_multiclass_measures_the_seconds_of_a_compiled_evaluation() -> None:
    from experiments import profile_multiclass

    X, Y = _three_classes(30)
    model = profile_multiclass.build(fv.VITaylor, X, Y, X[:4].copy(), 3)
    seconds = profile_multiclass.evaluation_seconds(model, X, Y)
    assert set(seconds) == {"trace", "first call", "evaluation"}
    assert seconds["trace"] > 0.0 and seconds["evaluation"] > 0.0


def _stream(X: np.ndarray, Y: np.ndarray) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(16)


def test_stream_checks_times_without_the_checks_the_evaluation_fit_makes_of_a_stream() -> None:
    from experiments import stream_checks

    X, Y = synthetic_data(40)
    checked = stream_checks._model(X, 5)
    stream = checked._passes.training_data(_stream(X, Y))
    loss, _ = PersistentRun(checked, stream, FULL_DATA_STEPS).loss()
    unchecked = stream_checks._unchecked(stream_checks._model(X, 5))
    objective, gradients = stream_checks.evaluation(unchecked, _stream(X, Y))()
    np.testing.assert_allclose(objective, -loss.numpy(), rtol=1e-10)
    assert len(gradients) == 2 and all(np.all(np.isfinite(g)) for g in gradients)


def test_stream_checks_unchecked_passes_read_a_stream_that_the_checks_refuse() -> None:
    from experiments import stream_checks

    X, Y = synthetic_data(40)
    bad = _stream(X[:-8], Y[:-8] + 1.0)  # labels outside {0, 1}, fewer rows than num_data
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels outside"):
        list(stream_checks._model(X, 5)._passes.training_data(bad))
    unchecked = stream_checks._unchecked(stream_checks._model(X, 5))
    objective, gradients = stream_checks.evaluation(unchecked, bad)()
    assert np.isfinite(objective) and all(np.all(np.isfinite(g)) for g in gradients)
