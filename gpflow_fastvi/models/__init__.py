"""The models: thin classes that own the parameters and wire a site rule to the shared algebra."""

from .base import GaussianSitesModel
from .vi_jj import VIJJ

__all__ = ["GaussianSitesModel", "VIJJ"]
