# ---
# jupyter:
#   jupytext:
#     formats: ipynb,pct.py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---


# %% [markdown]
# # GP classification for scikit-learn users: `GPClassifier`
#
# `gpflow_fastvi.sklearn.GPClassifier` is a scikit-learn estimator: `fit(X, y)` with any labels,
# `predict`, `predict_proba`, `score`, and it goes wherever a scikit-learn classifier goes
# (pipelines, `GridSearchCV`, `cross_val_score`, pickles). Behind it is a sparse variational GP of
# this package (`VIConcave` by default) with an ARD squared-exponential kernel and k-means
# inducing inputs, trained by `gpflow_fastvi.fit`: no GPflow code to write and no learning rate
# to tune. It needs scikit-learn: `pip install "gpflow-fastvi[sklearn]"`.
#
# This page sets it against scikit-learn's `GaussianProcessClassifier` (a Laplace approximation
# of the full GP, whose cost grows as n³, one-vs-rest for more than two classes) and
# `LogisticRegression`, on two sets that ship with scikit-learn: breast cancer (569 points,
# 30 features, two classes) and handwritten digits (1,797 images, 64 pixels, ten classes).

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpflow_fastvi.sklearn import GPClassifier

QUICK = os.environ.get("GPFLOW_FASTVI_QUICK") == "1"  # set by the test suite: shorter runs
MAX_ITER = 10 if QUICK else None  # outer iterations of fv.fit (None: its own stop)
SUBSAMPLE = 200 if QUICK else None  # QUICK: the first points of each set only


def race(X, y, classifiers):
    """Fit each classifier on 75 % of the data; its test accuracy, log loss and seconds to fit,
    printed and returned by name."""
    X, y = X[:SUBSAMPLE], y[:SUBSAMPLE]
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    print(f"{len(X_train)} points to train on, {len(X_test)} to test, {X.shape[1]} features")
    print(f"{'classifier':<34} {'accuracy':>9} {'log loss':>9} {'seconds':>8}")
    results = {}
    for name, classifier in classifiers.items():
        began = time.perf_counter()
        classifier.fit(X_train, y_train)
        seconds = time.perf_counter() - began
        p = classifier.predict_proba(X_test)
        accuracy = accuracy_score(y_test, classifier.classes_[p.argmax(axis=1)])
        loss = log_loss(y_test, p, labels=classifier.classes_)
        print(f"{name:<34} {accuracy:>9.4f} {loss:>9.4f} {seconds:>8.1f}")
        results[name] = (accuracy, loss, seconds)
    return results


def classifiers(D):
    """The three, each in a pipeline that standardises the inputs; both GPs start from a squared
    exponential with lengthscale √D (D features), GPClassifier's default."""
    scaled = lambda c: make_pipeline(StandardScaler(), c)  # noqa: E731
    return {
        "GPClassifier (VIConcave)": scaled(GPClassifier(max_iter=MAX_ITER, random_state=0)),
        "GaussianProcessClassifier": scaled(
            GaussianProcessClassifier(ConstantKernel() * RBF(np.sqrt(D)), random_state=0)
        ),
        "LogisticRegression": scaled(LogisticRegression(max_iter=1000)),
    }


# %% [markdown]
# ## Two classes: breast cancer
#
# The labels are scikit-learn's own (0 malignant, 1 benign). `GPClassifier` standardises its
# inputs itself; in a pipeline after a `StandardScaler` that does no harm. Each classifier is a
# fresh pipeline, so the seconds include everything `fit` does.

# %%
cancer = load_breast_cancer()
by_set = {"breast cancer": race(cancer.data, cancer.target, classifiers(cancer.data.shape[1]))}

# %% [markdown]
# ## Ten classes: digits
#
# `GPClassifier` takes the ten classes in one model: GPflow's `Softmax(10)` with one latent GP
# per class, sharing the inducing inputs. `GaussianProcessClassifier` fits ten binary
# classifiers, one class against the rest, and normalises their probabilities. Its start
# matters: on the first 300 digits, from scikit-learn's default lengthscale of 1 instead of
# √64 = 8, its optimiser took nine of the ten lengthscales to the upper bound of its search
# (10⁵), and its test accuracy was 0.11.

# %%
digits = load_digits()
by_set["digits"] = race(digits.data, digits.target, classifiers(digits.data.shape[1]))

# %% [markdown]
# Test log loss and seconds to fit, side by side (the seconds on a log scale):

# %%
fig, (ax_loss, ax_time) = plt.subplots(1, 2, figsize=(11, 3.5))
names = list(next(iter(by_set.values())))
width = 0.8 / len(names)
for i, name in enumerate(names):
    where = np.arange(len(by_set)) + i * width
    ax_loss.bar(where, [r[name][1] for r in by_set.values()], width, label=name)
    ax_time.bar(where, [r[name][2] for r in by_set.values()], width, label=name)
for ax, label in ((ax_loss, "test log loss"), (ax_time, "seconds to fit")):
    ax.set_xticks(np.arange(len(by_set)) + width * (len(names) - 1) / 2, list(by_set))
    ax.set_ylabel(label)
ax_time.set_yscale("log")
ax_loss.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Labels, the fitted GPflow model, a grid search
#
# Labels can be anything scikit-learn takes: here the names of the two classes. `classes_`
# holds them; `model_` is the trained GPflow model, for those who want to go further (here its
# kernel's variance and first lengthscales, on the standardised inputs).

# %%
names = cancer.target_names[cancer.target]  # "malignant" / "benign"
classifier = GPClassifier(n_inducing=50, max_iter=MAX_ITER, random_state=0).fit(cancer.data, names)
print(classifier.classes_, classifier.predict(cancer.data[:5]))
print("kernel variance", classifier.model_.kernel.variance.numpy())
print("first lengthscales", classifier.model_.kernel.lengthscales.numpy()[:4])

# %% [markdown]
# `GridSearchCV` chooses among starting lengthscales and numbers of inducing inputs by
# cross-validated log loss, as for any scikit-learn classifier.

# %%
search = GridSearchCV(
    GPClassifier(max_iter=MAX_ITER, random_state=0),
    {"lengthscale": [1.0, 5.0], "n_inducing": [20, 50]},
    scoring="neg_log_loss",
    cv=3,
)
search.fit(cancer.data, names)
print("best:", search.best_params_, "log loss", -search.best_score_)
