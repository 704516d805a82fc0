"""
A scikit-learn classifier around the package's models, for users who do not write GPflow models.

:class:`GPClassifier` is a scikit-learn estimator (``fit``, ``predict``, ``predict_proba``,
``score``, ``get_params`` / ``set_params``, ``clone``, pickling) that builds, from the data it is
given, a sparse variational GP classifier of this package and trains it by
:func:`gpflow_fastvi.fit`: a logit ``Bernoulli`` likelihood for two classes, GPflow's
``Softmax(C)`` with one latent GP per class for C > 2. It needs scikit-learn
(``pip install "gpflow-fastvi[sklearn]"``); the rest of the package does not.
"""

import copy
import functools
import numbers
import weakref
from typing import Any, Dict, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import models
from .inducing import greedy_inducing_points, kmeans_inducing_points
from .likelihoods import LogisticSoftmax
from .training import fit as fit_model
from .training.compiled import CompiledStep
from .validation import checked_inputs, positive_int

try:  # scikit-learn ≥ 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # scikit-learn 1.3 to 1.5: the estimator's own method

    def _validate_data(
        estimator: Any, X: Any = "no_validation", y: Any = "no_validation", **kw: Any
    ) -> Any:
        return estimator._validate_data(X, y, **kw)


BINARY_MODELS = ("VIConcave", "VITaylor", "VIJJ", "KLCorrected", "PolyaGammaSVGP")
"""The models that take two classes: all five, with the logit ``Bernoulli`` likelihood."""
MULTICLASS_MODELS = ("VIConcave", "VITaylor", "PolyaGammaSVGP")
"""The models that take C > 2 classes: ``VIConcave`` and ``VITaylor`` with GPflow's
``Softmax(C)``, ``PolyaGammaSVGP`` with :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax`."""
DEFAULT_MODEL = "VIConcave"
"""``model="auto"``: ``VIConcave`` for two classes and for more, the model getting-started
recommends for SVGP's own answer and for C classes."""
PREDICTIVE_DRAWS = 512
"""Standard-normal draws (half of them the negatives of the other half) per latent GP behind the
class probabilities of C > 2 classes; the same draws for every point and every call."""
_ROWS_PER_BLOCK = 2048
_PREDICTIONS: "weakref.WeakKeyDictionary[gpflow.models.SVGP, CompiledStep]"
_PREDICTIONS = weakref.WeakKeyDictionary()
"""Each fitted model's compiled prediction (:func:`_predicted`), kept no longer than the model."""


def _predicted(gp: gpflow.models.SVGP, Xs: np.ndarray) -> Tuple[np.ndarray, ...]:
    """
    What ``predict_proba`` reads of the model at standardised inputs: for one latent GP the
    probabilities of ``predict_y`` [n, 1], for more the marginals of ``predict_f`` [n, C] each.
    Compiled, and shared with every model of the same signature and any number of rows
    (:mod:`~gpflow_fastvi.training.compiled`): a grid search's next fold traces nothing, and each
    call is one graph rather than some hundred eager operations through the parameters'
    transforms.
    """
    step = _PREDICTIONS.get(gp)
    if step is None:
        model = weakref.ref(gp)  # the step is the model's entry: it must not keep the model

        def body(X: tf.Tensor) -> Tuple[tf.Tensor, ...]:
            if model().num_latent_gps == 1:  # type: ignore[union-attr]
                return model().predict_y(X)[:1]  # type: ignore[union-attr]
            return model().predict_f(X)  # type: ignore[union-attr]

        step = CompiledStep("GPClassifier.predict", body, roots=(gp,), rows_unknown=True)
        _PREDICTIONS[gp] = step
    X = checked_inputs(Xs, gp.inducing_variable)
    return tuple(t.numpy() for t in step(X))


@functools.lru_cache(maxsize=None)
def _standard_normal_draws(num_latent: int) -> np.ndarray:
    """Fixed antithetic draws [S, C]: GPflow's ``Softmax`` estimates its predictive
    probabilities from fresh draws at each call, which would make ``predict_proba`` random."""
    half = np.random.default_rng(0).standard_normal((PREDICTIVE_DRAWS // 2, num_latent))
    draws = np.concatenate([half, -half])
    draws.setflags(write=False)
    return draws


class GPClassifier(ClassifierMixin, BaseEstimator):
    """
    Gaussian-process classification by a sparse variational model of this package, as a
    scikit-learn estimator.

    ``fit(X, y)`` takes any labels scikit-learn's classifiers take (strings, integers, two
    classes or more); ``classes_`` holds them in sorted order. The inputs are standardised
    (each column to mean 0 and standard deviation 1, on the training data) unless
    ``standardize=False``. For two classes the model has one latent GP and the logit
    ``Bernoulli`` likelihood; for C > 2 classes, C latent GPs and GPflow's ``Softmax(C)`` (or
    :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax` for ``PolyaGammaSVGP``). The trained
    GPflow model is ``model_``, an SVGP: ``model_.predict_f`` on standardised inputs
    (``(X - x_mean_) / x_scale_``), ``gpflow.utilities.print_summary(model_)`` and so on. It is
    built without ``num_data`` (but ``PolyaGammaSVGP``, whose fit takes mini-batches), so that
    fits of any number of rows share their compiled steps: its ``elbo`` takes the rows it is
    given as all the data.

    :param model: ``"auto"`` (``VIConcave``), or the name of one of the package's models:
        ``"VIConcave"``, ``"VITaylor"``, ``"VIJJ"``, ``"KLCorrected"``, ``"PolyaGammaSVGP"``
        for two classes; ``"VIConcave"``, ``"VITaylor"``, ``"PolyaGammaSVGP"`` for more.
    :param kernel: a GPflow kernel, copied at each ``fit`` (the one given is left untouched).
        ``None``: a squared exponential with one lengthscale per feature, each started at
        ``lengthscale``.
    :param lengthscale: one positive number, where every lengthscale of the default kernel
        starts; ``None`` for √D (D features), a good start for standardised inputs. Only with
        ``kernel=None``.
    :param n_inducing: the number of inducing inputs M, at most the number of training points.
    :param inducing: how they are chosen: ``"kmeans"`` (k-means centres of the standardised
        inputs, :func:`~gpflow_fastvi.kmeans_inducing_points`) or ``"greedy"`` (Titsias's
        greedy selection at the starting kernel, :func:`~gpflow_fastvi.greedy_inducing_points`,
        from working sets of 100 rows). Either way they are then trained with the kernel.
    :param max_iter: cap on :func:`~gpflow_fastvi.fit`'s outer iterations; ``None`` for its
        default (or no cap with a ``time_budget``).
    :param time_budget: seconds of training after which ``fit`` stops; ``None``: no limit.
    :param tol: :func:`~gpflow_fastvi.fit`'s convergence tolerance; ``None`` for its default.
    :param random_state: seeds the choice of inducing inputs and ``PolyaGammaSVGP``'s
        mini-batches: an int, a ``numpy.random.RandomState`` or ``None``.
    :param standardize: standardise the inputs internally.
    :param verbose: show :func:`~gpflow_fastvi.fit`'s progress bar.

    Attributes after ``fit``: ``classes_``, ``n_features_in_``, ``feature_names_in_`` (when
    ``X`` has string column names), ``model_``, ``x_mean_``, ``x_scale_``, ``n_iter_`` (outer
    iterations of ``fit``) and ``stop_reason_``.
    """

    def __init__(
        self,
        model: str = "auto",
        kernel: Optional[gpflow.kernels.Kernel] = None,
        lengthscale: Optional[float] = None,
        n_inducing: int = 100,
        inducing: str = "kmeans",
        max_iter: Optional[int] = None,
        time_budget: Optional[float] = None,
        tol: Optional[float] = None,
        random_state: Any = None,
        standardize: bool = True,
        verbose: bool = False,
    ) -> None:
        self.model = model
        self.kernel = kernel
        self.lengthscale = lengthscale
        self.n_inducing = n_inducing
        self.inducing = inducing
        self.max_iter = max_iter
        self.time_budget = time_budget
        self.tol = tol
        self.random_state = random_state
        self.standardize = standardize
        self.verbose = verbose

    # ---- fit -------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> "GPClassifier":
        """Standardise ``X``, encode ``y``, build the model and train it; returns ``self``."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        X, y = _validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        classes, encoded = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the data, but the "
                f"data contain only one class: {classes[0]!r}."
            )
        name = self._model_name(len(classes))
        self._check_parameters()
        N, D = X.shape
        if self.standardize:
            mean, scale = X.mean(axis=0), X.std(axis=0)
            scale = np.where(scale > 0, scale, 1.0)
        else:
            mean, scale = np.zeros(D), np.ones(D)
        Xs = (X - mean) / scale
        kernel = self._starting_kernel(D)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        M = min(self.n_inducing, N)
        if self.inducing == "greedy":
            Z = greedy_inducing_points(Xs, kernel, M, working_set_size=min(100, N), seed=seed)
        else:
            Z = kmeans_inducing_points(Xs, M, seed=seed)
        # The route fit takes, as the model declares it. One of mini-batches (SVI) needs num_data
        # to scale them; the others see all the data in every step, and are built without it so
        # that their compiled steps are shared by fits of any number of rows (the folds of a
        # cross-validation and the refit).
        cls = getattr(models, name)
        route = cls.training_routes[cls.default_route]
        num_data = N if route.driver == "svi" else None
        gp = _build(name, kernel, Z, num_data, len(classes))
        Y = encoded.astype(np.float64)[:, None]
        if isinstance(gp.likelihood, gpflow.likelihoods.Softmax):
            Y = Y.astype(np.int64)  # GPflow's Softmax refuses float labels
        options: Dict[str, Any] = {"seed": seed} if "seed" in route.options else {}
        trace = fit_model(
            gp,
            (Xs, Y),
            max_iter=self.max_iter,
            tol=self.tol,
            time_budget=self.time_budget,
            progress=bool(self.verbose),
            **options,
        )
        self.classes_ = classes
        self.x_mean_, self.x_scale_ = mean, scale
        self.model_ = gp
        self.n_iter_ = len(trace)
        self.stop_reason_ = trace.stop_reason
        return self

    def _model_name(self, num_classes: int) -> str:
        name = DEFAULT_MODEL if self.model == "auto" else self.model
        allowed = BINARY_MODELS if num_classes == 2 else MULTICLASS_MODELS
        if name not in allowed:
            task = "two classes" if num_classes == 2 else f"{num_classes} classes"
            raise ValueError(
                f"model={self.model!r} cannot classify {task}: use 'auto' or one of "
                f"{', '.join(repr(a) for a in allowed)}."
            )
        return name

    def _check_parameters(self) -> None:
        if self.inducing not in ("kmeans", "greedy"):
            raise ValueError(f"inducing must be 'kmeans' or 'greedy', not {self.inducing!r}.")
        positive_int(self.n_inducing, "n_inducing")
        if self.kernel is not None and self.lengthscale is not None:
            raise ValueError(
                "lengthscale starts the default kernel's lengthscales; with a kernel of your own, "
                "set its lengthscales instead."
            )
        if self.lengthscale is not None and not (
            isinstance(self.lengthscale, numbers.Real)
            and not isinstance(self.lengthscale, bool)
            and self.lengthscale > 0
        ):
            raise ValueError(
                "lengthscale must be one positive number, the start of every lengthscale of the "
                f"default kernel, not {self.lengthscale!r}; for lengthscales of their own, pass "
                "kernel=gpflow.kernels.SquaredExponential(lengthscales=[...])."
            )

    def _starting_kernel(self, D: int) -> gpflow.kernels.Kernel:
        """A copy of ``kernel``, or the ARD squared exponential at ``lengthscale`` (√D)."""
        if self.kernel is not None:
            return copy.deepcopy(self.kernel)
        start = np.sqrt(D) if self.lengthscale is None else float(self.lengthscale)
        return gpflow.kernels.SquaredExponential(lengthscales=np.full(D, start))

    # ---- predictions -----------------------------------------------------------------------

    def predict_proba(self, X: Any) -> np.ndarray:
        """
        The predictive class probabilities [n, C], columns in the order of ``classes_``: for two
        classes the model's ``predict_y`` (Gauss–Hermite quadrature of the logit over q(f)); for
        more, the mean of the likelihood's class probabilities over :data:`PREDICTIVE_DRAWS`
        fixed draws of q(f), so that the same X always gives the same answer.
        """
        check_is_fitted(self)
        X = _validate_data(self, X, dtype=np.float64, reset=False)
        Xs = (X - self.x_mean_) / self.x_scale_
        if len(self.classes_) == 2:
            (p,) = _predicted(self.model_, Xs)
            p = p[:, 0]
            return np.column_stack([1.0 - p, p])
        blocks = [
            self._class_probabilities(Xs[start : start + _ROWS_PER_BLOCK])
            for start in range(0, len(Xs), _ROWS_PER_BLOCK)
        ]
        return np.concatenate(blocks)

    def _class_probabilities(self, Xs: np.ndarray) -> np.ndarray:
        mean, var = _predicted(self.model_, Xs)  # [n, C] each
        draws = _standard_normal_draws(mean.shape[1])  # [S, C]
        F = mean[:, None, :] + np.sqrt(var)[:, None, :] * draws[None]  # [n, S, C]
        if isinstance(self.model_.likelihood, LogisticSoftmax):
            s = expit(F)
            p = s / s.sum(axis=-1, keepdims=True)
        else:
            p = softmax(F, axis=-1)
        return p.mean(axis=1)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """The log of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """
        The predictive log-odds, as for a logistic regression: for two classes
        log p(classes_[1]) − log p(classes_[0]) [n] (positive where ``predict`` says
        ``classes_[1]``); for more, the log class probabilities [n, C]. Ranks agree with
        :meth:`predict_proba`; the latent mean would not, as its variance differs from point
        to point.
        """
        log_p = self.predict_log_proba(X)
        if len(self.classes_) == 2:
            return log_p[:, 1] - log_p[:, 0]
        return log_p

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row of ``X``, a value of ``classes_``."""
        probabilities = self.predict_proba(X)
        return self.classes_[np.argmax(probabilities, axis=1)]

    # ---- pickling --------------------------------------------------------------------------

    def __getstate__(self) -> Dict[str, Any]:
        """
        The estimator's attributes with ``model_`` replaced by what rebuilds it: its model name,
        shapes, and the unconstrained value of every parameter as a NumPy array (a constrained
        value would come back through the inverse of its transform and then the transform, off
        by rounding; ``tf.Variable``\\ s and a model's compiled functions are not pickled).
        """
        state = dict(super().__getstate__())
        gp = state.pop("model_", None)
        if gp is not None:
            values = {
                path: parameter.unconstrained_variable.numpy()
                for path, parameter in gpflow.utilities.parameter_dict(gp).items()
            }
            Z = gp.inducing_variable.Z.numpy()
            num_data = None if gp.num_data is None else int(gp.num_data)
            state["_model_state"] = (type(gp).__name__, Z.shape, num_data, values)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        saved: Optional[Tuple[str, Tuple[int, int], Optional[int], Dict[str, Any]]]
        saved = state.pop("_model_state", None)
        super().__setstate__(state)
        if saved is not None:
            name, (M, D), num_data, values = saved
            gp = _build(
                name, self._starting_kernel(D), np.zeros((M, D)), num_data, len(self.classes_)
            )
            parameters = gpflow.utilities.parameter_dict(gp)
            for path, value in values.items():
                parameters[path].unconstrained_variable.assign(value)
            self.model_ = gp


def _build(
    name: str,
    kernel: gpflow.kernels.Kernel,
    Z: np.ndarray,
    num_data: Optional[int],
    num_classes: int,
) -> gpflow.models.SVGP:
    """The model ``name`` with SVGP's signature, its likelihood set by the number of classes."""
    cls = getattr(models, name)
    if num_classes == 2:
        likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        return cls(kernel, likelihood, Z, num_data=num_data)
    if name == "PolyaGammaSVGP":
        likelihood = LogisticSoftmax(num_classes)
    else:
        likelihood = gpflow.likelihoods.Softmax(num_classes)
    return cls(kernel, likelihood, Z, num_data=num_data, num_latent_gps=num_classes)


__all__ = [
    "GPClassifier",
    "BINARY_MODELS",
    "MULTICLASS_MODELS",
    "DEFAULT_MODEL",
    "PREDICTIVE_DRAWS",
]
