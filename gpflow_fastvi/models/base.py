"""
:class:`GaussianSitesModel`: the state and plumbing every Gaussian-site model with a closed-form
step shares.

A subclass supplies only its site rule (the local parameters of a point's site, how they give
the site, and their closed-form value for a q(f)) and its training routes; everything else —
statistics, collapsed bound, optimal q(u), the SVGP yardstick ELBO and predictions — is the shared
algebra of :mod:`gpflow_fastvi.gaussian`, reached through the protocol of
:mod:`gpflow_fastvi.models.protocol`.

**State.** Like :class:`gpflow.models.SVGP`, a model is its hyperparameters θ and q(u) =
N(``q_mu``, ``q_sqrt`` ``q_sqrt``ᵀ), nothing else: the sites' local parameters (ξ, the expansion
points, the tilted q(fₙ)) are a function of q(u) and are recomputed, point by point, during each
pass over the data. A model therefore needs no memory proportional to the number of points, and
the data can come with each call.

**One pass.** For each point: the marginal q(fₙ) of the current q(u), the local parameters that
are optimal for it, the site, and its contribution to the statistics Σ aₙ, A W Aᵀ and A b; then
the optimal q(u) for those sites in closed form. That is a closed-form site step
(:meth:`GaussianSitesModel.update_sites`), and the objective of the sites it read is the collapsed
bound of the same statistics.
"""

import abc
from typing import Any, Callable, ClassVar, Optional, Sequence, Tuple, Union

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.base import Parameter, RegressionData
from gpflow.models import GPModel
from gpflow.posteriors import BasePosterior, PrecomputeCacheType
from gpflow.utilities import triangular

from ..distribution import set_trainable
from ..exceptions import IncompatibleLikelihoodError, InvalidDataError
from ..gaussian import (
    CollapsedBound,
    collapsed_bound,
    collapsed_factors,
    expected_sites,
    kl_to_prior,
    kmm_cholesky,
    map_over_batches,
    marginals,
    optimal_q,
    shift_sites,
    statistics_from_projection,
    stored_q,
    sum_over_batches,
    sum_over_dataset,
    sum_over_replicas,
    whitened_projection,
    whitened_q,
)
from ..inducing import InducingSpec, make_inducing_variable
from ..types import Route, Sites, SiteStatistics, SteppedSites
from ..validation import (
    check_data,
    check_num_data,
    checked_01_labels,
    checked_dataset,
    describe_container,
    is_logit_bernoulli,
    positive_int,
    signed_labels,
    targets_for_likelihood,
)
from .protocol import FULL_DATA_STEPS, SiteModel

Data = Union[Tuple[tf.Tensor, tf.Tensor], tf.data.Dataset]
"""The data of a call, as :meth:`GaussianSitesModel.training_data` returns them: ``(X, Y)``
tensors, or a ``tf.data.Dataset`` of ``(X, Y)`` batches streamed once per pass."""

SiteParameters = Tuple[tf.Tensor, ...]
"""The local parameters of a set of points' sites, each [N, 1] (ξ for Jaakkola–Jordan)."""


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
    options={"n_upd": FULL_DATA_STEPS},
    description="one L-BFGS-B run over θ for the whole fit; each evaluation takes n_upd "
    "closed-form site steps (passes) from the sites of the last accepted iterate",
)
"""The persistent route (:mod:`gpflow_fastvi.training.persistent`), the same for every model whose
sites have a closed-form step and whose objective is that of :meth:`GaussianSitesModel.stepped_sites`."""


def _looks_like_data(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2


class DataFirstForm(abc.ABCMeta):
    """
    The metaclass that accepts a model's SGPR-like, data-first call as well as SVGP's:
    ``VIJJ((X, Y), kernel, Z)`` is ``VIJJ(kernel, Z=..., data=(X, Y))`` with the positional
    arguments after the data named by the class's ``data_first_positional``. Every keyword means
    the same in both forms; nothing else is translated.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not (args and _looks_like_data(args[0])):
            return super().__call__(*args, **kwargs)
        names: Tuple[str, ...] = cls.data_first_positional  # type: ignore[attr-defined]
        rest = args[1:]
        if len(rest) > len(names):
            raise TypeError(
                f"{cls.__name__}(data, {', '.join(names)}, *, ...) takes {len(names) + 1} "
                f"positional arguments in its data-first form; got {len(args)}."
            )
        for name, value in zip(names, rest):
            if name in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}.")
            kwargs[name] = value
        if "data" in kwargs:
            raise TypeError(f"{cls.__name__}() got the data both first and as data=.")
        return super().__call__(data=args[0], **kwargs)


class GaussianSitesModel(SiteModel, GPModel, metaclass=DataFirstForm):
    r"""
    Base class of sparse GP models whose likelihood is replaced by Gaussian sites
    aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2 with a closed-form step, built like :class:`gpflow.models.SVGP` and
    trained with the data per call, or holding their data like :class:`gpflow.models.SGPR`.

    Notation (as in the papers and :mod:`gpflow_fastvi.gaussian`): X [N, D] inputs, Y [N, 1]
    targets, Z [M, D] inducing inputs, u = f(Z), Kmm = L Lᵀ, A = L⁻¹ Kmn, B = I + A W Aᵀ = LB LBᵀ.

    **Two ways to build one.** SVGP's signature, ``Model(kernel, likelihood, Z, num_data=N)``,
    then every data-taking method is called with the data: ``training_loss((X, Y))``,
    ``training_loss_closure((X, Y))``, ``elbo((X, Y))``, ``fit(model, (X, Y))``. Or the
    SGPR-like form with the data first, ``Model((X, Y), kernel, ...)`` (or ``data=(X, Y)``), in
    which the model holds the data, the methods are called without it, and the inducing inputs
    may be an int M (k-means centres of X) or ``None`` (Z = X, the full GP).

    **State.** The kernel and mean-function hyperparameters θ, and ``q_mu`` and ``q_sqrt``, which
    hold q(u) exactly as in :class:`gpflow.models.SVGP` (whitened when ``whiten=True``). The
    sites' local parameters are recomputed from q(u) in every pass (module docstring). ``q_mu``
    and ``q_sqrt`` are not trainable: they are set in closed form, by every evaluation of
    :meth:`training_loss`, by :meth:`update_sites` and by :func:`gpflow_fastvi.fit`.

    A subclass provides :meth:`site_update` and :meth:`site_rule` (its site rule) and its
    ``training_routes``; the protocol of :class:`~gpflow_fastvi.models.protocol.SiteModel`
    follows from them.
    """

    data_first_positional: ClassVar[Tuple[str, ...]] = ("kernel", "inducing_variable")
    """The names of the positional arguments after the data in the data-first form."""
    steps_from_site_parameters: ClassVar[bool] = True
    """Whether :meth:`stepped_sites` can start from given local site parameters, which a training
    loop then keeps between evaluations (the persistent route, in memory); ``False`` for a model
    whose step starts from q(u) itself (:class:`~gpflow_fastvi.VIConcave`, whose step is measured
    against the ELBO of the q(u) it leaves)."""

    def __init__(
        self,
        kernel: gpflow.kernels.Kernel,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        inducing_variable: Optional[InducingSpec] = None,
        *,
        mean_function: Optional[gpflow.mean_functions.MeanFunction] = None,
        num_latent_gps: int = 1,
        q_diag: bool = False,
        whiten: bool = True,
        num_data: Optional[int] = None,
        data: Optional[RegressionData] = None,
        train_inducing: bool = False,
        batch_size: Optional[int] = None,
        kmeans_seed: int = 0,
    ):
        """
        :param kernel: a GPflow kernel for one latent function.
        :param likelihood: a GPflow likelihood the site rule supports (:meth:`checked_likelihood`);
            ``None`` for the model's default.
        :param inducing_variable: a GPflow inducing variable or an array Z [M, D]; with ``data``
            also an int M for M k-means centres of X (seeded by ``kmeans_seed``), or ``None`` for
            inducing inputs at the data themselves, Z = X: the full GP, O(N³) per pass.
        :param num_latent_gps: must be 1 (one latent function).
        :param q_diag: must be ``False``: the closed-form q(u) has a full covariance.
        :param whiten: store q(u) whitened by chol(Kmm), as :class:`gpflow.models.SVGP` does by default.
        :param num_data: the number of training points, as in SVGP: a call with fewer rows is a
            mini-batch (:meth:`training_loss`). ``None`` (the default) takes every call's data to
            be all of it.
        :param data: ``(X, Y)`` with X [N, D] and Y [N, 1] for the SGPR-like form, in which the
            model holds its data. Copied; the caller's arrays are untouched.
        :param train_inducing: optimise the inducing inputs with the hyperparameters. Off by default:
            the papers keep them fixed at k-means centres.
        :param batch_size: accumulate the site statistics over batches of this many points, so that
            memory is O(batch_size · M) instead of O(N · M); ``None`` processes all points at once.
        """
        if not isinstance(kernel, gpflow.kernels.Kernel):
            raise TypeError(
                f"{type(self).__name__} takes a GPflow kernel first (SVGP's signature), or the data "
                f"(X, Y) first (the data-holding form); got {type(kernel).__name__}."
            )
        if isinstance(kernel, gpflow.kernels.MultioutputKernel) or num_latent_gps != 1:
            raise IncompatibleLikelihoodError(
                f"{type(self).__name__} is for one latent function (binary classification or a "
                "scalar likelihood such as Poisson): it takes a single-output kernel and "
                f"num_latent_gps=1; got {type(kernel).__name__} with num_latent_gps={num_latent_gps}."
            )
        if q_diag:
            raise ValueError(
                f"{type(self).__name__} needs q_diag=False: its closed-form q(u) has a full covariance."
            )
        likelihood = self.checked_likelihood(likelihood)
        batch_size = positive_int(batch_size, "batch_size", optional=True)
        X = None
        if data is not None:
            X, Y = check_data(data)
            Y = targets_for_likelihood(likelihood, Y)
            num_data = check_num_data(num_data, X.shape[0])
        elif num_data is not None:
            num_data = positive_int(num_data, "num_data")
        inducing_variable = self._inducing_variable(inducing_variable, X, kmeans_seed)
        super().__init__(kernel, likelihood, mean_function, num_latent_gps=1)
        # Decided once, eagerly: the link is checked numerically, which a traced elbo() cannot do.
        self._logit_bernoulli = is_logit_bernoulli(likelihood)
        self.data = None if X is None else gpflow.models.util.data_input_to_tensor((X, Y))
        self.num_data = num_data
        self.inducing_variable = inducing_variable
        set_trainable(self.inducing_variable, train_inducing)
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
        self.set_up_step_state()

    def _inducing_variable(
        self, inducing_variable: Optional[InducingSpec], X: Optional[np.ndarray], seed: int
    ) -> gpflow.inducing_variables.InducingVariables:
        name = type(self).__name__
        if X is None:
            if inducing_variable is None or (
                isinstance(inducing_variable, (int, np.integer))
                and not isinstance(inducing_variable, bool)
            ):
                raise ValueError(
                    f"{name}(kernel, likelihood, inducing_variable, ...) needs the inducing inputs "
                    "as a GPflow inducing variable or an array Z [M, D]; an int M (k-means "
                    f"centres) or None (Z = X) needs the data: {name}((X, Y), kernel, ...)."
                )
            return make_inducing_variable(inducing_variable)
        if inducing_variable is None:  # the full GP: u = f(X)
            return gpflow.inducing_variables.InducingPoints(X.copy())
        return make_inducing_variable(inducing_variable, X, seed=seed)

    # ----------------------------------------------------------------------------------------------
    # What a subclass provides: its site rule.

    @classmethod
    @abc.abstractmethod
    def checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        ``likelihood`` if the site rule supports it (the model's default for ``None``); else an
        :class:`~gpflow_fastvi.exceptions.IncompatibleLikelihoodError` that says what to use.
        """

    @abc.abstractmethod
    def site_update(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> SiteParameters:
        """The local site parameters that are optimal for q(f) = N(Fmu, Fvar) at the points X."""

    @abc.abstractmethod
    def site_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """Sites (a, b, w) on f at inputs X with targets Y for the given local parameters."""

    def step_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """
        The sites whose optimal q(u) a closed-form step goes through when further steps follow
        it. By default the model's own sites (:meth:`site_rule`): the step is then coordinate
        ascent, as for VIJJ's ξ and VITaylor's expansion points. A model may step through other
        sites with the same fixed point (:class:`~gpflow_fastvi.KLCorrected`'s Newton E-step).
        """
        return self.site_rule(X, Y, *site_parameters)

    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """The site rule at the local parameters that are optimal for q(f) = N(Fmu, Fvar)."""
        return self.site_rule(X, Y, *self.site_update(X, Y, Fmu, Fvar))

    # ----------------------------------------------------------------------------------------------
    # The data of a call.

    def training_data(self, data: Any = None) -> Data:
        """
        The data a call works on: ``data`` = ``(X, Y)`` as tensors, checked and its targets
        converted to the likelihood's convention as at construction (symbolic tensors, inside a
        compiled function, are taken as they are); a ``tf.data.Dataset`` of ``(X [b, D], Y [b, 1])``
        batches, whose element structure is checked and which every pass streams once; or the
        data the model holds when ``data`` is ``None``.
        """
        name = type(self).__name__
        if data is None:
            if self.data is None:
                raise ValueError(
                    f"This {name} was built without data: pass it to the call, e.g. "
                    f"training_loss((X, Y)) or fit(model, (X, Y)), or build the model with it, "
                    f"{name}((X, Y), kernel, ...)."
                )
            return self.data
        if isinstance(data, tf.data.Dataset):
            data = checked_dataset(data)
            if isinstance(self.likelihood, gpflow.likelihoods.Bernoulli):
                data = data.map(lambda X, Y: (X, checked_01_labels(Y)))
            return data
        if not _looks_like_data(data):
            error = InvalidDataError if isinstance(data, (tuple, list)) else TypeError
            raise error(
                "data must be a tuple (X, Y) with X [N, D] and Y [N, 1], or a tf.data.Dataset of "
                f"such batches; got {describe_container(data)}."
            )
        return self.checked_training_data(data)

    def _sum_over_data(
        self, fn: Callable[..., Any], data: Data, shared: Sequence[tf.Tensor] = ()
    ) -> Any:
        """
        Σ of ``fn(*rows, *shared)`` over the data (arrays whose rows go together, or a stream of
        (X, Y) batches): in batches of :attr:`batch_size`, streamed, or with each replica of
        :meth:`pass_strategy` summing its own share and one all-reduce.
        """
        strategy = self.pass_strategy()
        if strategy is not None:
            return sum_over_replicas(
                fn, data, strategy, shared, self.trainable_variables, self.batch_size
            )
        if isinstance(data, tf.data.Dataset):
            return sum_over_dataset(fn, data, shared)
        return sum_over_batches(fn, data, self.batch_size, shared)

    def projects_all_at_once(self, data: Data) -> bool:
        """
        Whether a step projects all the data at once and keeps the projection for its passes:
        the data as arrays, no :attr:`batch_size`, and no :attr:`distribute_strategy` sharing
        the passes among replicas (each of which projects its own rows).
        """
        return (
            self.batch_size is None
            and not isinstance(data, tf.data.Dataset)
            and self.pass_strategy() is None
        )

    def _arrays(self, data: Data, what: str) -> Tuple[tf.Tensor, tf.Tensor]:
        """The data as (X, Y) tensors, or an error for a dataset where ``what`` needs arrays."""
        if isinstance(data, tf.data.Dataset):
            raise ValueError(
                f"{what} holds one value per training point, so it needs the data as arrays "
                "(X, Y), not a tf.data.Dataset. To stream, use fit's default route "
                "(method='persistent'), which keeps nothing per point."
            )
        return data

    def _is_mini_batch(self, data: Data) -> bool:
        """Whether a call's data are a mini-batch (:meth:`is_mini_batch`); a dataset is all the
        data, streamed."""
        return not isinstance(data, tf.data.Dataset) and self.is_mini_batch(data[0])

    # ----------------------------------------------------------------------------------------------
    # q(u), read and stored.

    def _stored_q(self) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """
        The stored q(u) where its sites are read
        (:class:`~gpflow_fastvi.models.protocol.QFrame`): whether to read it at the frame's
        hyperparameters (the frame belongs to it, and they differ from the current ones),
        chol(Kmm) there (else at the current ones), and q(v) = N(m, R Rᵀ) whitened by that
        factor. Held fixed: no gradient.
        """
        frame = self._q_frame
        q_mu, q_sqrt = tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt)
        # At the frame's own hyperparameters (repeated steps at fixed θ) the current projection
        # is the frame's: read with it rather than compute the same one twice.
        at_frame = frame.belongs_to(q_mu, q_sqrt) & tf.logical_not(frame.is_at(self))
        L_frame = tf.cond(
            at_frame,
            lambda: kmm_cholesky(frame.kernel, frame.inducing_variable),
            lambda: self.Kmm_cholesky(),
        )
        m, R = whitened_q(q_mu, q_sqrt, L_frame, self.whiten)
        return at_frame, tf.stop_gradient(L_frame), tf.stop_gradient(m), tf.stop_gradient(R)

    def _stored_marginals(
        self, X: tf.Tensor, stored: Tuple[tf.Tensor, ...], projection: Any
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        q(fᵢ) = N(Fmu, Fvar) at the points X for the stored q(u) (``stored`` from
        :meth:`_stored_q`), at the hyperparameters it was set at, or at the current ones (whose
        ``projection`` of X is given) when they are the same or q(u) was changed from outside.
        """
        frame = self._q_frame
        read_at_frame, L_frame, m, R = stored

        def at_frame() -> Tuple[tf.Tensor, tf.Tensor]:
            A, Ktilde_diag, *_ = whitened_projection(
                frame.kernel, frame.inducing_variable, X, L_frame
            )
            Gmu, Fvar = marginals(A, Ktilde_diag, m, R)
            return Gmu + frame.mean_function(X), Fvar

        def at_current() -> Tuple[tf.Tensor, tf.Tensor]:
            Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, m, R)
            return Gmu + self.mean_function(X), Fvar

        Fmu, Fvar = tf.cond(read_at_frame, at_frame, at_current)
        return tf.stop_gradient(Fmu), tf.stop_gradient(Fvar)

    # ----------------------------------------------------------------------------------------------
    # One pass over the data, and closed-form steps.

    def _read_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Any, m: tf.Tensor, R: tf.Tensor
    ) -> SiteParameters:
        """
        The local parameters that are optimal for the marginals, at the points X (whose
        ``projection`` is given), of q(v) = N(m, R Rᵀ) whitened by the projection's Kmm factor:
        the sites a closed-form step reads off a q(u). Held fixed: no gradient.
        """
        Gmu, Fvar = marginals(
            tf.stop_gradient(projection.A), tf.stop_gradient(projection.Ktilde_diag), m, R
        )
        Fmu = tf.stop_gradient(Gmu + self.mean_function(X))
        return tuple(tf.stop_gradient(p) for p in self.site_update(X, Y, Fmu, Fvar))

    def _site_statistics(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        projection: Any,
        rule: Callable[..., Sites],
        site_parameters: SiteParameters,
    ) -> SiteStatistics:
        """The statistics of the sites by ``rule`` with the given local parameters at the points X
        (whose ``projection`` is given), moved onto the zero-mean process g = f − μ(X)."""
        sites = shift_sites(rule(X, Y, *site_parameters), self.mean_function(X))
        return statistics_from_projection(projection, sites)

    def _pass_statistics(
        self,
        data: Data,
        L: tf.Tensor,
        rule: Callable[..., Sites],
        projection: Optional[Any] = None,
        q: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> SiteStatistics:
        """
        One pass (module docstring): the statistics of the sites, by ``rule``, whose local
        parameters are optimal for the marginals of the stored q(u) (read where it was set,
        :class:`~gpflow_fastvi.models.protocol.QFrame`), or of ``q`` = (m, R), q(v) = N(m, R Rᵀ)
        whitened by ``L``, in batches of :attr:`batch_size`. Differentiable in θ with the local parameters held fixed.

        :param projection: A and diag K̃ of all the data when the caller has them already
            (without batches, where it saves the projection, the dearest part of a pass).
        """
        stored = self._stored_q() if q is None else None

        def batch_statistics(
            X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, *q: tf.Tensor
        ) -> SiteStatistics:
            batch_projection = projection if projection is not None else self.projection(X, L)
            if q:
                params = self._read_site_parameters(X, Y, batch_projection, *q)
            else:
                Fmu, Fvar = self._stored_marginals(X, stored, batch_projection)
                params = tuple(tf.stop_gradient(p) for p in self.site_update(X, Y, Fmu, Fvar))
            return self._site_statistics(X, Y, batch_projection, rule, params)

        shared = (L,) if q is None else (L, *(tf.stop_gradient(t) for t in q))
        return self._sum_over_data(batch_statistics, data, shared)

    def _steps_in_memory(self, data: Data, site_parameters: Optional[SiteParameters]) -> bool:
        """
        Whether the steps see all the data at once (:meth:`projects_all_at_once`); given
        ``site_parameters`` (one value per point), they must.
        """
        in_memory = self.projects_all_at_once(data)
        if site_parameters is not None and not in_memory:
            raise ValueError(
                "stepped_sites(site_parameters=...) holds one value per point: it needs the data "
                "as arrays (X, Y), batch_size=None and no tf.distribute strategy."
            )
        return in_memory

    def _stepped(
        self, data: Data, num_updates: int, site_parameters: Optional[SiteParameters] = None
    ) -> SteppedSites:
        """
        :meth:`stepped_sites` on the data: ``num_updates`` passes from the stored q(u) (or from
        the sites with the given local parameters), sharing one Kmm factor and (without batches)
        one projection; every pass but the last goes through :meth:`step_rule`, the last through
        :meth:`site_rule`, whose statistics give the objective and the new q(u).
        """
        num_updates = positive_int(num_updates, "num_updates")
        L = self.Kmm_cholesky()
        in_memory = self._steps_in_memory(data, site_parameters)
        projection = self.projection(data[0], L) if in_memory else None
        q = None  # the first pass reads the stored q(u)
        for step in range(num_updates):
            last = step == num_updates - 1
            rule = self.site_rule if last else self.step_rule
            if step == 0 and site_parameters is not None:
                params = tuple(tf.stop_gradient(p) for p in site_parameters)
                stats = self._site_statistics(*data, projection, rule, params)
            else:
                stats = self._pass_statistics(data, L, rule, projection, q)
            factors = collapsed_factors(stats)
            m, R = optimal_q(factors, L, whiten=True)
            q = (m, R[0])  # the q(v) the next pass reads its sites off
        q_mu, q_sqrt = stored_q(*q, L, self.whiten)
        next_parameters: SiteParameters = ()
        if site_parameters is not None:
            # The sites of the new q(u), read where it is set: those the next step starts from.
            next_parameters = self._read_site_parameters(*data, projection, *q)
        return SteppedSites(
            objective=collapsed_bound(stats, factors).total,
            q_mu=tf.stop_gradient(q_mu),
            q_sqrt=tf.stop_gradient(q_sqrt),
            site_parameters=next_parameters,
        )

    def stepped_sites(
        self,
        num_updates: int,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> SteppedSites:
        """
        ``num_updates`` closed-form site steps from the *stored* q(u), each a pass over the data
        that reads the sites off the current q(u) and forms the optimal q(u) for them, with the
        objective of the last sites read (the collapsed bound, for which the returned q(u) is
        optimal). Nothing is assigned (:meth:`adopt` does that), so an optimiser may evaluate it at
        trial hyperparameters and keep the model at its last accepted state.

        The objective's gradient holds the last sites' local parameters fixed. For a bound
        maximised over them (VIJJ) that is the gradient of the maximum, by the envelope theorem,
        as the steps approach the sites' optimum; for Taylor sites it is the gradient at fixed
        expansion points, as in vi-Taylor's own L-BFGS-B stage.

        :param site_parameters: the local parameters the first step starts from instead of those
            read off the stored q(u), each [N, 1], for a training loop that keeps them between
            steps (:func:`~gpflow_fastvi.training.persistent_plan`): reading them off q(u) where
            it was set (:class:`~gpflow_fastvi.models.protocol.QFrame`) at a trial θ costs a
            second projection of the data. Then the result also carries the local parameters read off its own q(u), where the
            next step starts. Data as arrays and ``batch_size=None`` only.
        """
        return self._stepped(self.training_data(data), num_updates, site_parameters)

    def adopt(self, stepped: SteppedSites) -> None:
        """Make the q(u) of :meth:`stepped_sites` the model's own."""
        self.store_q(stepped.q_mu, stepped.q_sqrt)

    def update_sites(
        self, num_updates: int = 1, *, data: Optional[RegressionData] = None
    ) -> tf.Tensor:
        """
        ``num_updates`` closed-form site steps (:meth:`stepped_sites`), stored; returns the
        objective of the last sites read, for which the stored q(u) is optimal. For a bound
        maximised by coordinate ascent (:class:`~gpflow_fastvi.VIJJ`,
        :class:`~gpflow_fastvi.KLCorrected` with ``e_step="coordinate"``) no step can lower it;
        for :class:`~gpflow_fastvi.VITaylor`, whose objective moves with its expansion points,
        and KLCorrected's Newton E-step, the steps are Newton steps and the objective need not
        rise at each of them. Hyperparameters are left alone.
        """
        stepped = self._stepped(self.training_data(data), num_updates)
        self.adopt(stepped)
        return stepped.objective

    # ----------------------------------------------------------------------------------------------
    # Sites held fixed: the paper's alternating schemes.

    def site_parameters(self, data: Optional[RegressionData] = None) -> SiteParameters:
        """
        The sites' local parameters for the stored q(u), each [N, 1], computed batch by batch:
        what the paper's alternating schemes hold fixed while L-BFGS-B moves θ
        (:func:`~gpflow_fastvi.training.alternating_plan`). Memory O(N).
        """
        X, Y = self._arrays(self.training_data(data), "site_parameters")
        L = self.Kmm_cholesky()
        stored = self._stored_q()

        def batch_parameters(X: tf.Tensor, Y: tf.Tensor) -> SiteParameters:
            Fmu, Fvar = self._stored_marginals(X, stored, self.projection(X, L))
            return tuple(self.site_update(X, Y, Fmu, Fvar))

        params = map_over_batches(batch_parameters, (X, Y), self.batch_size)
        return tuple(tf.stop_gradient(p) for p in params)

    def _fixed_site_statistics(
        self, X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, site_parameters: SiteParameters
    ) -> SiteStatistics:
        """The statistics of the sites with the given local parameters (each [N, 1])."""

        def batch_statistics(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> SiteStatistics:
            *params, L = rest
            return self._site_statistics(X, Y, self.projection(X, L), self.site_rule, params)

        return self._sum_over_data(batch_statistics, (X, Y, *site_parameters), (L,))

    def collapsed_bound(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> CollapsedBound:
        """
        The collapsed bound (:mod:`gpflow_fastvi.gaussian.collapsed`) as its named terms, of the
        sites with the given local parameters, or of the sites read off the stored q(u).
        """
        data = self.training_data(data)
        L = self.Kmm_cholesky()
        if site_parameters is None:
            stats = self._pass_statistics(data, L, self.site_rule)
        else:
            X, Y = self._arrays(data, "site_parameters")
            stats = self._fixed_site_statistics(X, Y, L, site_parameters)
        return collapsed_bound(stats, collapsed_factors(stats))

    def update_q(
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
        X, Y = self._arrays(self.training_data(data), "site_parameters")
        L = self.Kmm_cholesky()
        stats = self._fixed_site_statistics(X, Y, L, site_parameters)
        factors = collapsed_factors(stats)
        q_mu, q_sqrt = optimal_q(factors, L, self.whiten)
        self.store_q(tf.stop_gradient(q_mu), tf.stop_gradient(q_sqrt))
        return collapsed_bound(stats, factors).total

    def objective(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """
        The method's own objective (to be maximised): the collapsed bound of the sites read off
        the stored q(u), or of the sites with the given local parameters. Assigns nothing.
        """
        return self.collapsed_bound(data, site_parameters).total

    def maximum_log_likelihood_objective(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """The model's objective, :meth:`objective` (GPflow's name for it)."""
        return self.objective(data)

    def sites_elbo(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """
        The ELBO of the sites at the *stored* q(u), Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] − KL[q(u) ‖ p(u)],
        with the sites' local parameters given or read off q(u). It equals the collapsed bound
        of the same sites when q(u) is optimal for them and is below it everywhere else.
        """
        data = self.training_data(data)
        L = self.Kmm_cholesky()
        m, R = whitened_q(self.q_mu, self.q_sqrt, L, self.whiten)

        def batch_expectation(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> tf.Tensor:
            *params, L, m, R = rest
            A, Ktilde_diag, *_ = self.projection(X, L)
            Gmu, Fvar = marginals(A, Ktilde_diag, m, R)
            Fmu = Gmu + self.mean_function(X)
            if not params:
                params = [tf.stop_gradient(p) for p in self.site_update(X, Y, Fmu, Fvar)]
            return tf.reduce_sum(expected_sites(self.site_rule(X, Y, *params), Fmu, Fvar))

        if site_parameters is None:
            expectation = self._sum_over_data(batch_expectation, data, (L, m, R))
        else:
            tensors = (*self._arrays(data, "site_parameters"), *site_parameters)
            expectation = self._sum_over_data(batch_expectation, tensors, (L, m, R))
        return expectation - kl_to_prior(m, R)

    # ----------------------------------------------------------------------------------------------
    # GPflow's training interface.

    def training_loss(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        −(objective + log prior density of the parameters), for GPflow's optimisers: each
        evaluation takes the closed-form site steps of one evaluation of the persistent route
        (three passes, from the stored q(u)) and stores their q(u) unless its loss is higher than
        that of the evaluation that stored the current one (a line search's trial point too far
        out), so that
        ``gpflow.optimizers.Scipy().minimize(model.training_loss_closure((X, Y)),
        model.trainable_variables)`` moves the sites with the hyperparameters and ends where
        :func:`gpflow_fastvi.fit` does (more slowly: ``fit`` keeps the sites of accepted
        iterates only, and restarts L-BFGS-B when the sites have moved under it).

        Where no jitter can factorise Kmm (a line search's extreme trial point) the loss is
        +inf with a zero gradient, and q(u) is left as it was: L-BFGS-B then shortens its step
        (:meth:`~gpflow_fastvi.models.protocol.SiteModel.loss_or_inf`).

        On a mini-batch (fewer rows than ``num_data``) the step is instead a natural-gradient step
        of size ρ = min(1, b / 10,000) on q(u) towards the batch's closed-form optimum, and the
        loss is the batch's estimate of the sites' ELBO at the new q(u)
        (:meth:`~gpflow_fastvi.models.protocol.SiteModel.mini_batch_loss_step`), so that an Adam
        loop over ``training_loss_closure(iter(dataset))`` trains the hyperparameters while q(u)
        follows by the method's own step.
        """
        data = self.training_data(data)
        if self._is_mini_batch(data):
            return self.mini_batch_loss_step(data)

        def loss() -> tf.Tensor:
            stepped = self._stepped(data, FULL_DATA_STEPS)
            return self.adopt_unless_worse(
                -(stepped.objective + self.log_prior_density()), lambda: self.adopt(stepped)
            )

        return self.where_factorisable(loss)

    def training_loss_closure(
        self, data: Any = None, *, compile: bool = True
    ) -> Callable[[], tf.Tensor]:
        """
        :meth:`training_loss` as a closure for GPflow's optimisers, as
        :meth:`gpflow.models.SVGP.training_loss_closure` builds it: ``data`` is ``(X, Y)`` (checked
        and converted once, here), a ``tf.data.Dataset`` (all of it, streamed at every call), an
        iterator of batches (a new batch at every call), or ``None`` for the data the model holds.
        A model whose loop on such a closure was measured to end short of ``fit`` says so when
        the closure is built (:meth:`~gpflow_fastvi.models.protocol.SiteModel.warn_if_closure_falls_short`).
        """
        self.warn_if_closure_falls_short(data)
        if data is None or _looks_like_data(data) or isinstance(data, tf.data.Dataset):
            fixed = self.training_data(data)  # a dataset: every call streams all of it

            def closure() -> tf.Tensor:
                return self.training_loss(fixed)

            return tf.function(closure, autograph=False) if compile else closure
        batches = data
        if not compile:
            return lambda: self.training_loss(next(batches))
        spec = getattr(
            batches, "element_spec", None
        )  # a tf.data iterator: one trace for all batches
        step = tf.function(
            self.training_loss, input_signature=None if spec is None else [spec], autograph=False
        )
        return lambda: step(next(batches))

    # ----------------------------------------------------------------------------------------------
    # The SVGP yardstick and predictions, exactly as in gpflow.models.SVGP.

    def elbo(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        The standard SVGP ELBO at the model's current q(u): Σᵢ E_q[log p(yᵢ | fᵢ)] − KL[q(u) ‖ p(u)],
        the expectations by the likelihood's own (Gauss–Hermite) quadrature, the sum scaled by
        ``num_data`` / rows for a mini-batch as SVGP scales it. This is the yardstick to compare
        with :class:`gpflow.models.SVGP`; for VIJJ it is ≥ the bound. Models change the
        likelihood term through :meth:`_expected_log_likelihood`.
        """
        data = self.training_data(data)
        var_exp = self._sum_over_data(self._expected_log_likelihood, data)
        kl = kl_to_prior(*whitened_q(self.q_mu, self.q_sqrt, self.Kmm_cholesky(), self.whiten))
        scale = 1.0 if isinstance(data, tf.data.Dataset) else self.data_scale(data[0])
        return scale * var_exp - kl

    def yardstick_elbo(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """The SVGP yardstick, :meth:`elbo`."""
        return self.elbo(data)

    def _expected_log_likelihood(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        """Σᵢ E_q[log p(yᵢ | fᵢ)] over the points (X, Y) at the model's q(f)."""
        return tf.reduce_sum(self.expected_log_density(X, Y, *self._predict_f(X)))

    def expected_log_density(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> tf.Tensor:
        """
        E_{N(fᵢ | Fmu, Fvar)}[log p(yᵢ | fᵢ)] [N], by the likelihood's own quadrature (closed form
        where GPflow has one; for the logit Bernoulli the same Gauss–Hermite rule on
        :func:`logit_log_prob`, finite everywhere).
        """
        if not self._logit_bernoulli:
            return self.likelihood.variational_expectations(X, Fmu, Fvar, Y)
        return self.likelihood.quadrature(logit_log_prob, Fmu, Fvar, Y=Y)[:, 0]

    def posterior(
        self, precompute_cache: PrecomputeCacheType = PrecomputeCacheType.TENSOR
    ) -> BasePosterior:
        """
        GPflow's posterior object for the current q(u), as :meth:`gpflow.models.SVGP.posterior`
        builds it (with GPflow's fixed jitter: where Kmm needs more, :meth:`predict_f` is the
        model's predictive, from training's factorisation).
        """
        return gpflow.posteriors.create_posterior(
            self.kernel,
            self.inducing_variable,
            self.q_mu,
            self.q_sqrt,
            whiten=self.whiten,
            mean_function=self.mean_function,
            precompute_cache=precompute_cache,
        )
