"""
gpflow_fastvi: fast variational GP classification for GPflow 2.

Swap :class:`gpflow.models.SVGP` for a model here, keep the kernel, inducing inputs, likelihood and
predictions, and train with :func:`fit` (or GPflow's own optimisers on ``model.training_loss``).
"""
from ._version import __version__
from .exceptions import CholeskyError, IncompatibleLikelihoodError, InvalidDataError
from .inducing import kmeans_inducing_points
from .models import VIJJ, GaussianSitesModel
from .training import Trace, fit

__all__ = [
    "CholeskyError",
    "GaussianSitesModel",
    "IncompatibleLikelihoodError",
    "InvalidDataError",
    "Trace",
    "VIJJ",
    "__version__",
    "fit",
    "kmeans_inducing_points",
]
