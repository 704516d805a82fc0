"""The models: thin classes that own the parameters and wire a site rule to the shared algebra."""

from .base import GaussianSitesModel
from .polya_gamma import PolyaGammaSVGP
from .vi_jj import VIJJ
from .vi_taylor import VITaylor

__all__ = ["GaussianSitesModel", "PolyaGammaSVGP", "VIJJ", "VITaylor"]
