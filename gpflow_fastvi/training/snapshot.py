"""A copy of a model's variables to put it back to: after a failed step, or a round that did no better."""

from typing import List

import numpy as np
import tensorflow as tf

from ..models import SiteModel


class Snapshot:
    """
    A copy of a model's variables (hyperparameters and q(u): O(M²) numbers), taken after every
    successful iteration, to put the model back to when a later one fails or is interrupted.
    The model is any module :func:`~gpflow_fastvi.fit` trains (GPflow's own ``SGPR`` too).
    """

    def __init__(self, model: tf.Module):
        self.model = model
        self.variables = tuple(model.variables)
        self.values = self.read()

    def read(self) -> List[np.ndarray]:
        """The variables' current values, copied."""
        return [variable.numpy() for variable in self.variables]

    @staticmethod
    def finite(values: List[np.ndarray]) -> bool:
        """Whether every floating-point value among ``values`` is finite."""
        return all(np.all(np.isfinite(v)) for v in values if np.issubdtype(v.dtype, np.floating))

    def restore(self) -> None:
        """Put the variables back; a model of the package also records its q(u) as set at the
        restored hyperparameters (its :class:`~gpflow_fastvi.models.q_frame.QFrame`), where it
        was set, so that its next step reads the sites there."""
        for variable, value in zip(self.variables, self.values):
            variable.assign(value)
        if isinstance(self.model, SiteModel):
            self.model._q_frame.start_here()
