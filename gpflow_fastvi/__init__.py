"""
gpflow_fastvi: fast variational GP classification for GPflow 2.

Swap :class:`gpflow.models.SVGP` for a model here, keep the kernel, inducing inputs, likelihood and
predictions, and train with :func:`fit` (or GPflow's own optimisers on ``model.training_loss``).

The public names are loaded on first use, so that ``gpflow-fastvi --help`` and
``import gpflow_fastvi.datasets`` do not wait for TensorFlow (importing the package takes
milliseconds; the models bring in GPflow and TensorFlow, seconds). Type checkers and editors read
the same names from the ``TYPE_CHECKING`` imports below, so ``gpflow_fastvi.VIJJ`` is the class to
them, not ``Any``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

# The names of _PUBLIC, for type checkers and editors; a test keeps the lists the same.
if TYPE_CHECKING:
    from .exceptions import (
        ApproximationWarning,
        CholeskyError,
        DivergenceWarning,
        IncompatibleLikelihoodError,
        InvalidCallbackError,
        InvalidDataError,
        NotConvergedWarning,
        UnsupportedConfigurationError,
    )
    from .inducing import greedy_inducing_points, kmeans_inducing_points
    from .models import VIJJ, GaussianSitesModel, KLCorrected, PolyaGammaSVGP, VIConcave, VITaylor
    from .training import NaturalGradientSVI, RobbinsMonro, Trace, fit

_PUBLIC = {
    "ApproximationWarning": ".exceptions",
    "CholeskyError": ".exceptions",
    "DivergenceWarning": ".exceptions",
    "IncompatibleLikelihoodError": ".exceptions",
    "InvalidCallbackError": ".exceptions",
    "InvalidDataError": ".exceptions",
    "NotConvergedWarning": ".exceptions",
    "UnsupportedConfigurationError": ".exceptions",
    "GaussianSitesModel": ".models",
    "KLCorrected": ".models",
    "PolyaGammaSVGP": ".models",
    "VIConcave": ".models",
    "VIJJ": ".models",
    "VITaylor": ".models",
    "NaturalGradientSVI": ".training",
    "RobbinsMonro": ".training",
    "Trace": ".training",
    "fit": ".training",
    "greedy_inducing_points": ".inducing",
    "kmeans_inducing_points": ".inducing",
}

_SUBPACKAGES = (
    "benchmarks",
    "datasets",
    "distribution",
    "exceptions",
    "gaussian",
    "inducing",
    "likelihoods",
    "models",
    "sites",
    "stream_validation",
    "training",
    "types",
    "validation",
)
"""Reachable as attributes too, ``gpflow_fastvi.training.svi_plan``, loaded on first use."""

__all__ = [
    "ApproximationWarning",
    "CholeskyError",
    "DivergenceWarning",
    "GaussianSitesModel",
    "IncompatibleLikelihoodError",
    "InvalidCallbackError",
    "InvalidDataError",
    "KLCorrected",
    "NaturalGradientSVI",
    "NotConvergedWarning",
    "PolyaGammaSVGP",
    "RobbinsMonro",
    "Trace",
    "UnsupportedConfigurationError",
    "VIConcave",
    "VIJJ",
    "VITaylor",
    "fit",
    "greedy_inducing_points",
    "kmeans_inducing_points",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name], __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _SUBPACKAGES:
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return __all__
