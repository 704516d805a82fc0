"""``gpflow_fastvi.sklearn.GPClassifier``: scikit-learn's own estimator checks, and the places
scikit-learn users put a classifier (pipelines, grid searches, cross-validation, pickles)."""

import pickle

import gpflow
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.datasets import load_iris, make_classification, make_moons  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from gpflow_fastvi.sklearn import GPClassifier  # noqa: E402

QUICK = dict(n_inducing=5, max_iter=5, random_state=0)
"""Small enough for the checks' dozens of fits."""
SMALL = dict(n_inducing=15, max_iter=30, random_state=0)


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(200, n_features=4, n_informative=3, n_redundant=1, random_state=1)
    return X, np.array(["no", "yes"])[y]


@pytest.fixture(scope="module")
def three_classes():
    X, y = load_iris(return_X_y=True)
    return X, y


@pytest.mark.slow  # about 70 s on two cores
@parametrize_with_checks([GPClassifier(**QUICK)])
def test_scikit_learn_estimator_checks(estimator, check) -> None:
    check(estimator)


def test_string_labels_come_back_as_the_labels_given(binary) -> None:
    X, y = binary
    classifier = GPClassifier(**SMALL).fit(X, y)
    assert list(classifier.classes_) == ["no", "yes"]
    assert set(classifier.predict(X)) <= {"no", "yes"}
    assert classifier.score(X, y) > 0.85
    probabilities = classifier.predict_proba(X)
    assert probabilities.shape == (len(X), 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    # the log-odds: positive exactly where the second class is predicted
    decision = classifier.decision_function(X)
    np.testing.assert_array_equal(decision > 0, classifier.predict(X) == "yes")
    assert classifier.n_features_in_ == 4 and classifier.n_iter_ >= 1


@pytest.mark.slow
def test_three_classes_take_softmax_with_one_latent_gp_per_class(three_classes) -> None:
    X, y = three_classes
    classifier = GPClassifier(**SMALL).fit(X, y)
    assert isinstance(classifier.model_.likelihood, gpflow.likelihoods.Softmax)
    assert classifier.model_.num_latent_gps == 3
    assert type(classifier.model_).__name__ == "VIConcave"
    assert classifier.score(X, y) > 0.9
    # the same points give the same probabilities at every call, alone or among others
    np.testing.assert_array_equal(classifier.predict_proba(X), classifier.predict_proba(X))
    np.testing.assert_allclose(
        classifier.predict_proba(X[:5]), classifier.predict_proba(X)[:5], rtol=1e-12
    )


@pytest.mark.parametrize("data", ["binary", "three_classes"])
def test_predictions_survive_a_pickle_round_trip_exactly(data, request) -> None:
    X, y = request.getfixturevalue(data)
    classifier = GPClassifier(**SMALL).fit(X, y)
    restored = pickle.loads(pickle.dumps(classifier))
    np.testing.assert_array_equal(restored.predict_proba(X), classifier.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), classifier.predict(X))
    assert restored.model_ is not classifier.model_
    assert restored.get_params() == classifier.get_params()


def test_a_user_kernel_and_arrays_are_left_untouched(binary) -> None:
    X, y = binary
    X_before, y_before = X.copy(), y.copy()
    kernel = gpflow.kernels.Matern52(lengthscales=np.full(4, 2.0))
    classifier = GPClassifier(kernel=kernel, **SMALL).fit(X, y)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(y, y_before)
    np.testing.assert_allclose(kernel.lengthscales.numpy(), np.full(4, 2.0), rtol=1e-12)
    assert classifier.model_.kernel is not kernel
    assert isinstance(classifier.model_.kernel, gpflow.kernels.Matern52)


def test_refusals_follow_scikit_learns_conventions(binary, three_classes) -> None:
    X, y = binary
    with pytest.raises(NotFittedError):
        GPClassifier().predict(X)
    with pytest.raises(ValueError, match="one class"):
        GPClassifier(**SMALL).fit(X, np.full(len(X), "yes"))
    with pytest.raises(ValueError, match="cannot classify 3 classes"):
        GPClassifier(model="VIJJ", **SMALL).fit(*three_classes)
    with pytest.raises(ValueError, match="cannot classify two classes"):
        GPClassifier(model="SVGP", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="lengthscale"):
        GPClassifier(kernel=gpflow.kernels.Matern32(), lengthscale=1.0).fit(X, y)
    with pytest.raises(ValueError, match="inducing"):
        GPClassifier(inducing="random").fit(X, y)
    for start in (np.ones(X.shape[1]), [1.0, 2.0], "1", True, 0.0):
        with pytest.raises(ValueError, match="lengthscale must be one positive number"):
            GPClassifier(lengthscale=start).fit(X, y)
    with pytest.raises(ValueError, match="expecting 4 features"):
        GPClassifier(**SMALL).fit(X, y).predict(X[:, :3])


def test_feature_names_are_kept_from_a_data_frame(binary) -> None:
    pandas = pytest.importorskip("pandas")
    X, y = binary
    frame = pandas.DataFrame(X, columns=["a", "b", "c", "d"])
    classifier = GPClassifier(**SMALL).fit(frame, y)
    assert list(classifier.feature_names_in_) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(classifier.predict(frame), classifier.predict(X))


def test_clone_gives_an_unfitted_copy_with_the_same_parameters(binary) -> None:
    classifier = GPClassifier(model="VIJJ", lengthscale=2.0, **SMALL).fit(*binary)
    copy = clone(classifier)
    assert copy.get_params() == classifier.get_params()
    assert not hasattr(copy, "model_")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["VITaylor", "VIJJ", "KLCorrected", "PolyaGammaSVGP"])
def test_every_binary_model_can_be_chosen(model, binary) -> None:
    classifier = GPClassifier(model=model, **SMALL).fit(*binary)
    assert type(classifier.model_).__name__ == model
    assert classifier.score(*binary) > 0.8


def test_in_a_pipeline_after_a_scaler_and_a_column_transformer(binary) -> None:
    X, y = binary
    pipeline = make_pipeline(
        ColumnTransformer([("scaled", StandardScaler(), [0, 1, 2])], remainder="drop"),
        GPClassifier(standardize=False, **SMALL),
    )
    pipeline.fit(X, y)
    assert pipeline[-1].n_features_in_ == 3
    assert pipeline.score(X, y) > 0.8


@pytest.mark.slow
def test_grid_search_over_the_lengthscale_start_and_the_inducing_inputs(binary) -> None:
    search = GridSearchCV(
        GPClassifier(max_iter=20, random_state=0),
        {"lengthscale": [0.5, 2.0], "n_inducing": [5, 20]},
        cv=3,
        scoring="neg_log_loss",
    )
    search.fit(*binary)
    assert set(search.best_params_) == {"lengthscale", "n_inducing"}
    assert len(search.cv_results_["mean_test_score"]) == 4
    assert search.best_estimator_.model_.inducing_variable.Z.shape[0] in (5, 20)


@pytest.mark.slow
def test_cross_validation_with_the_log_loss(binary) -> None:
    scores = cross_val_score(GPClassifier(**SMALL), *binary, cv=3, scoring="neg_log_loss")
    assert scores.shape == (3,)
    assert np.all(scores > -0.5), scores


@pytest.mark.slow
def test_as_accurate_as_scikit_learns_gaussian_process_classifier() -> None:
    """On two moons (400 points to train on, 400 to test) the test accuracy is within a point
    of scikit-learn's Laplace classifier and the log loss no more than 0.02 higher."""
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.metrics import log_loss

    X, y = make_moons(800, noise=0.3, random_state=0)
    train, test = slice(0, 400), slice(400, None)
    ours = GPClassifier(n_inducing=50, random_state=0).fit(X[train], y[train])
    theirs = GaussianProcessClassifier(ConstantKernel() * RBF(), random_state=0)
    theirs.fit(X[train], y[train])
    assert ours.score(X[test], y[test]) >= theirs.score(X[test], y[test]) - 0.01
    assert log_loss(y[test], ours.predict_proba(X[test])) <= (
        log_loss(y[test], theirs.predict_proba(X[test])) + 0.02
    )


@pytest.mark.slow
def test_greedy_inducing_inputs_train_a_classifier_too(binary) -> None:
    X, y = binary
    classifier = GPClassifier(inducing="greedy", n_inducing=10, max_iter=30, random_state=0)
    classifier.fit(X, y)
    assert classifier.model_.inducing_variable.Z.shape == (10, 4)
    assert classifier.score(X, y) > 0.85
