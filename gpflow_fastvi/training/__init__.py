"""Training loops: the model-agnostic :func:`fit`, and the drivers that build the plans it runs."""

from .loops import DRIVERS, fit
from .persistent import persistent_plan
from .plans import LBFGSStage, LogScale, TrainingPlan, alternating_plan
from .run import Trace, run_plan
from .svi import NaturalGradientSVI, RobbinsMonro, svi_plan

__all__ = [
    "DRIVERS",
    "LBFGSStage",
    "LogScale",
    "NaturalGradientSVI",
    "RobbinsMonro",
    "Trace",
    "TrainingPlan",
    "alternating_plan",
    "fit",
    "persistent_plan",
    "run_plan",
    "svi_plan",
]
