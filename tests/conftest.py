"""Shared fixtures: float64, shape checks fully on, seeded data, the banana split."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from check_shapes import ShapeCheckingState, set_enable_check_shapes

from gpflow_fastvi.datasets import load_banana, standardise, train_test_split
from gpflow_fastvi.models import ALL_MODELS

SLOW_CASES = frozenset(
    {
        "test_stream_faults.py::test_an_endless_dataset_is_refused_or_trained_for_the_time_budget"
        "[VIJJ-unknown]",
        "test_stream_faults.py::test_a_bad_value_in_a_later_batch_is_named_and_leaves_the_model_"
        "as_before_fit[VIJJ-nan_in_X]",
        "test_stream_faults.py::test_a_dataset_without_batches_is_refused[VIJJ-unknown]",
        "test_stream_faults.py::test_num_data_other_than_the_rows_of_a_stream_is_refused[VIJJ-1]",
        "test_stream_faults.py::test_num_data_other_than_the_rows_of_a_stream_is_refused[VIJJ-3]",
        "test_stream_faults.py::test_a_callback_that_returns_no_mapping_is_refused_after_the_"
        "iteration[PolyaGammaSVGP]",
        "test_contract.py::test_the_loss_is_differentiated_inside_a_users_own_tf_function"
        "[PolyaGammaSVGP-dataset]",
        "test_contract.py::test_the_loss_is_differentiated_inside_a_users_own_tf_function"
        "[VIJJ-dataset]",
        "test_contract.py::test_the_loss_is_differentiated_inside_a_users_own_tf_function"
        "[VIJJ-tuple_in_batches]",
        "test_contract.py::test_greedy_rounds_choose_rows_of_X_weighted_by_the_sites"
        "[PolyaGammaSVGP]",
        "test_contract.py::test_objective_and_yardstick_are_finite_and_a_bound_lies_below_the_"
        "yardstick[PolyaGammaSVGP]",
        "test_contract_multiclass.py::test_a_natural_gradient_step_of_one_at_the_fixed_point_"
        "changes_nothing[VIConcave]",
        "test_fit.py::test_fit_compiles_its_loss_once_however_many_iterations[analytic-_objective]",
        "test_sklearn.py::test_predictions_survive_a_pickle_round_trip_exactly[three_classes]",
    }
)
"""
Cases that take several seconds (a stream's graphs, a route traced for one fact) of tests whose
other cases are quick: in the slow tier, with their test's quick cases left in the fast one.
"""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Mark the cases of :data:`SLOW_CASES` slow, before ``-m`` selects."""
    for item in items:
        if item.nodeid.rpartition("/")[2] in SLOW_CASES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _strict_defaults():
    """Every test runs in float64 with check_shapes on in compiled code too, from a clean seed."""
    set_enable_check_shapes(ShapeCheckingState.ENABLED)
    tf.random.set_seed(0)
    with gpflow.config.as_context(gpflow.config.Config(float=np.float64, jitter=1e-6)):
        yield
    set_enable_check_shapes(ShapeCheckingState.EAGER_MODE_ONLY)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


def make_binary_data(rng: np.random.Generator, N: int = 60, D: int = 2):
    """A smooth noisy 2-D classification problem with labels in {0, 1}."""
    X = rng.uniform(-2.0, 2.0, size=(N, D))
    f = np.sin(2.0 * X[:, :1]) + 0.5 * X[:, 1:2] if D > 1 else np.sin(2.0 * X)
    Y = (rng.uniform(size=(N, 1)) < 1.0 / (1.0 + np.exp(-3.0 * f))).astype(np.float64)
    return X, Y


@pytest.fixture
def binary_data(rng):
    return make_binary_data(rng)


@pytest.fixture(params=ALL_MODELS, ids=lambda c: c.__name__)
def model_class(request):
    """Every model class of the package, in turn."""
    return request.param


FAMILY_REPRESENTATIVES = ("VIJJ", "PolyaGammaSVGP")
"""One model of each training family: closed-form passes over all the data, and SVI."""


@pytest.fixture(
    params=[
        pytest.param(c, marks=() if c.__name__ in FAMILY_REPRESENTATIVES else pytest.mark.slow)
        for c in ALL_MODELS
    ],
    ids=lambda c: c.__name__,
)
def family_model_class(request):
    """Every model class in the full suite; in the fast tier (``-m "not slow"``), one of each
    training family, for facts of the training loops rather than of a model."""
    return request.param


@pytest.fixture
def data(rng):
    """A small binary problem for the tests run over every model."""
    return make_binary_data(rng, N=50)


@pytest.fixture(scope="session")
def banana_split():
    """Banana, seeded 80/20 split, standardised on the training part (as `gpflow-fastvi compare`)."""
    X, Y = load_banana()
    X_train, Y_train, X_test, Y_test = train_test_split(X, Y, test_fraction=0.2, seed=0)
    X_train, X_test = standardise(X_train, X_test)
    return X_train, Y_train, X_test, Y_test


@pytest.fixture
def fake_benchmark(monkeypatch, tmp_path):
    """
    ``fake_benchmark(name, {relative path: text})`` writes the files under a fresh data directory,
    points the registry entry ``name`` at their checksums (so that they verify) and returns the
    directory. For testing the data layer and the jobs without the real benchmark files.
    """
    import dataclasses

    from gpflow_fastvi.datasets import BENCHMARK_SETS
    from gpflow_fastvi.datasets.registry import DataFile, sha256_of

    data_dir = tmp_path / "data"

    def make(name, files):
        written = []
        for relative, text in files.items():
            path = data_dir.joinpath(*relative.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(DataFile(relative, sha256_of(path)))
        replaced = dict(train=written[0], test=written[1] if len(written) > 1 else None)
        monkeypatch.setitem(
            BENCHMARK_SETS, name, dataclasses.replace(BENCHMARK_SETS[name], **replaced)
        )
        return data_dir

    return make
