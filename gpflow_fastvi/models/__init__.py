"""The models: thin classes that own the parameters and wire a site rule to the shared algebra."""

from .base import GaussianSitesModel
from .kl_corrected import KLCorrected
from .polya_gamma import PolyaGammaSVGP
from .vi_jj import VIJJ
from .vi_taylor import VITaylor

__all__ = ["GaussianSitesModel", "KLCorrected", "PolyaGammaSVGP", "VIJJ", "VITaylor"]
