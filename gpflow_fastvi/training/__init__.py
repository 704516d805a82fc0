"""Training loops: the model-agnostic :func:`fit` and the per-model plans it runs."""

from .loops import Trace, fit
from .plans import LBFGSStage, TrainingPlan, alternating_plan
from .svi import NaturalGradientSVI, RobbinsMonro, svi_plan

__all__ = [
    "LBFGSStage",
    "NaturalGradientSVI",
    "RobbinsMonro",
    "Trace",
    "TrainingPlan",
    "alternating_plan",
    "fit",
    "svi_plan",
]
