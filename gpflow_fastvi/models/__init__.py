"""The models: thin classes that own the parameters and wire a site rule to the shared algebra."""

from .base import GaussianSitesModel
from .closed_form import ClosedFormSiteModel
from .kl_corrected import KLCorrected
from .polya_gamma import PolyaGammaSVGP
from .site_model import SiteModel
from .vi_concave import VIConcave
from .vi_jj import VIJJ
from .vi_taylor import VITaylor

ALL_MODELS = (VIJJ, VITaylor, PolyaGammaSVGP, KLCorrected, VIConcave)
"""Every model class of the package, in the order of the docs' model table."""

__all__ = [
    "ALL_MODELS",
    "ClosedFormSiteModel",
    "GaussianSitesModel",
    "KLCorrected",
    "PolyaGammaSVGP",
    "SiteModel",
    "VIConcave",
    "VIJJ",
    "VITaylor",
]
