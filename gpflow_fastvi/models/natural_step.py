"""
The stochastic variational step every model shares (:meth:`SiteModel.natural_gradient_step
<gpflow_fastvi.models.site_model.SiteModel.natural_gradient_step>`): on a batch, the sites read
off q(u), their statistics summed, and q(u) moved by ρ towards the batch's closed-form optimum in
natural parameters (:mod:`gpflow_fastvi.gaussian.natural`), with the batch's estimate of the
sites' ELBO from the same projection of the batch. Written once, as functions of the model, for
any number L of latent functions (``num_latent_gps``): one factor L = chol(Kmm) and one projection
A = L⁻¹Kmn per pass, shared by the latent functions; each has its own q(u_l), its own column of
sites and its own step, all taken as one batch.
"""

import functools
from typing import Any, Optional, Protocol, Tuple, runtime_checkable

import tensorflow as tf
from gpflow.base import RegressionData

from ..distribution import sum_and_gradient_over_replicas
from ..gaussian import (
    NaturalParameters,
    Projection,
    WhitenedQ,
    natural_gradient_parameters,
    q_from_natural,
    sites_elbo,
    step_statistics,
    summed_expected_sites,
)
from ..types import Sites, SiteStatistics
from .host import PartsHost
from .passes import DataPasses
from .q_frame import QFrame
from .step_sizes import LOSS_AVERAGED_POINTS, mini_batch_step_size


@runtime_checkable
class StepHost(PartsHost, Protocol):
    """The model as the natural step sees it: what its parts see, the parts themselves, its site
    rule, its prior density and q(v)'s stored form."""

    @property
    def _passes(self) -> DataPasses: ...

    @property
    def _q_frame(self) -> QFrame: ...

    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """The sites at the marginals (Fmu, Fvar) of the points X with targets Y."""
        ...

    def log_prior_density(self) -> tf.Tensor:
        """The log prior density of the hyperparameters."""
        ...

    def _stored(self, q: WhitenedQ, L: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """q(v), whitened by L, as the model stores it."""
        ...


def batch_sites_elbo(
    model: StepHost,
    X: tf.Tensor,
    Y: tf.Tensor,
    L: tf.Tensor,
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    projection: Optional[Projection] = None,
) -> tf.Tensor:
    """
    The ELBO of the sites at q(u) = (``q_mu``, ``q_sqrt``) estimated from the batch (X, Y):
    data_scale · Σᵢ Σ_l E_q[a_il + b_il f_il − w_il f_il²/2] − Σ_l KL, with each site's local
    parameters optimal for the marginals (:func:`~gpflow_fastvi.gaussian.natural.sites_elbo`).
    The sum is taken by
    :meth:`~gpflow_fastvi.models.passes.DataPasses.sum_over_projected_rows` (the batch's
    ``projection`` by L = chol(Kmm) saves projecting it again, where one device makes the
    pass).
    """
    q = model._whitened(q_mu, q_sqrt, L)
    total = model._passes.sum_over_projected_rows(
        functools.partial(rows_expected_sites, model), X, Y, L, q, projection
    )
    return sites_elbo(total, q, model._passes.data_scale(X))


def rows_expected_sites(
    model: StepHost, X: tf.Tensor, Y: tf.Tensor, projection: Projection, *q: tf.Tensor
) -> tf.Tensor:
    """Σᵢ Σ_l E_q[a_il + b_il f_il − w_il f_il²/2] over the rows (X, Y) with the given
    ``projection``, for q(v) given as its tensors (m, R): the sum over points of
    :func:`batch_sites_elbo`."""
    return summed_expected_sites(
        projection,
        model.mean_function(X),
        WhitenedQ(*q),
        lambda Fmu, Fvar: model.local_sites(X, Y, Fmu, Fvar),
    )


def rows_step_statistics(
    model: StepHost, X: tf.Tensor, Y: tf.Tensor, projection: Projection, *q: tf.Tensor
) -> SiteStatistics:
    """The statistics of the sites read off q(v), given as its tensors (m, R), at the rows
    (X, Y) with the given ``projection``: the sum over points of
    :func:`stepped_natural_parameters`. Held fixed: no gradient."""
    stats = step_statistics(
        tf.nest.map_structure(tf.stop_gradient, projection),
        tf.stop_gradient(model.mean_function(X)),
        WhitenedQ(*q),
        lambda Fmu, Fvar: model.local_sites(X, Y, Fmu, Fvar),
    )
    return tf.nest.map_structure(tf.stop_gradient, stats)


# ----------------------------------------------------------------------------------------------
# The step.


def stepped_natural_parameters(
    model: StepHost,
    X: tf.Tensor,
    Y: tf.Tensor,
    L: tf.Tensor,
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    rho: Any,
    projection: Optional[Projection] = None,
) -> NaturalParameters:
    """
    The natural parameters of q(v) (whitened by L = chol(Kmm)) after a natural-gradient step
    of size ``rho`` from q(u) = (``q_mu``, ``q_sqrt``) on the batch (X, Y): the sites' local parameters are set for the given q(u)
    (the model's ``local_sites``), their statistics summed by
    :meth:`~gpflow_fastvi.models.passes.DataPasses.sum_over_projected_rows` (from the batch's
    ``projection`` when given), and each q(v_l) moves towards the batch's closed-form optimum
    scaled by :meth:`~gpflow_fastvi.models.passes.DataPasses.data_scale`
    (:func:`~gpflow_fastvi.gaussian.natural.natural_gradient_parameters`). Held fixed: no
    gradient.
    """
    L = tf.stop_gradient(L)
    q = tf.nest.map_structure(tf.stop_gradient, model._whitened(q_mu, q_sqrt, L))
    stats = model._passes.sum_over_projected_rows(
        functools.partial(rows_step_statistics, model), X, Y, L, q, projection
    )
    rho = tf.convert_to_tensor(rho, dtype=L.dtype)
    natural = natural_gradient_parameters(q, stats, model._passes.data_scale(X), rho)
    return tf.nest.map_structure(tf.stop_gradient, natural)


def stored_q_from_natural(
    model: StepHost, natural: NaturalParameters, L: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    ``(q_mu, q_sqrt)`` as the model stores them (through L = chol(Kmm), in its family:
    :meth:`~gpflow_fastvi.models.site_model.SiteModel._stored`) for the q(v) with natural
    parameters ``natural``. Held fixed: no gradient, in either frame. For ``q_diag=True`` the
    step of size ρ thus lands on the mean field of (1 − ρ) η + ρ η̂, whose fixed point is the
    factorised family's optimum: its precisions are the diagonal of the target's, and its mean
    the target's mean.
    """
    L = tf.stop_gradient(L)
    return model._stored(q_from_natural(natural), L)


def natural_gradient_step(model: StepHost, data: RegressionData, rho: Any) -> tf.Tensor:
    """
    One stochastic variational step on the batch ``data`` = (X, Y): q(u) takes the
    natural-gradient step of size ``rho`` of :func:`stepped_natural_parameters`, and
    ``q_mu``/``q_sqrt`` are assigned once.

    Returns the batch's estimate of the sites' ELBO at the new q(u) (:func:`batch_sites_elbo`),
    differentiable in the hyperparameters and computed from the same projection of the batch,
    so that a caller can take its hyperparameter step at no extra cost (as
    :class:`~gpflow_fastvi.NaturalGradientSVI` does). With the full batch and ρ = 1 the step
    lands on the closed-form optimum from any start. Under a strategy
    (:meth:`~gpflow_fastvi.models.passes.DataPasses.pass_strategy`) the replicas share the batch, each projecting its rows once.
    """
    X, Y = data
    L = model._passes.Kmm_cholesky()
    strategy = model._passes.pass_strategy()
    if strategy is not None:
        return _natural_gradient_step_on_replicas(model, X, Y, L, rho, strategy)
    projection = model._passes.projection(X, L)  # once, for both sums
    q_mu, q_sqrt = model.q_mu, model.q_sqrt
    natural = stepped_natural_parameters(model, X, Y, L, q_mu, q_sqrt, rho, projection)
    q_mu, q_sqrt = stored_q_from_natural(model, natural, L)
    model._q_frame.store(q_mu, q_sqrt)
    return batch_sites_elbo(model, X, Y, L, q_mu, q_sqrt, projection)


def _natural_gradient_step_on_replicas(
    model: StepHost,
    X: tf.Tensor,
    Y: tf.Tensor,
    L: tf.Tensor,
    rho: Any,
    strategy: tf.distribute.Strategy,
) -> tf.Tensor:
    """
    :func:`natural_gradient_step` with the batch shared among the replicas of ``strategy``,
    each projecting its rows once: it sums its rows' step statistics, all-reduces them (the
    target), forms the new q(u) from them as every replica does, and sums its rows' expected
    sites at the new q(u) with their gradient; those are all-reduced together
    (:func:`~gpflow_fastvi.distribution.sum_and_gradient_over_replicas`).
    """
    q_mu, q_sqrt = tf.convert_to_tensor(model.q_mu), tf.convert_to_tensor(model.q_sqrt)
    q = tf.nest.map_structure(tf.stop_gradient, model._whitened(q_mu, q_sqrt, L))
    scale = model._passes.data_scale(X)  # of the whole batch, not of a replica's share
    rho = tf.convert_to_tensor(rho, dtype=L.dtype)

    def replica_step(X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        projection = model._passes.projection(X, L)
        stats = rows_step_statistics(model, X, Y, projection, *q)
        stats = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, stats)
        natural = natural_gradient_parameters(q, stats, scale, rho)
        new_q = stored_q_from_natural(model, natural, L)  # held fixed
        return rows_expected_sites(model, X, Y, projection, *model._whitened(*new_q, L)), new_q

    # The new q(u) comes back from the replicas, which formed it: no second factorisation.
    expected, (q_mu, q_sqrt) = sum_and_gradient_over_replicas(
        replica_step, (X, Y), strategy, (L,), model.trainable_variables
    )
    model._q_frame.store(q_mu, q_sqrt)
    return sites_elbo(expected, model._whitened(q_mu, q_sqrt, L), scale)


def _mini_batch_loss_step(model: StepHost, data: RegressionData) -> tf.Tensor:
    """
    The step of a mini-batch ``training_loss``: :func:`natural_gradient_step` on the batch
    with ρ = min(1, b / :data:`~gpflow_fastvi.models.step_sizes.LOSS_AVERAGED_POINTS`); returns −(the batch's estimate of the
    sites' ELBO at the new q(u) + the log prior density of the parameters).
    """
    X, _ = data
    rho = mini_batch_step_size(tf.shape(X)[0], LOSS_AVERAGED_POINTS)
    loss = -(natural_gradient_step(model, data, rho) + model.log_prior_density())
    # GPflow's natural-gradient recipe asks this loss for its gradient in (q_mu, q_sqrt). A
    # full-data loss gives that of the KL to the q(u) its steps reached (SiteModel._with_q_gradient),
    # zero where it stored it; this step always stores its q(u), so the gradient is zero, given
    # without the factor of Kmm that KL would take on every mini-batch.
    held_q = (tf.reduce_sum(tf.convert_to_tensor(p)) for p in (model.q_mu, model.q_sqrt))
    return loss + 0.0 * tf.add_n(list(held_q))
