"""
:class:`NaturalGradientStep`: the stochastic variational step every model shares — on a batch,
the sites read off q(u), their statistics summed, and q(u) moved by ρ towards the batch's
closed-form optimum in natural parameters (:mod:`gpflow_fastvi.gaussian.natural`) — with the
batch's estimate of the sites' ELBO, from the same projection of the batch.
"""

from typing import Any, Optional, Tuple

import tensorflow as tf
from gpflow.base import RegressionData

from ..distribution import sum_and_gradient_over_replicas
from ..gaussian import (
    NaturalParameters,
    Projection,
    natural_gradient_parameters,
    q_from_natural,
    sites_elbo,
    step_statistics,
    stored_q,
    summed_expected_sites,
    whitened_q,
)
from ..types import SiteStatistics
from .predictions import SitePredictions
from .step_sizes import LOSS_AVERAGED_POINTS, mini_batch_step_size


class NaturalGradientStep(SitePredictions):
    """
    The natural-gradient step of :class:`~gpflow_fastvi.models.protocol.SiteModel` and the
    batch ELBO it returns, written once for every model.
    """

    def batch_sites_elbo(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        L: tf.Tensor,
        q_mu: tf.Tensor,
        q_sqrt: tf.Tensor,
        projection: Optional[Projection] = None,
    ) -> tf.Tensor:
        """
        The ELBO of the sites at q(u) = (``q_mu``, ``q_sqrt``) estimated from the batch (X, Y):
        data_scale · Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] − KL, with each site's local parameters
        optimal for the marginals (:func:`~gpflow_fastvi.gaussian.natural.sites_elbo`). The sum
        is taken by :meth:`~gpflow_fastvi.models.passes.DataPasses.sum_over_projected_rows` (the batch's ``projection`` by L = chol(Kmm) saves
        projecting it again, where one device makes the pass).
        """
        m, R = whitened_q(q_mu, q_sqrt, L, self.whiten)
        total = self.sum_over_projected_rows(self.rows_expected_sites, X, Y, L, (m, R), projection)
        return sites_elbo(total, m, R, self.data_scale(X))

    def rows_expected_sites(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Projection, m: tf.Tensor, R: tf.Tensor
    ) -> tf.Tensor:
        """Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] over the rows (X, Y) with the given ``projection``, for
        q(v) = N(m, R Rᵀ): the sum over points of :meth:`batch_sites_elbo`."""
        return summed_expected_sites(
            projection,
            self.mean_function(X),
            m,
            R,
            lambda Fmu, Fvar: self.local_sites(X, Y, Fmu, Fvar),
        )

    def rows_step_statistics(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Projection, m: tf.Tensor, R: tf.Tensor
    ) -> SiteStatistics:
        """The statistics of the sites read off q(v) = N(m, R Rᵀ) at the rows (X, Y) with the
        given ``projection``: the sum over points of :meth:`natural_gradient_parameters`. Held
        fixed: no gradient."""
        stats = step_statistics(
            tf.nest.map_structure(tf.stop_gradient, projection),
            tf.stop_gradient(self.mean_function(X)),
            m,
            R,
            lambda Fmu, Fvar: self.local_sites(X, Y, Fmu, Fvar),
        )
        return tf.nest.map_structure(tf.stop_gradient, stats)

    # ----------------------------------------------------------------------------------------------
    # The step.

    def natural_gradient_parameters(
        self,
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
        of size ``rho`` from q(u) = (``q_mu``, ``q_sqrt``) on the batch (X, Y): the sites' local
        parameters are set for the given q(u) (:meth:`local_sites`), their statistics summed by
        :meth:`~gpflow_fastvi.models.passes.DataPasses.sum_over_projected_rows` (from the batch's ``projection`` when given), and q(v) moves towards
        the batch's closed-form optimum scaled by :meth:`data_scale`
        (:func:`~gpflow_fastvi.gaussian.natural.natural_gradient_parameters`). Held fixed: no
        gradient.
        """
        L = tf.stop_gradient(L)
        m, R = whitened_q(q_mu, q_sqrt, L, self.whiten)
        m, R = tf.stop_gradient(m), tf.stop_gradient(R)
        stats = self.sum_over_projected_rows(self.rows_step_statistics, X, Y, L, (m, R), projection)
        natural = natural_gradient_parameters(
            m, R, stats, self.data_scale(X), tf.convert_to_tensor(rho, dtype=L.dtype)
        )
        return tf.nest.map_structure(tf.stop_gradient, natural)

    def stored_q_from_natural(
        self, natural: NaturalParameters, L: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        ``(q_mu, q_sqrt)`` in the stored frame (through L = chol(Kmm)) for q(v) with natural
        parameters ``natural``. Held fixed: no gradient, in either frame.
        """
        L = tf.stop_gradient(L)
        m, R = q_from_natural(natural, L, True)
        return stored_q(m, R[0], L, self.whiten)

    def natural_gradient_step(self, data: RegressionData, rho: tf.Tensor) -> tf.Tensor:
        """
        One stochastic variational step on the batch ``data`` = (X, Y): q(u) takes the
        natural-gradient step of size ``rho`` of :meth:`natural_gradient_parameters`, and
        ``q_mu``/``q_sqrt`` are assigned once.

        Returns the batch's estimate of the sites' ELBO at the new q(u) (:meth:`batch_sites_elbo`),
        differentiable in the hyperparameters and computed from the same projection of the batch,
        so that a caller can take its hyperparameter step at no extra cost (as
        :class:`~gpflow_fastvi.NaturalGradientSVI` does). With the full batch and ρ = 1 the step
        lands on the closed-form optimum from any start. Under a strategy
        (:meth:`pass_strategy`) the replicas share the batch, each projecting its rows once.
        """
        X, Y = data
        L = self.Kmm_cholesky()
        strategy = self.pass_strategy()
        if strategy is not None:
            return self._natural_gradient_step_on_replicas(X, Y, L, rho, strategy)
        projection = self.projection(X, L)  # once, for both sums
        q_mu, q_sqrt = self.q_mu, self.q_sqrt
        natural = self.natural_gradient_parameters(X, Y, L, q_mu, q_sqrt, rho, projection)
        q_mu, q_sqrt = self.stored_q_from_natural(natural, L)
        self.store_q(q_mu, q_sqrt)
        return self.batch_sites_elbo(X, Y, L, q_mu, q_sqrt, projection)

    def _natural_gradient_step_on_replicas(
        self, X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, rho: Any, strategy: tf.distribute.Strategy
    ) -> tf.Tensor:
        """
        :meth:`natural_gradient_step` with the batch shared among the replicas of ``strategy``,
        each projecting its rows once: it sums its rows' step statistics, all-reduces them (the
        target), forms the new q(u) from them as every replica does, and sums its rows' expected
        sites at the new q(u) with their gradient; those are all-reduced together
        (:func:`~gpflow_fastvi.distribution.sum_and_gradient_over_replicas`).
        """
        whiten = self.whiten
        q_mu, q_sqrt = tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt)
        m, R = (tf.stop_gradient(t) for t in whitened_q(q_mu, q_sqrt, L, whiten))
        scale = self.data_scale(X)  # of the whole batch, not of a replica's share
        rho = tf.convert_to_tensor(rho, dtype=L.dtype)

        def replica_step(X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor) -> Tuple[tf.Tensor, Any]:
            projection = self.projection(X, L)
            stats = self.rows_step_statistics(X, Y, projection, m, R)
            stats = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, stats
            )
            natural = natural_gradient_parameters(m, R, stats, scale, rho)
            new_q = self.stored_q_from_natural(natural, L)  # held fixed
            new_m, new_R = whitened_q(*new_q, L, whiten)
            return self.rows_expected_sites(X, Y, projection, new_m, new_R), new_q

        # The new q(u) comes back from the replicas, which formed it: no second factorisation.
        expected, (q_mu, q_sqrt) = sum_and_gradient_over_replicas(
            replica_step, (X, Y), strategy, (L,), self.trainable_variables
        )
        self.store_q(q_mu, q_sqrt)
        m, R = whitened_q(q_mu, q_sqrt, L, whiten)
        return sites_elbo(expected, m, R, scale)

    def mini_batch_loss_step(self, data: RegressionData) -> tf.Tensor:
        """
        The step of a mini-batch ``training_loss``: :meth:`natural_gradient_step` on the batch
        with ρ = min(1, b / :data:`~gpflow_fastvi.models.step_sizes.LOSS_AVERAGED_POINTS`); returns −(the batch's estimate of the
        sites' ELBO at the new q(u) + the log prior density of the parameters).
        """
        X, _ = data
        rho = mini_batch_step_size(tf.shape(X)[0], LOSS_AVERAGED_POINTS)
        return -(self.natural_gradient_step(data, rho) + self.log_prior_density())
