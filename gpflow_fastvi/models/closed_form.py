"""
:class:`ClosedFormSiteModel`: the closed-form site step of the models with one, written once.

**One pass.** For each point: the marginal q(fₙ) of the current q(u), the local parameters that
are optimal for it, the site, and its contribution to the statistics Σ aₙ, A W Aᵀ and A b; then
the optimal q(u) for those sites in closed form. That is a closed-form site step
(:meth:`ClosedFormSiteModel.update_sites`), and the objective of the sites it read is the collapsed
bound of the same statistics (:mod:`gpflow_fastvi.gaussian`).

**What a subclass may override or call.** A model writes its site rule
(:meth:`~ClosedFormSiteModel._optimal_site_parameters`, :meth:`~ClosedFormSiteModel._site_rule`,
optionally :meth:`~ClosedFormSiteModel._step_rule`). A model whose step is not the collapsed one
(:class:`~gpflow_fastvi.VIConcave`) overrides :meth:`~ClosedFormSiteModel._closed_form_steps`,
which :meth:`~ClosedFormSiteModel._stepped_sites`, :meth:`~ClosedFormSiteModel.update_sites` and
the full-data ``training_loss`` call, and builds it from the pieces of a pass:
:meth:`~ClosedFormSiteModel._steps_in_memory`, :meth:`~ClosedFormSiteModel._pass_statistics`,
:meth:`~ClosedFormSiteModel._site_statistics` and
:meth:`~gpflow_fastvi.models.passes.DataPasses.sum_over_data`. The persistent and alternating
drivers (:mod:`gpflow_fastvi.training`) serve these models; the SVI driver serves every
:class:`~gpflow_fastvi.models.site_model.SiteModel`.
"""

import abc
from typing import Any, Callable, Optional, Tuple

import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import RegressionData

from ..gaussian import (
    CollapsedFactors,
    WhitenedQ,
    collapsed_bound,
    collapsed_factors,
    expected_sites,
    kl_between,
    kl_to_prior,
    map_over_batches,
    marginals,
    optimal_whitened_q,
    shift_sites,
    statistics_from_projection,
)
from ..types import Data, SiteParameters, Sites, SiteStatistics, SteppedSites
from ..validation import positive_int
from .site_model import MARGINALS, SiteModel


class ClosedFormSiteModel(SiteModel):
    """
    What the models with a closed-form site step add to :class:`SiteModel`: the site rule a
    subclass writes, and the closed-form steps, the collapsed bound and the held sites, written
    once for any site rule.
    """

    # ----------------------------------------------------------------------------------------------
    # The site rule, which a subclass writes.

    @abc.abstractmethod
    @check_shapes(*MARGINALS, "return[all]: [N, L]")
    def _optimal_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> SiteParameters:
        """The local site parameters that are optimal for q(f) = N(Fmu, Fvar) at the points X."""

    @abc.abstractmethod
    def _site_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """Sites (a, b, w) on f at inputs X with targets Y for the given local parameters."""

    def _step_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """
        The sites whose optimal q(u) a closed-form step goes through when further steps follow
        it. By default the model's own sites (:meth:`_site_rule`): the step is then coordinate
        ascent, as for VIJJ's ξ and VITaylor's expansion points. A model may step through other
        sites with the same fixed point (:class:`~gpflow_fastvi.KLCorrected`'s Newton E-step).
        """
        return self._site_rule(X, Y, *site_parameters)

    @inherit_check_shapes
    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """The site rule at the local parameters that are optimal for q(f) = N(Fmu, Fvar)."""
        return self._site_rule(X, Y, *self._optimal_site_parameters(X, Y, Fmu, Fvar))

    # ----------------------------------------------------------------------------------------------
    # The data a step works on.

    def _projects_all_at_once(self, data: Data) -> bool:
        """
        Whether a step projects all the data at once and keeps the projection for its passes:
        the data as arrays, no :attr:`batch_size`, and no :attr:`~gpflow_fastvi.models.passes.DataPasses.distribute_strategy` sharing
        the passes among replicas (each of which projects its own rows).
        """
        return (
            self.batch_size is None
            and not isinstance(data, tf.data.Dataset)
            and self._passes.pass_strategy() is None
        )

    def _arrays_of(self, data: Data, what: str) -> Tuple[tf.Tensor, tf.Tensor]:
        """The data as (X, Y) tensors, or an error for a dataset where ``what`` needs arrays."""
        if isinstance(data, tf.data.Dataset):
            raise ValueError(
                f"{what} holds one value per training point, so it needs the data as arrays "
                "(X, Y), not a tf.data.Dataset. To stream, use fit's default route "
                "(method='persistent'), which keeps nothing per point."
            )
        return data

    # ----------------------------------------------------------------------------------------------
    # One pass over the data, and closed-form steps.

    def _read_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Any, *q: tf.Tensor
    ) -> SiteParameters:
        """
        The local parameters that are optimal for the marginals, at the points X (whose
        ``projection`` is given), of q(v) whitened by the projection's Kmm factor, given as its
        tensors ``q`` = (m, R): the sites a closed-form step reads off a q(u). Held fixed: no
        gradient.
        """
        Fmu, Fvar = self._held_marginals(X, projection, q)
        return tuple(tf.stop_gradient(p) for p in self._optimal_site_parameters(X, Y, Fmu, Fvar))

    def _held_marginals(
        self, X: tf.Tensor, projection: Any, q: Tuple[tf.Tensor, ...]
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The marginals q(fᵢ) = N(Fmu, Fvar) [N, L] at the points X (whose ``projection`` is
        given) of q(v), given as its tensors (m, R), held fixed: no gradient."""
        Gmu, Fvar = marginals(
            tf.stop_gradient(projection.A),
            tf.stop_gradient(projection.Ktilde_diag),
            WhitenedQ(*q),
        )
        return tf.stop_gradient(Gmu + self.mean_function(X)), tf.stop_gradient(Fvar)

    def _site_statistics(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        projection: Any,
        rule: Callable[..., Sites],
        site_parameters: SiteParameters,
    ) -> SiteStatistics:
        """The statistics of the sites by ``rule`` with the given local parameters at the points X
        (whose ``projection`` is given), moved onto the zero-mean process g = f − μ(X), for every
        latent function from the one projection."""
        sites = shift_sites(rule(X, Y, *site_parameters), self.mean_function(X))
        return statistics_from_projection(projection, sites)

    def _pass_statistics(
        self,
        data: Data,
        L: tf.Tensor,
        rule: Callable[..., Sites],
        projection: Optional[Any] = None,
        q: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> SiteStatistics:
        """
        One pass (module docstring): the statistics of the sites, by ``rule``, whose local
        parameters are optimal for the marginals of the stored q(u) (read where it was set,
        :class:`~gpflow_fastvi.models.q_frame.QFrame`), or of ``q`` = (m, R), q(v) whitened by
        ``L``, in batches of :attr:`batch_size`. Differentiable in θ with the local parameters
        held fixed.

        :param projection: A and diag K̃ of all the data when the caller has them already
            (without batches, where it saves the projection, the dearest part of a pass).
        """
        stored = self._q_frame.stored_q() if q is None else None

        def batch_statistics(
            X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, *q: tf.Tensor
        ) -> SiteStatistics:
            batch_projection = (
                projection if projection is not None else self._passes.projection(X, L)
            )
            if q:
                params = self._read_site_parameters(X, Y, batch_projection, *q)
            else:
                assert stored is not None  # read above, as q is not given
                Fmu, Fvar = self._q_frame.stored_marginals(X, stored, batch_projection)
                params = tuple(
                    tf.stop_gradient(p) for p in self._optimal_site_parameters(X, Y, Fmu, Fvar)
                )
            return self._site_statistics(X, Y, batch_projection, rule, params)

        shared = (L,) if q is None else (L, *(tf.stop_gradient(t) for t in q))
        return self._passes.sum_over_data(batch_statistics, data, shared, self.batch_size)

    def _steps_in_memory(self, data: Data, site_parameters: Optional[SiteParameters]) -> bool:
        """
        Whether the steps see all the data at once (:meth:`_projects_all_at_once`); given
        ``site_parameters`` (one value per point), they must.
        """
        in_memory = self._projects_all_at_once(data)
        if site_parameters is not None and not in_memory:
            raise ValueError(
                "stepped_sites(site_parameters=...) holds one value per point: it needs the data "
                "as arrays (X, Y), batch_size=None and no tf.distribute strategy."
            )
        return in_memory

    def _closed_form_steps(
        self, data: Data, num_updates: int, site_parameters: Optional[SiteParameters] = None
    ) -> SteppedSites:
        """
        :meth:`_stepped_sites` on the data: ``num_updates`` passes from the stored q(u) (or from
        the sites with the given local parameters), sharing one Kmm factor and (without batches)
        one projection; every pass but the last goes through :meth:`_step_rule`, the last through
        :meth:`_site_rule`, whose statistics give the objective and the new q(u).
        """
        num_updates = positive_int(num_updates, "num_updates")
        L = self._passes.Kmm_cholesky()
        in_memory = self._steps_in_memory(data, site_parameters)
        projection = self._passes.projection(data[0], L) if in_memory else None
        q: Optional[WhitenedQ] = None  # the first pass reads the stored q(u)
        for step in range(num_updates):
            last = step == num_updates - 1
            rule = self._site_rule if last else self._step_rule
            if step == 0 and site_parameters is not None:
                X, Y = self._arrays_of(data, "site_parameters")
                params = tuple(tf.stop_gradient(p) for p in site_parameters)
                stats = self._site_statistics(X, Y, projection, rule, params)
            else:
                stats = self._pass_statistics(data, L, rule, projection, q)
            factors = collapsed_factors(stats)
            q, optimum = self._optimum(factors, L)  # q: what the next pass reads
        assert q is not None  # num_updates ≥ 1
        q_mu, q_sqrt = self._stored(q, L)
        next_parameters: SiteParameters = ()
        yardstick = None
        if site_parameters is not None:
            # The sites of the new q(u), read where it is set: those the next step starts from.
            X, Y = self._arrays_of(data, "site_parameters")
            Fmu, Fvar = self._held_marginals(X, projection, q)
            next_parameters = tuple(
                tf.stop_gradient(p) for p in self._optimal_site_parameters(X, Y, Fmu, Fvar)
            )
            if not self._objective_is_bound:
                # fit's watch needs the SVGP ELBO of the q(u) it adopts: its marginals are here.
                expected = tf.reduce_sum(self._expected_latent_density(X, Y, Fmu, Fvar))
                yardstick = self._passes.data_scale(X) * expected - kl_to_prior(q)
        return SteppedSites(
            objective=self._bound(stats, factors, q, optimum),
            q_mu=tf.stop_gradient(q_mu),
            q_sqrt=tf.stop_gradient(q_sqrt),
            site_parameters=next_parameters,
            yardstick=yardstick,
        )

    def _stepped_sites(
        self,
        num_updates: int,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> SteppedSites:
        """
        ``num_updates`` closed-form site steps from the *stored* q(u), each a pass over the data
        that reads the sites off the current q(u) and forms the optimal q(u) for them, with the
        objective of the last sites read (the collapsed bound, for which the returned q(u) is
        optimal). Nothing is assigned (:meth:`_adopt` does that), so an optimiser may evaluate it at
        trial hyperparameters and keep the model at its last accepted state.

        The objective's gradient holds the last sites' local parameters fixed. For a bound
        maximised over them (VIJJ) that is the gradient of the maximum, by the envelope theorem,
        as the steps approach the sites' optimum; for Taylor sites it is the gradient at fixed
        expansion points, as in vi-Taylor's own L-BFGS-B stage.

        :param site_parameters: the local parameters the first step starts from instead of those
            read off the stored q(u), each [N, 1], for a training loop that keeps them between
            steps (:func:`~gpflow_fastvi.training.persistent_plan`): reading them off q(u) where
            it was set (:class:`~gpflow_fastvi.models.q_frame.QFrame`) at a trial θ costs a
            second projection of the data. Then the result also carries the local parameters read off its own q(u), where the
            next step starts. Data as arrays and ``batch_size=None`` only.
        """
        return self._closed_form_steps(
            self._passes.training_data(data), num_updates, site_parameters
        )

    def _adopt(self, stepped: SteppedSites) -> None:
        """Make the q(u) of :meth:`_stepped_sites` the model's own."""
        self._q_frame.store(stepped.q_mu, stepped.q_sqrt)

    def update_sites(
        self, num_updates: int = 1, *, data: Optional[RegressionData] = None
    ) -> tf.Tensor:
        """
        ``num_updates`` closed-form site steps (:meth:`_stepped_sites`), stored; returns the
        objective of the last sites read, for which the stored q(u) is optimal. For a bound
        maximised by coordinate ascent (:class:`~gpflow_fastvi.VIJJ`,
        :class:`~gpflow_fastvi.KLCorrected` with ``e_step="coordinate"``) no step can lower it;
        for :class:`~gpflow_fastvi.VITaylor`, whose objective moves with its expansion points,
        and KLCorrected's Newton E-step, the steps are Newton steps and the objective need not
        rise at each of them. Hyperparameters are left alone.
        """
        stepped = self._closed_form_steps(self._passes.training_data(data), num_updates)
        self._adopt(stepped)
        return stepped.objective

    # ----------------------------------------------------------------------------------------------
    # Sites held fixed: the paper's alternating schemes.

    def _site_parameters(self, data: Optional[RegressionData] = None) -> SiteParameters:
        """
        The sites' local parameters for the stored q(u), each [N, 1], computed batch by batch:
        what the paper's alternating schemes hold fixed while L-BFGS-B moves θ
        (:func:`~gpflow_fastvi.training.alternating_plan`). Memory O(N).
        """
        X, Y = self._arrays_of(self._passes.training_data(data), "site_parameters")
        L = self._passes.Kmm_cholesky()
        stored = self._q_frame.stored_q()

        def batch_parameters(X: tf.Tensor, Y: tf.Tensor) -> SiteParameters:
            Fmu, Fvar = self._q_frame.stored_marginals(X, stored, self._passes.projection(X, L))
            return tuple(self._optimal_site_parameters(X, Y, Fmu, Fvar))

        params = map_over_batches(batch_parameters, (X, Y), self.batch_size)
        return tuple(tf.stop_gradient(p) for p in params)

    def _fixed_site_statistics(
        self, X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, site_parameters: SiteParameters
    ) -> SiteStatistics:
        """The statistics of the sites with the given local parameters (each [N, L])."""

        def batch_statistics(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> SiteStatistics:
            *params, L = rest
            return self._site_statistics(
                X, Y, self._passes.projection(X, L), self._site_rule, tuple(params)
            )

        return self._passes.sum_over_data(
            batch_statistics, (X, Y, *site_parameters), (L,), self.batch_size
        )

    def _optimum(self, factors: CollapsedFactors, L: tf.Tensor) -> Tuple[WhitenedQ, WhitenedQ]:
        """
        The optimal q(v), whitened by L, in the model's family for the sites with these
        ``factors``, and their optimum q* over all Gaussians
        (:func:`~gpflow_fastvi.gaussian.optimal_q.optimal_whitened_q`): q is q* itself, or for
        ``q_diag=True`` its mean field in the stored frame, the optimum of the factorised family.
        """
        optimum = WhitenedQ(*optimal_whitened_q(factors))
        return self._in_family(optimum, L), optimum

    def _bound(
        self,
        stats: SiteStatistics,
        factors: CollapsedFactors,
        q: WhitenedQ,
        optimum: WhitenedQ,
    ) -> tf.Tensor:
        """
        The ELBO of the sites with these statistics at ``q``, their optimum in the model's family
        (:meth:`_optimum`, which also gives their full ``optimum`` q*): their collapsed bound
        (:mod:`gpflow_fastvi.gaussian.collapsed`), and for ``q_diag=True`` that less
        KL[q ‖ q*], the price of the factorised family
        (:func:`~gpflow_fastvi.gaussian.natural.mean_field_sqrt`). Differentiable in θ through
        the statistics: in closed form, the gradient of the optimum.
        """
        total = collapsed_bound(stats, factors).total
        if not self._q_diag:
            return total
        return total - kl_between(q, optimum)

    def _site_bound(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """
        The bound of the sites with the given local parameters, or of the sites read off the
        stored q(u), at their optimum in the model's family (:meth:`_bound`): the collapsed
        bound, for a full covariance.
        """
        data = self._passes.training_data(data)
        L = self._passes.Kmm_cholesky()
        if site_parameters is None:
            stats = self._pass_statistics(data, L, self._site_rule)
        else:
            X, Y = self._arrays_of(data, "site_parameters")
            stats = self._fixed_site_statistics(X, Y, L, site_parameters)
        factors = collapsed_factors(stats)
        return self._bound(stats, factors, *self._optimum(factors, L))

    def _update_q(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """
        Set q(u) to the closed-form optimum for the sites with the given local parameters (or
        for the sites read off the stored q(u), one :meth:`update_sites` step) at the current
        hyperparameters; return their collapsed bound.
        """
        if site_parameters is None:
            return self.update_sites(1, data=data)
        X, Y = self._arrays_of(self._passes.training_data(data), "site_parameters")
        L = self._passes.Kmm_cholesky()
        stats = self._fixed_site_statistics(X, Y, L, site_parameters)
        factors = collapsed_factors(stats)
        q, optimum = self._optimum(factors, L)
        q_mu, q_sqrt = self._stored(q, L)
        self._q_frame.store(tf.stop_gradient(q_mu), tf.stop_gradient(q_sqrt))
        return self._bound(stats, factors, q, optimum)

    def _objective(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """
        The method's own objective (to be maximised): the bound of the sites read off the stored
        q(u), or of the sites with the given local parameters (:meth:`_site_bound`). Assigns
        nothing.
        """
        return self._site_bound(data, site_parameters)

    def _sites_elbo(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """
        The ELBO of the sites at the *stored* q(u), Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] − KL[q(u) ‖ p(u)],
        with the sites' local parameters given or read off q(u). It equals the collapsed bound
        of the same sites when q(u) is optimal for them and is below it everywhere else.
        """
        data = self._passes.training_data(data)
        L = self._passes.Kmm_cholesky()
        q = self._whitened(self.q_mu, self.q_sqrt, L)

        def batch_expectation(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> tf.Tensor:
            *params, L, m, R = rest
            A, Ktilde_diag, *_ = self._passes.projection(X, L)
            Gmu, Fvar = marginals(A, Ktilde_diag, WhitenedQ(m, R))
            Fmu = Gmu + self.mean_function(X)
            if not params:
                params = [
                    tf.stop_gradient(p) for p in self._optimal_site_parameters(X, Y, Fmu, Fvar)
                ]
            return tf.reduce_sum(expected_sites(self._site_rule(X, Y, *params), Fmu, Fvar))

        if site_parameters is None:
            expectation = self._passes.sum_over_data(
                batch_expectation, data, (L, *q), self.batch_size
            )
        else:
            tensors = (*self._arrays_of(data, "site_parameters"), *site_parameters)
            expectation = self._passes.sum_over_data(
                batch_expectation, tensors, (L, *q), self.batch_size
            )
        return expectation - kl_to_prior(q)
