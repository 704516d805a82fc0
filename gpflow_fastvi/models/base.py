"""
:class:`GaussianSitesModel`: the state and plumbing every data-holding Gaussian-site model shares.

A subclass supplies only its site rule (the site parameters it owns, how they give sites, and their
closed-form update from q(f)) and its training routes; everything else — statistics, collapsed
bound, optimal q(u), the SVGP yardstick ELBO and predictions — is the shared algebra of
:mod:`gpflow_fastvi.gaussian`, reached through the protocol of :mod:`gpflow_fastvi.models.protocol`.
"""

import abc
from typing import Callable, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import inherit_check_shapes
from gpflow.base import InputData, MeanAndVariance, Parameter, RegressionData
from gpflow.models import GPModel
from gpflow.models.training_mixins import InternalDataTrainingLossMixin
from gpflow.posteriors import BasePosterior, PrecomputeCacheType
from gpflow.utilities import triangular

from ..gaussian import (
    CollapsedBound,
    CollapsedFactors,
    Projection,
    collapsed_bound,
    collapsed_factors,
    expected_sites,
    kl_to_prior,
    map_over_batches,
    marginals,
    optimal_marginals,
    optimal_q,
    shift_sites,
    statistics_from_projection,
    sum_over_batches,
    whitened_q,
)
from ..inducing import InducingSpec, make_inducing_variable
from ..types import Route, Sites, SiteStatistics, SteppedSites
from ..validation import (
    as_float_array,
    check_data,
    is_logit_bernoulli,
    positive_int,
    signed_labels,
    targets_for_likelihood,
)
from .protocol import SiteModel


def logit_log_prob(F: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
    """
    log p(y | f) = log σ(y f) for the logit Bernoulli with Y in {0, 1} (y = 2Y − 1), at F of Y's
    shape or with leading quadrature axes: finite with finite derivatives at every f. GPflow's
    Bernoulli takes log(1 − σ(f)), which is log 0 = −inf once f passes about 37, as it does for a
    confident point (a posterior mean, or a quadrature node of a wide q(fᵢ)).
    """
    return tf.math.log_sigmoid(signed_labels(Y) * F)


PERSISTENT_ROUTE = Route(
    "persistent",
    options={"n_upd": 2},
    description="one L-BFGS-B run over θ for the whole fit; each evaluation takes n_upd "
    "closed-form site steps from the sites of the last accepted iterate",
)
"""The persistent route (:mod:`gpflow_fastvi.training.persistent`), the same for every model whose
sites have a closed-form step and whose objective is that of :meth:`GaussianSitesModel.stepped_sites`."""


class GaussianSitesModel(SiteModel, GPModel, InternalDataTrainingLossMixin, metaclass=abc.ABCMeta):
    r"""
    Base class of sparse GP models whose likelihood is replaced by Gaussian sites
    aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2, holding their data like :class:`gpflow.models.SGPR`.

    Notation (as in the papers and :mod:`gpflow_fastvi.gaussian`): X [N, D] inputs, Y [N, 1]
    targets, Z [M, D] inducing inputs, u = f(Z), Kmm = L Lᵀ, A = L⁻¹ Kmn, B = I + A W Aᵀ = LB LBᵀ.

    State: the kernel and mean-function hyperparameters θ and the site parameters (for example ξ)
    define the model; ``q_mu`` and ``q_sqrt`` hold q(u) exactly as in :class:`gpflow.models.SVGP`
    (whitened when ``whiten=True``) and are set in closed form to the optimum for the current θ and
    site parameters by :meth:`update_q`, by :meth:`training_loss` and by
    :func:`gpflow_fastvi.fit`. They are not trainable: an optimiser never moves them.

    A subclass provides :attr:`site_parameters`, :meth:`site_rule` and :meth:`site_update` (its site
    rule) and its ``training_routes``; the protocol of :class:`~gpflow_fastvi.models.protocol.SiteModel`
    follows from them.
    """

    def __init__(
        self,
        data: RegressionData,
        kernel: gpflow.kernels.Kernel,
        likelihood: gpflow.likelihoods.Likelihood,
        inducing_variable: Optional[InducingSpec],
        *,
        mean_function: Optional[gpflow.mean_functions.MeanFunction] = None,
        whiten: bool = True,
        train_inducing: bool = False,
        batch_size: Optional[int] = None,
        kmeans_seed: int = 0,
    ):
        """
        :param data: ``(X, Y)`` with X [N, D] and Y [N, 1]. Copied; the caller's arrays are untouched.
        :param inducing_variable: a GPflow inducing variable, an array Z [M, D], an int M for M
            k-means centres of X (seeded by ``kmeans_seed``), or ``None`` for inducing inputs at the
            data themselves, Z = X: the full GP, O(N³) per pass.
        :param whiten: store q(u) whitened by chol(Kmm), as :class:`gpflow.models.SVGP` does by default.
        :param train_inducing: optimise the inducing inputs with the hyperparameters. Off by default:
            the papers keep them fixed at k-means centres.
        :param batch_size: accumulate the site statistics over batches of this many points, so that
            memory is O(batch_size · M) instead of O(N · M); ``None`` processes all points at once.
        """
        X, Y = check_data(data)
        Y = targets_for_likelihood(likelihood, Y)
        batch_size = positive_int(batch_size, "batch_size", optional=True)
        if inducing_variable is None:  # the full GP: u = f(X)
            inducing_variable = gpflow.inducing_variables.InducingPoints(X.copy())
        else:
            inducing_variable = make_inducing_variable(inducing_variable, X, seed=kmeans_seed)
        super().__init__(kernel, likelihood, mean_function, num_latent_gps=1)
        # Decided once, eagerly: the link is checked numerically, which a traced elbo() cannot do.
        self._logit_bernoulli = is_logit_bernoulli(likelihood)
        self.data = gpflow.models.util.data_input_to_tensor((X, Y))
        self.num_data = X.shape[0]
        self.inducing_variable = inducing_variable
        gpflow.set_trainable(self.inducing_variable, train_inducing)
        self.whiten = whiten
        self.batch_size = batch_size
        M = self.inducing_variable.num_inducing
        # q(u) starts at SVGP's initial value and is set in closed form from then on.
        self.q_mu = Parameter(
            np.zeros((M, 1)), dtype=gpflow.config.default_float(), trainable=False
        )
        self.q_sqrt = Parameter(
            np.eye(M)[None],
            transform=triangular(),
            dtype=gpflow.config.default_float(),
            trainable=False,
        )

    # ----------------------------------------------------------------------------------------------
    # What a subclass provides: its site rule.

    @property
    @abc.abstractmethod
    def site_parameters(self) -> Tuple[Parameter, ...]:
        """The per-point site parameters, each [N, 1] (ξ for Jaakkola–Jordan)."""

    @abc.abstractmethod
    def site_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """Sites (a, b, w) on f at inputs X with targets Y (as stored in :attr:`data`)."""

    @abc.abstractmethod
    def site_update(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        """The site parameters that are optimal for q(f) = N(Fmu, Fvar) at the points X."""

    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """The site rule at the site parameters that are optimal for q(f) = N(Fmu, Fvar)."""
        return self.site_rule(X, Y, *self.site_update(X, Y, Fmu, Fvar))

    def step_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """
        The sites whose optimal q(u) a closed-form site step goes through before
        :meth:`site_update` reads its marginals. By default the model's own sites
        (:meth:`site_rule`): the step is then coordinate ascent, as for VIJJ's ξ and VITaylor's
        expansion points. A model may step through other sites with the same fixed point
        (:class:`~gpflow_fastvi.KLCorrected`'s Newton E-step).
        """
        return self.site_rule(X, Y, *site_parameters)

    # ----------------------------------------------------------------------------------------------
    # The shared algebra, wired to this model's state.

    def _site_parameter_values(self) -> Tuple[tf.Tensor, ...]:
        return tuple(tf.convert_to_tensor(p) for p in self.site_parameters)

    def site_statistics(
        self,
        L: tf.Tensor,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
        projection: Optional[Projection] = None,
        rule: Optional[Callable[..., Sites]] = None,
    ) -> SiteStatistics:
        """
        The site statistics of all the data (in batches of :attr:`batch_size`).

        :param projection: A and diag K̃ of all the data when the caller has them already; only
            without batches (where it saves the projection, the dearest part of a pass).
        :param rule: the site rule ``(X, Y, *site_parameters) -> Sites``; default :meth:`site_rule`.
        """
        X, Y = self.data
        if site_parameters is None:
            site_parameters = self._site_parameter_values()
        if rule is None:
            rule = self.site_rule

        def batch_statistics(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> SiteStatistics:
            *params, L = rest
            # The sites moved onto the zero-mean process g = f − μ(X).
            sites = shift_sites(rule(X, Y, *params), self.mean_function(X))
            return statistics_from_projection(
                projection if projection is not None else self.projection(X, L), sites
            )

        return sum_over_batches(batch_statistics, (X, Y, *site_parameters), self.batch_size, (L,))

    def collapsed_bound(self) -> CollapsedBound:
        """The collapsed bound of the model's sites as its named terms (see :mod:`gpflow_fastvi.gaussian.collapsed`)."""
        stats = self.site_statistics(self.Kmm_cholesky())
        return collapsed_bound(stats, collapsed_factors(stats))

    def maximum_log_likelihood_objective(self) -> tf.Tensor:
        """The model's objective: the collapsed bound of its sites."""
        return self.collapsed_bound().total

    def objective(self, data: None = None) -> tf.Tensor:
        """The method's own objective (:meth:`maximum_log_likelihood_objective`)."""
        self._refuse_data(data, "objective")
        return self.maximum_log_likelihood_objective()

    def sites_elbo(self) -> tf.Tensor:
        """
        The ELBO of the sites at the *stored* q(u), Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] − KL[q(u) ‖ p(u)]
        for the stored site parameters. It equals the collapsed bound when q(u) is optimal for
        them (after :meth:`update_q`) and is below it everywhere else.
        """
        X, Y = self.data
        L = self.Kmm_cholesky()
        m, R = whitened_q(self.q_mu, self.q_sqrt, L, self.whiten)

        def batch_expectation(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> tf.Tensor:
            *params, L, m, R = rest
            A, Ktilde_diag, *_ = self.projection(X, L)
            Gmu, Fvar = marginals(A, Ktilde_diag, m, R)
            Fmu = Gmu + self.mean_function(X)
            return tf.reduce_sum(expected_sites(self.site_rule(X, Y, *params), Fmu, Fvar))

        tensors = (X, Y, *self._site_parameter_values())
        expectation = sum_over_batches(batch_expectation, tensors, self.batch_size, (L, m, R))
        return expectation - kl_to_prior(m, R)

    def _bound_and_store_q(
        self, L: Optional[tf.Tensor] = None, stats: Optional[SiteStatistics] = None
    ) -> tf.Tensor:
        """
        The objective, storing the maximiser q(u) of the collapsed bound in ``q_mu``/``q_sqrt`` on the way; from
        ``L`` and ``stats`` when the caller has them already.
        """
        if L is None:
            L = self.Kmm_cholesky()
        if stats is None:
            stats = self.site_statistics(L)
        factors = collapsed_factors(stats)
        q_mu, q_sqrt = optimal_q(factors, L, self.whiten)
        self.q_mu.assign(tf.stop_gradient(q_mu))
        self.q_sqrt.assign(tf.stop_gradient(q_sqrt))
        return collapsed_bound(stats, factors).total

    def training_loss(self) -> tf.Tensor:
        """
        −(objective + log prior density of the parameters): the method's own objective, ready
        for ``gpflow.optimizers.Scipy().minimize(model.training_loss, model.trainable_variables)``.

        Evaluating it also stores the optimal q(u) for the parameters it was evaluated at, so after
        any optimiser has run, :meth:`predict_f` and :meth:`elbo` use the q(u) that goes with the
        optimised parameters.
        """
        return -(self._bound_and_store_q() + self.log_prior_density())

    def update_q(self) -> tf.Tensor:
        """Set q(u) to its closed-form optimum for the current parameters; return the objective."""
        return self._bound_and_store_q()

    def update_sites(self, num_updates: int = 1, *, data: None = None) -> tf.Tensor:
        """
        Closed-form steps on the site parameters: ``num_updates`` times, form the optimal q(u) for
        the current sites (:meth:`step_rule`) and set the site parameters to their optimum for its
        marginals q(fᵢ). Then store the optimal q(u) for the final sites and return the objective.
        For a bound maximised by coordinate ascent (:class:`~gpflow_fastvi.VIJJ`,
        :class:`~gpflow_fastvi.KLCorrected` with ``e_step="coordinate"``) no update can lower it;
        for :class:`~gpflow_fastvi.VITaylor`, whose objective moves with its expansion points, and
        KLCorrected's default Newton E-step, the updates are Newton steps and the objective need
        not rise at each of them.
        Hyperparameters are left alone. Without batches the data are projected once for all the
        passes of the call. It is :meth:`adopt` of :meth:`stepped_sites`.
        """
        self._refuse_data(data, "update_sites")
        stepped = self._step_sites(num_updates)
        self.adopt(stepped)
        return stepped.objective

    def stepped_sites(self, num_updates: int) -> SteppedSites:
        """
        The site parameters after ``num_updates`` closed-form steps from the *stored* ones, with
        the optimal q(u) and the objective for them, computed from one Kmm factor and (without
        batches) one projection shared by the steps and the objective. Nothing is assigned
        (:meth:`adopt` does that), so an optimiser may evaluate it at trial hyperparameters and
        keep the model's sites at their last accepted state.

        The objective's gradient holds the stepped site parameters fixed. For a bound maximised
        over its site parameters (VIJJ) that is the gradient of max over the sites, by the
        envelope theorem, as the steps approach the sites' optimum; for Taylor sites it is the
        gradient at fixed expansion points, as in vi-Taylor's own L-BFGS-B stage.
        """
        return self._step_sites(num_updates)

    def _step_sites(self, num_updates: int) -> SteppedSites:
        """:meth:`stepped_sites`, also behind :meth:`update_sites` (which a subclass may allow
        where it refuses the persistent route)."""
        X, _ = self.data
        L = self.Kmm_cholesky()
        projection = self.projection(X, L) if self.batch_size is None else None
        params = self._stepped_site_parameters(L, projection, num_updates)
        params = tuple(tf.stop_gradient(p) for p in params)
        stats = self.site_statistics(L, params, projection)
        factors = collapsed_factors(stats)
        q_mu, q_sqrt = optimal_q(factors, L, self.whiten)
        return SteppedSites(
            objective=collapsed_bound(stats, factors).total,
            site_parameters=params,
            q_mu=tf.stop_gradient(q_mu),
            q_sqrt=tf.stop_gradient(q_sqrt),
        )

    def adopt(self, stepped: SteppedSites) -> None:
        """Make the site parameters and q(u) of :meth:`stepped_sites` the model's own."""
        for parameter, value in zip(self.site_parameters, stepped.site_parameters):
            parameter.assign(value)
        self.q_mu.assign(stepped.q_mu)
        self.q_sqrt.assign(stepped.q_sqrt)

    def _stepped_site_parameters(
        self, L: tf.Tensor, projection: Optional[Projection], num_updates: int
    ) -> Tuple[tf.Tensor, ...]:
        """
        The site parameters after ``num_updates`` closed-form steps from the stored ones: each
        step forms the optimal q(u) of the :meth:`step_rule` sites and reads its marginals into
        :meth:`site_update`.
        """
        X, Y = self.data

        def updated(factors: CollapsedFactors) -> Tuple[tf.Tensor, ...]:
            def batch_update(X: tf.Tensor, Y: tf.Tensor) -> Tuple[tf.Tensor, ...]:
                A, Ktilde_diag, *_ = projection if projection is not None else self.projection(X, L)
                Gmu, Fvar = optimal_marginals(A, Ktilde_diag, factors)
                return self.site_update(X, Y, Gmu + self.mean_function(X), Fvar)

            return tuple(map_over_batches(batch_update, (X, Y), self.batch_size))

        params = self._site_parameter_values()
        for _ in range(num_updates):
            stats = self.site_statistics(L, params, projection, rule=self.step_rule)
            params = updated(collapsed_factors(stats))
        return params

    def _targets_for_likelihood(self, Y: tf.Tensor) -> tf.Tensor:
        """Targets given at prediction time, converted like the training targets when they are concrete."""
        if tf.is_tensor(Y) and not hasattr(Y, "numpy"):
            # Symbolic (inside tf.function): must already be in the likelihood's convention.
            return Y
        return tf.convert_to_tensor(targets_for_likelihood(self.likelihood, as_float_array(Y, "Y")))

    def _refuse_data(self, data: object, method: str) -> None:
        if data is not None:
            raise ValueError(
                f"{type(self).__name__} holds its training data (given to the constructor); call "
                f"{method}() without data."
            )

    # ----------------------------------------------------------------------------------------------
    # The SVGP yardstick and predictions, exactly as in gpflow.models.SVGP.

    def elbo(self) -> tf.Tensor:
        """
        The standard SVGP ELBO at the model's current q(u): Σᵢ E_q[log p(yᵢ | fᵢ)] − KL[q(u) ‖ p(u)],
        the expectations by the likelihood's own (Gauss–Hermite) quadrature. This is the yardstick
        to compare with :class:`gpflow.models.SVGP`; for VIJJ it is ≥ the bound. Models change the
        likelihood term through :meth:`_expected_log_likelihood`.
        """
        X, Y = self.data
        var_exp = sum_over_batches(self._expected_log_likelihood, (X, Y), self.batch_size)
        kl = gpflow.kullback_leiblers.prior_kl(
            self.inducing_variable, self.kernel, self.q_mu, self.q_sqrt, whiten=self.whiten
        )
        return var_exp - kl

    def yardstick_elbo(self, data: None = None) -> tf.Tensor:
        """The SVGP yardstick, :meth:`elbo`."""
        self._refuse_data(data, "yardstick_elbo")
        return self.elbo()

    def _expected_log_likelihood(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        """
        Σᵢ E_q[log p(yᵢ | fᵢ)] over the points (X, Y), by the likelihood's own quadrature
        (for the logit Bernoulli the same Gauss–Hermite rule on :func:`logit_log_prob`).
        """
        Fmu, Fvar = self.predict_f(X)
        if not self._logit_bernoulli:
            return tf.reduce_sum(self.likelihood.variational_expectations(X, Fmu, Fvar, Y))
        return tf.reduce_sum(self.likelihood.quadrature(logit_log_prob, Fmu, Fvar, Y=Y))

    def posterior(
        self, precompute_cache: PrecomputeCacheType = PrecomputeCacheType.TENSOR
    ) -> BasePosterior:
        """GPflow's posterior object for the current q(u), as :meth:`gpflow.models.SVGP.posterior`."""
        return gpflow.posteriors.create_posterior(
            self.kernel,
            self.inducing_variable,
            self.q_mu,
            self.q_sqrt,
            whiten=self.whiten,
            mean_function=self.mean_function,
            precompute_cache=precompute_cache,
        )

    @inherit_check_shapes
    def predict_f(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """
        The mean and variance of f at ``Xnew`` under q(u), computed from ``q_mu`` and ``q_sqrt``
        as :class:`gpflow.models.SVGP` computes them.
        """
        return self.posterior(PrecomputeCacheType.NOCACHE).fused_predict_f(
            Xnew, full_cov=full_cov, full_output_cov=full_output_cov
        )

    @inherit_check_shapes
    def predict_log_density(
        self, data: RegressionData, full_cov: bool = False, full_output_cov: bool = False
    ) -> tf.Tensor:
        """log ∫ p(y* | f*) q(f*) df* at test points, targets converted as at construction."""
        X, Y = data
        return super().predict_log_density(
            (X, self._targets_for_likelihood(Y)), full_cov=full_cov, full_output_cov=full_output_cov
        )
