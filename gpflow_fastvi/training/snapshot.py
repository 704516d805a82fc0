"""A copy of a model's variables to put it back to: after a failed step, or a round that did no better."""

from typing import Any, List

import numpy as np


class Snapshot:
    """
    A copy of a model's variables (hyperparameters and q(u): O(M²) numbers), taken after every
    successful iteration, to put the model back to when a later one fails or is interrupted.
    """

    def __init__(self, model: Any):
        self.model = model
        self.variables = tuple(getattr(model, "variables", ()))
        self.values = self.read()

    def read(self) -> List[np.ndarray]:
        """The variables' current values, copied."""
        return [variable.numpy() for variable in self.variables]

    @staticmethod
    def finite(values: List[np.ndarray]) -> bool:
        """Whether every floating-point value among ``values`` is finite."""
        return all(np.all(np.isfinite(v)) for v in values if np.issubdtype(v.dtype, np.floating))

    def restore(self) -> None:
        for variable, value in zip(self.variables, self.values):
            variable.assign(value)
        if hasattr(self.model, "store_q"):  # q(u) was set at the restored hyperparameters
            self.model.q_frame.store(self.model.q_mu, self.model.q_sqrt)
