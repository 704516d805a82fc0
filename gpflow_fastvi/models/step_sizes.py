"""
How large a step on q(u) the shared natural-gradient step takes, and how many closed-form steps a
full-data evaluation takes: the step-size policy of every model. The measurements behind each
default are in the docs (:ref:`defaults-step-sizes`).
"""

from typing import Any

import gpflow
import tensorflow as tf

AVERAGED_POINTS = 3000
"""
The step size for mini-batches of s points of :func:`~gpflow_fastvi.training.svi_plan` (``fit``'s
SVI route) is the constant ρ = min(1, s / this): q(u) then averages the batches' targets over
about this many points, whatever the batch size, and keeps up with the hyperparameters that Adam
moves at every step (a Robbins–Monro ρₜ → 0 lets it lag them).
"""

LOSS_AVERAGED_POINTS = 10_000
"""
The same for a mini-batch ``training_loss`` (GPflow's Adam loop over
``training_loss_closure(iter(dataset))``): ρ = min(1, s / this). Such a loop ends wherever its
last step left q(u), with no closed-form pass over all the data after it, so q(u) averages over
more points than in ``fit``'s SVI route.
"""


FULL_DATA_STEPS = 3
"""
The closed-form steps on q(u) that one evaluation of a model's ``training_loss`` on all the data
takes (each a pass over the data), from the stored q(u): the evaluations of the persistent route
(``n_upd``), which were measured there (:mod:`gpflow_fastvi.training.persistent`).
"""


def mini_batch_step_size(batch_size: Any, averaged_points: int = AVERAGED_POINTS) -> Any:
    """
    The constant ρ = min(1, s / ``averaged_points``) for mini-batches of s points (default
    :data:`AVERAGED_POINTS`); s may be an int or a scalar tensor (a batch whose size is known only
    when it runs).
    """
    if tf.is_tensor(batch_size):
        dtype = gpflow.config.default_float()
        return tf.minimum(tf.constant(1.0, dtype), tf.cast(batch_size, dtype) / averaged_points)
    return min(1.0, batch_size / averaged_points)
