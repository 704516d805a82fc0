"""
How large a step on q(u) the shared natural-gradient step takes, and how many closed-form steps a
full-data evaluation takes: the step-size policy of every model, with the measurements behind it.
"""

from typing import Any

import gpflow
import tensorflow as tf

AVERAGED_POINTS = 3000
"""
The step size for mini-batches of s points of :func:`~gpflow_fastvi.training.svi_plan` (``fit``'s
SVI route) is the constant ρ = min(1, s / this): q(u) then averages the batches' targets over
about this many points, whatever the batch size, and keeps up with the hyperparameters that Adam
moves at every step (a Robbins–Monro ρₜ → 0 lets it lag them). Measured with batches of 1000
(30 s): on ijcnn1 ρ = 0.3 reached the benchmark target in 15.8 s, ρ = 0.1 in 24.4 s, and
Robbins–Monro (τ = 1, κ = 0.6) not at all; on a9a all three within 3.1–3.6 s.
"""

LOSS_AVERAGED_POINTS = 10_000
"""
The same for a mini-batch ``training_loss`` (GPflow's Adam loop over
``training_loss_closure(iter(dataset))``): ρ = min(1, s / this). Such a loop ends wherever its
last step left q(u), with no closed-form pass over all the data after it, so q(u) averages over
more points than in ``fit``'s SVI route. Measured on VIJJ with 2000 Adam steps (learning rate
0.05) on shuffled batches of 500, test accuracy / NLL / SVGP ELBO per training point at the end:
on ijcnn1 3000 points gave 0.9711 / 0.0955 / −0.1277, 10,000 gave 0.9720 / 0.0762 / −0.0998,
20,000 0.9714 / 0.0766 / −0.1004, 50,000 0.9684 / 0.0801 / −0.1042 (GPflow's SVGP with the same
loop: 0.9725 / 0.0818 / −0.1068); on banana (three shuffles) 3000 gave accuracies 0.8981–0.9047
and NLL 0.2198–0.2249, 10,000 0.9028–0.9038 and 0.2208–0.2217.
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
