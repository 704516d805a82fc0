"""
:class:`SiteModel`: the one protocol every model of the package offers, whatever family it is in.

In the spirit of Markovflow's ``update_sites()``: the sites are the model's business, the step
that moves them is a model method, and the method's own objective sits beside the reference ELBO.

=====================================  =========================================================
what                                   member
=====================================  =========================================================
the sites for the current q(u)         :meth:`~SiteModel.local_sites` (X, Y, q(f)) ↦ Sites
a step towards the sites' optimum      :meth:`~SiteModel.update_sites` (closed form, full data);
                                       :meth:`~SiteModel.natural_gradient_step` (size ρ, a batch)
the method's own objective             :meth:`~SiteModel.objective`
the SVGP yardstick                     :meth:`~SiteModel.yardstick_elbo`
the devices its passes are shared by   :attr:`~SiteModel.distribute_strategy` (``tf.distribute``)
how the model is trained               ``training_routes`` and ``default_route`` (data, read by
                                       :func:`gpflow_fastvi.fit`)
=====================================  =========================================================

Two families implement it: :class:`~gpflow_fastvi.models.base.GaussianSitesModel` (the models with
a closed-form step, built like SVGP with the data per call, or holding their data like SGPR) and
:class:`~gpflow_fastvi.PolyaGammaSVGP` (an SVGP that takes data per call).
Training code (:mod:`gpflow_fastvi.training`) drives a model through these members only.
"""

import abc
import contextlib
import warnings
from typing import Any, Callable, ClassVar, Iterator, Mapping, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.base import InputData, MeanAndVariance, RegressionData

from ..distribution import StrategyRef, in_replica, strategy_in_scope
from ..exceptions import InvalidDataError
from ..gaussian import (
    NaturalParameters,
    Projection,
    is_factorisable,
    kmm_cholesky,
    marginal_covariance,
    marginals,
    natural_gradient_parameters,
    q_from_natural,
    robust_cholesky,
    sites_elbo,
    step_statistics,
    stored_q,
    sum_and_gradient_over_replicas,
    sum_over_replicas,
    summed_expected_sites,
    whitened_projection,
    whitened_q,
)
from ..types import Route, Sites, SiteStatistics
from ..validation import (
    check_data,
    check_input_columns,
    checked_inputs,
    inducing_inputs,
    is_symbolic,
    targets_for_likelihood,
)

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


class QFrame:
    """
    Where q(u) was last set: copies of the model's kernel, inducing variable and mean function at
    that moment, of the ``q_mu`` and ``q_sqrt`` it was set to, and the full-data training loss of
    the evaluation that set it.

    Two uses. :class:`~gpflow_fastvi.models.base.GaussianSitesModel` reads the sites' local
    parameters off the marginals q(fᵢ) of the stored q(u) *at these hyperparameters*, whatever
    hyperparameters it then forms statistics at, so the sites an optimiser's trial point starts
    from are those of the last state, fixed in f-space, as if they were stored per point. Read at
    the trial hyperparameters instead, they move with them: a larger kernel variance inflates
    whitened means, a longer lengthscale makes Kmm⁻¹ amplify u-space means, and on ijcnn1
    VITaylor's L-BFGS-B followed such readings to expansion points of 10⁵ and an objective of 10¹⁰
    (its Taylor objective is not a bound, so it can be inflated). And every model's full-data
    ``training_loss`` keeps the q(u) of an evaluation only if its loss is no higher than
    :attr:`loss` (:meth:`SiteModel.adopt_unless_worse`).

    When ``q_mu`` or ``q_sqrt`` has been changed from outside since (a restored checkpoint, an
    assignment, an optimiser), the frame no longer belongs to it (:meth:`belongs_to`): q(u) is
    then read at the current hyperparameters, as SVGP reads it, and any evaluation may set it.

    A plain object, not a :class:`tf.Module`: its variables are scratch state of the training
    step, not part of the model, so they are neither trainable nor written to checkpoints, which
    therefore hold exactly SVGP's variables.
    """

    def __init__(self, model: Any):
        self.kernel = gpflow.utilities.deepcopy(model.kernel)
        self.inducing_variable = gpflow.utilities.deepcopy(model.inducing_variable)
        self.mean_function = gpflow.utilities.deepcopy(model.mean_function)
        dtype = gpflow.config.default_float()
        M = model.inducing_variable.num_inducing
        not_yet = np.full((M, 1), np.nan)  # equal to no q_mu: no frame yet
        self.q_mu = tf.Variable(not_yet, dtype=dtype, trainable=False)
        self.q_sqrt = tf.Variable(np.eye(M)[None], dtype=dtype, trainable=False)
        self.loss = tf.Variable(np.inf, dtype=dtype, trainable=False)
        """The full-data training loss of the evaluation that set q(u); +inf if none did."""

    def _pairs(self, model: Any) -> Sequence[Tuple[tf.Variable, tf.Variable]]:
        pairs = []
        for copy, original in (
            (self.kernel, model.kernel),
            (self.inducing_variable, model.inducing_variable),
            (self.mean_function, model.mean_function),
        ):
            pairs += list(zip(copy.variables, original.variables))
        return pairs

    def set(self, model: Any, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> None:
        """Record the model's current hyperparameters as the frame of ``(q_mu, q_sqrt)``."""
        for copy, original in self._pairs(model):
            copy.assign(original)
        self.q_mu.assign(q_mu)
        self.q_sqrt.assign(q_sqrt)
        self.loss.assign(np.inf)

    def belongs_to(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> tf.Tensor:
        """Whether the stored q(u) is still the one the frame was recorded with."""
        return tf.reduce_all(tf.equal(self.q_mu, q_mu)) & tf.reduce_all(
            tf.equal(self.q_sqrt, q_sqrt)
        )

    def is_at(self, model: Any) -> tf.Tensor:
        """Whether the model's hyperparameters are still the frame's (no optimiser moved them)."""
        return tf.reduce_all([tf.reduce_all(tf.equal(c, o)) for c, o in self._pairs(model)])


class SiteModel(abc.ABC):
    """
    Mixin that states the protocol of the module docstring and implements the parts that are the
    same for every site rule. The host class is a GPflow model with ``kernel``,
    ``inducing_variable``, ``mean_function``, ``q_mu``, ``q_sqrt``, ``whiten`` and ``num_data``,
    each meaning what it means in :class:`gpflow.models.SVGP`.
    """

    training_routes: ClassVar[Mapping[str, Route]]
    """The ways :func:`gpflow_fastvi.fit` can train the model, by name."""
    default_route: ClassVar[str]
    """The route ``fit`` takes when no ``method`` is given."""
    objective_is_bound: ClassVar[bool]
    """Whether :meth:`objective` is a lower bound on log p(y) (then also ≤ the yardstick at the
    q(u) it stores); ``False`` for a local approximation such as Taylor sites."""
    mini_batch_closure_shortfall: ClassVar[Optional[str]] = None
    """Where an Adam loop over ``training_loss_closure(iter(dataset))`` was measured to end short
    of :func:`gpflow_fastvi.fit`, what was measured and what to use instead: the warning that
    building such a closure gives (:meth:`warn_if_closure_falls_short`)."""
    full_data_closure_shortfall: ClassVar[Optional[str]] = None
    """The same for ``gpflow.optimizers.Scipy`` on ``training_loss_closure((X, Y))`` (or on the
    data the model holds, or a ``tf.data.Dataset``)."""

    def warn_if_closure_falls_short(self, data: Any) -> None:
        """
        Warn, once per closure, when this model's closure on ``data`` (all the data, or an
        iterator of mini-batches) is known to end short of ``fit``
        (:attr:`full_data_closure_shortfall`, :attr:`mini_batch_closure_shortfall`).
        """
        is_full_data = data is None or isinstance(data, (tuple, list, tf.data.Dataset))
        shortfall = (
            self.full_data_closure_shortfall if is_full_data else self.mini_batch_closure_shortfall
        )
        if shortfall:
            warnings.warn(shortfall, UserWarning, stacklevel=3)

    # ----------------------------------------------------------------------------------------------
    # What each model provides.

    @abc.abstractmethod
    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """
        The sites (a, b, w) on f of the points (X, Y) whose local parameters (ξ, c, the tilted
        q(fₙ)) are optimal for the marginals q(f) = N(Fmu, Fvar) of the current q(u).
        """

    @abc.abstractmethod
    def update_sites(
        self, num_updates: int = 1, *, data: Optional[RegressionData] = None
    ) -> tf.Tensor:
        """
        Move the sites and q(u) to their joint optimum for the current hyperparameters by
        ``num_updates`` closed-form steps over all the data; return :meth:`objective` after them.
        """

    @abc.abstractmethod
    def objective(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """The method's own objective (to be maximised) at the current state."""

    @abc.abstractmethod
    def yardstick_elbo(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        The standard SVGP ELBO Σᵢ E_q[log p(yᵢ | fᵢ)] − KL[q(u) ‖ p(u)] at the stored q(u), the
        expectations by quadrature: the number to compare with :class:`gpflow.models.SVGP`.
        """

    # ----------------------------------------------------------------------------------------------
    # The data boundary of a call: concrete data checked as the constructors check it.

    def checked_data(self, data: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        ``data`` = (X, Y) as tensors: finite, X with the inducing inputs' columns, the targets
        checked and converted to the likelihood's convention (:mod:`gpflow_fastvi.validation`).
        Symbolic tensors (inside a compiled function) are taken as they are.
        """
        X, Y = data
        if is_symbolic(X) or is_symbolic(Y):
            return tf.convert_to_tensor(X), tf.convert_to_tensor(Y)
        X, Y = check_data((X, Y))
        Y = targets_for_likelihood(self.likelihood, Y)  # type: ignore[attr-defined]
        check_input_columns(X, self.inducing_variable, "the inputs X")  # type: ignore[attr-defined]
        return tf.constant(X), tf.constant(Y)

    def checked_training_data(self, data: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        Training data ``data`` = (X, Y), checked as :meth:`checked_data` checks them and with at
        most ``num_data`` rows, the number of training points (fewer rows are a mini-batch). Test
        points, which may be more, are checked by :meth:`checked_data` alone.
        """
        X, Y = self.checked_data(data)
        num_data = self.num_data  # type: ignore[attr-defined]
        rows = X.shape[0]
        if num_data is not None and rows is not None and rows > num_data:
            raise ValueError(
                f"The data have {rows} rows, more than num_data={num_data}, the number of "
                "training points (a call with fewer rows is a mini-batch of them): build the "
                f"model with num_data={rows}, or leave num_data out."
            )
        return X, Y

    # ----------------------------------------------------------------------------------------------
    # Predictions: inputs checked like training inputs, through training's factorisation of Kmm.

    def predict_f(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """
        The mean and variance of f at ``Xnew`` under q(u), as :meth:`gpflow.models.SVGP.predict_f`
        gives them, from the same factor L = chol(Kmm + jitter) as training
        (:meth:`Kmm_cholesky`: where GPflow's fixed jitter is not enough, the jitter training
        escalated to). ``Xnew`` is checked and converted as training inputs are: any real
        array-like with the inducing inputs' columns, finite.
        """
        Xnew = checked_inputs(Xnew, self.inducing_variable)  # type: ignore[attr-defined]
        return self._predict_f(Xnew, full_cov, full_output_cov)

    def _predict_f(
        self, Xnew: tf.Tensor, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """:meth:`predict_f` at inputs already checked (training data, test data)."""
        L = self.Kmm_cholesky()
        m, R = whitened_q(self.q_mu, self.q_sqrt, L, self.whiten)  # type: ignore[attr-defined]
        projection = self.projection(Xnew, L)
        Gmu, var = marginals(projection.A, projection.Ktilde_diag, m, R)
        mean = Gmu + self.mean_function(Xnew)  # type: ignore[attr-defined]
        if full_cov:
            Knn = self.kernel(Xnew, full_cov=True)  # type: ignore[attr-defined]
            var = marginal_covariance(projection.A, Knn, R)[None]  # [1, N, N]
            return mean, (var[0][:, None, :, None] if full_output_cov else var)  # [N, 1, N, 1]
        return mean, (var[:, :, None] if full_output_cov else var)  # [N, 1, 1] or [N, 1]

    def predict_y(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """The mean and variance of y at ``Xnew``, as GPflow gives them; ``Xnew`` checked as in :meth:`predict_f`."""
        Xnew = checked_inputs(Xnew, self.inducing_variable)  # type: ignore[attr-defined]
        return super().predict_y(  # type: ignore[misc]
            Xnew, full_cov=full_cov, full_output_cov=full_output_cov
        )

    def predict_log_density(
        self, data: RegressionData, full_cov: bool = False, full_output_cov: bool = False
    ) -> tf.Tensor:
        """
        log ∫ p(y* | f*) q(f*) df* at test points, as GPflow gives it; the points are checked as
        training data are (:meth:`checked_data`: labels outside the likelihood's support are an
        error, not a score).
        """
        return super().predict_log_density(  # type: ignore[misc]
            self.checked_data(data), full_cov=full_cov, full_output_cov=full_output_cov
        )

    # ----------------------------------------------------------------------------------------------
    # Where the inducing inputs are: greedy selection weighted by the sites, and moving them.

    def site_precisions(self, data: Optional[RegressionData] = None) -> np.ndarray:
        """
        The site precisions wᵢ [N] of the points ``data`` = (X, Y) (default: the data the model
        holds) at the current q(u): how firmly each point's likelihood pins f there. They weight
        the trace term that :func:`~gpflow_fastvi.greedy_inducing_points` shrinks.
        """
        if data is None:
            data = getattr(self, "data", None)
            if data is None:
                raise ValueError(
                    f"This {type(self).__name__} was built without data: pass (X, Y) to "
                    "site_precisions."
                )
        X, Y = self.checked_data(data)
        Fmu, Fvar = self._predict_f(X)
        return self.local_sites(X, Y, Fmu, Fvar).w[:, 0].numpy()

    def move_inducing_inputs(self, Z: Any) -> None:
        """
        Put the inducing inputs at ``Z`` [M, D] (as many as now) and q(u) at the current posterior
        of f there, q(f(Z)): the model keeps what it has learnt, as far as the new inputs can carry
        it, and a closed-form step starts from there.
        """
        Z_old = self.inducing_variable.Z  # type: ignore[attr-defined]
        Z = tf.constant(inducing_inputs(Z), dtype=Z_old.dtype)
        if Z.shape != Z_old.shape:
            raise InvalidDataError(
                f"Moving the inducing inputs keeps their number and columns, {list(Z_old.shape)}; "
                f"got {list(Z.shape)}."
            )
        L = self.Kmm_cholesky()
        m, R = whitened_q(self.q_mu, self.q_sqrt, L, self.whiten)  # type: ignore[attr-defined]
        projection = self.projection(Z, L)
        Gmu, _ = marginals(projection.A, projection.Ktilde_diag, m, R)
        covariance = marginal_covariance(projection.A, self.kernel(Z), R)  # type: ignore[attr-defined]
        self.inducing_variable.Z.assign(Z)  # type: ignore[attr-defined]
        L = self.Kmm_cholesky()
        m = tf.linalg.triangular_solve(L, Gmu, lower=True)
        LinvS = tf.linalg.triangular_solve(L, covariance, lower=True)
        S = tf.linalg.triangular_solve(L, tf.transpose(LinvS), lower=True)  # L⁻¹ Σ L⁻ᵀ
        R = robust_cholesky(0.5 * (S + tf.transpose(S)), what="q(u) at the new inducing inputs")
        self.store_q(*stored_q(m, R, L, self.whiten))  # type: ignore[attr-defined]

    # ----------------------------------------------------------------------------------------------
    # The same for every site rule.

    def Kmm_cholesky(self) -> tf.Tensor:
        """L = chol(Kmm + jitter), with jitter that escalates if needed."""
        return kmm_cholesky(self.kernel, self.inducing_variable)  # type: ignore[attr-defined]

    def Kmm_is_factorisable(self) -> tf.Tensor:
        """Whether :meth:`Kmm_cholesky` succeeds at the current hyperparameters (a boolean tensor)."""
        Kmm = gpflow.covariances.Kuu(self.inducing_variable, self.kernel)  # type: ignore[attr-defined]
        return is_factorisable(Kmm)

    def projection(self, X: tf.Tensor, L: tf.Tensor) -> Projection:
        """A = L⁻¹ Kmn and diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ of the points X (:func:`whitened_projection`)."""
        return whitened_projection(self.kernel, self.inducing_variable, X, L)  # type: ignore[attr-defined]

    def data_scale(self, X: tf.Tensor) -> tf.Tensor:
        """num_data / (rows of X): how much a batch's sum over points counts; 1 without ``num_data``."""
        dtype = gpflow.config.default_float()
        num_data: Any = self.num_data  # type: ignore[attr-defined]
        if num_data is None:
            return tf.constant(1.0, dtype=dtype)
        return tf.cast(num_data, dtype) / tf.cast(tf.shape(X)[0], dtype)

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
        is taken by :meth:`sum_over_rows` (the batch's ``projection`` by L = chol(Kmm) saves
        projecting it again, where one device makes the pass).
        """
        m, R = whitened_q(q_mu, q_sqrt, L, self.whiten)  # type: ignore[attr-defined]
        total = self.sum_over_rows(self.rows_expected_sites, X, Y, L, (m, R), projection)
        return sites_elbo(total, m, R, self.data_scale(X))

    def rows_expected_sites(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Projection, m: tf.Tensor, R: tf.Tensor
    ) -> tf.Tensor:
        """Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] over the rows (X, Y) with the given ``projection``, for
        q(v) = N(m, R Rᵀ): the sum over points of :meth:`batch_sites_elbo`."""
        return summed_expected_sites(
            projection,
            self.mean_function(X),  # type: ignore[attr-defined]
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
            tf.stop_gradient(self.mean_function(X)),  # type: ignore[attr-defined]
            m,
            R,
            lambda Fmu, Fvar: self.local_sites(X, Y, Fmu, Fvar),
        )
        return tf.nest.map_structure(tf.stop_gradient, stats)

    # ----------------------------------------------------------------------------------------------
    # Several devices: tf.distribute.

    @property
    def distribute_strategy(self) -> Optional[tf.distribute.Strategy]:
        """
        The :mod:`tf.distribute` strategy whose replicas share this model's passes over the data:
        that of the enclosing ``strategy.scope()``, else the one the model was built in, else
        ``None`` (one device). See :mod:`gpflow_fastvi.distribution`.
        """
        in_scope = strategy_in_scope()
        if in_scope is not None:
            return in_scope
        for ref in (self._strategy_for_now, self._built_in_strategy):
            if ref.strategy is not None:
                return ref.strategy
        return None

    _built_in_strategy = StrategyRef(None)  # set by a constructor called in a scope
    _strategy_for_now = StrategyRef(None)  # set by distributed_by

    @contextlib.contextmanager
    def distributed_by(self, strategy: Optional[tf.distribute.Strategy]) -> Iterator[None]:
        """
        Within this context the model's passes are shared among the replicas of ``strategy``
        (:func:`gpflow_fastvi.fit`'s ``strategy=``); ``None`` changes nothing. A model built in
        the scope of another strategy, whose replicas hold its variables, refuses.
        """
        built_in = self._built_in_strategy.strategy
        if strategy is not None and built_in is not None and built_in is not strategy:
            raise ValueError(
                f"This {type(self).__name__} was built in the scope of another tf.distribute "
                "strategy, whose replicas hold its variables: use that one, or build the model "
                "in this strategy's scope."
            )
        previous = self._strategy_for_now
        if strategy is not None:
            self._strategy_for_now = StrategyRef(strategy)
        try:
            yield
        finally:
            self._strategy_for_now = previous

    def pass_strategy(self) -> Optional[tf.distribute.Strategy]:
        """
        The strategy whose replicas share a pass over the data made now: :attr:`distribute_strategy`
        when the call is made outside the replicas, ``None`` inside ``strategy.run`` (a replica's
        own step sums the data it was given).
        """
        if in_replica():
            return None
        return self.distribute_strategy

    def sum_over_rows(
        self,
        per_rows: Callable[..., Any],
        X: tf.Tensor,
        Y: tf.Tensor,
        L: tf.Tensor,
        shared: Sequence[tf.Tensor] = (),
        projection: Optional[Projection] = None,
    ) -> Any:
        """
        ``per_rows(X, Y, projection, *shared)``, a nest of sums over the rows of (X, Y) whose
        projection by L = chol(Kmm) it reads: at once on one device (with ``projection`` when it
        is given), or with each replica of :meth:`pass_strategy` projecting and summing its own
        block of rows and one all-reduce
        (:func:`~gpflow_fastvi.gaussian.batching.sum_over_replicas`). Gradients reach L,
        ``shared`` and the trainable variables either way.
        """
        strategy = self.pass_strategy()
        if strategy is None:
            if projection is None:
                projection = self.projection(X, L)
            return per_rows(X, Y, projection, *shared)

        def replica_rows(X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, *shared: tf.Tensor) -> Any:
            return per_rows(X, Y, self.projection(X, L), *shared)

        return sum_over_replicas(
            replica_rows,
            (X, Y),
            strategy,
            (L, *shared),
            self.trainable_variables,  # type: ignore[attr-defined]
        )

    def set_up_step_state(self) -> None:
        """
        What the steps keep beside the model's variables, set up by each constructor once its
        variables exist: the :class:`QFrame` of q(u), and the strategy whose scope the model is
        built in (:attr:`distribute_strategy`), if any.
        """
        self._q_frame = QFrame(self)
        self._built_in_strategy = StrategyRef(strategy_in_scope())

    def store_q(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> None:
        """
        Assign ``q_mu`` and ``q_sqrt`` (in the stored frame), set at the current hyperparameters,
        and record them as the model's :class:`QFrame`.
        """
        self.q_mu.assign(q_mu)  # type: ignore[attr-defined]
        self.q_sqrt.assign(q_sqrt)  # type: ignore[attr-defined]
        self._q_frame.set(self, q_mu, q_sqrt)

    def is_mini_batch(self, X: tf.Tensor) -> bool:
        """
        Whether the inputs X of a call are a mini-batch: fewer rows than ``num_data``, or a
        number of rows known only when it runs (a compiled step over an iterator's batches).
        """
        num_data = self.num_data  # type: ignore[attr-defined]
        if num_data is None:
            return False
        rows = X.shape[0]
        return rows is None or rows < num_data

    def mini_batch_loss_step(self, data: RegressionData) -> tf.Tensor:
        """
        The step of a mini-batch ``training_loss``: :meth:`natural_gradient_step` on the batch
        with ρ = min(1, b / :data:`LOSS_AVERAGED_POINTS`); returns −(the batch's estimate of the
        sites' ELBO at the new q(u) + the log prior density of the parameters).
        """
        X, _ = data
        rho = mini_batch_step_size(tf.shape(X)[0], LOSS_AVERAGED_POINTS)
        return -(self.natural_gradient_step(data, rho) + self.log_prior_density())  # type: ignore[attr-defined]

    def adopt_unless_worse(self, loss: tf.Tensor, adopt: Callable[[], Any]) -> tf.Tensor:
        """
        ``loss``, after calling ``adopt`` (which stores the q(u) the full-data evaluation reached)
        unless that loss is higher than the one of the evaluation that set the stored q(u), or not
        finite: a line search's wild trial point must not become the state that its next trial
        starts from. Any finite evaluation adopts when q(u) was set otherwise since
        (:meth:`QFrame.belongs_to`).
        """
        frame = self._q_frame
        fresh = ~frame.belongs_to(self.q_mu, self.q_sqrt)  # type: ignore[attr-defined]
        keep = tf.math.is_finite(loss) & (fresh | (loss <= frame.loss))

        def adopted() -> tf.Tensor:
            adopt()
            frame.loss.assign(tf.stop_gradient(loss))
            return tf.constant(True)

        with tf.control_dependencies([tf.cond(keep, adopted, lambda: tf.constant(False))]):
            return tf.identity(loss)

    def loss_or_inf(self, ok: tf.Tensor, loss: Callable[[], tf.Tensor]) -> tf.Tensor:
        """
        ``loss()`` where the boolean tensor ``ok`` holds, else +inf with a zero gradient, without
        evaluating it (nothing it would store is stored): what a full-data ``training_loss``
        returns at a trial point where its step cannot be taken, so that L-BFGS-B backtracks.
        Not NaN, which :class:`gpflow.models.SVGP`'s loss is there: SciPy's L-BFGS-B may accept
        a NaN trial point and, its gradient being zero, report convergence at it (on ijcnn1,
        KLCorrected's Scipy loop ended so after 324 iterations, at a lengthscale of 1.6·10⁻¹⁵
        where no jitter factorises Kmm), or end its line search there.

        When a strategy's replicas share the passes (:meth:`pass_strategy`), ``loss()`` is
        evaluated as it is, and fails where it cannot be taken: TensorFlow cannot differentiate
        a ``tf.cond`` around them (the gradient of the branch captures the replicas' variables
        from outside the function). :func:`~gpflow_fastvi.fit` takes such a failure at a trial
        point as an infinite loss too.
        """
        if self.pass_strategy() is not None:
            return loss()
        inf = tf.constant(np.inf, dtype=gpflow.config.default_float())
        return tf.cond(ok, loss, lambda: inf)

    def where_factorisable(self, loss: Callable[[], tf.Tensor]) -> tf.Tensor:
        """
        ``loss()`` where Kmm can be factorised; else +inf with nothing stored
        (:meth:`loss_or_inf`). A line search's extreme trial point (a lengthscale of 10⁻¹⁵) then
        makes L-BFGS-B shorten its step, and an Adam step there has a zero gradient.
        """
        return self.loss_or_inf(self.Kmm_is_factorisable(), loss)

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
        :meth:`sum_over_rows` (from the batch's ``projection`` when given), and q(v) moves towards
        the batch's closed-form optimum scaled by :meth:`data_scale`
        (:func:`~gpflow_fastvi.gaussian.natural.natural_gradient_parameters`). Held fixed: no
        gradient.
        """
        L = tf.stop_gradient(L)
        m, R = whitened_q(q_mu, q_sqrt, L, self.whiten)  # type: ignore[attr-defined]
        m, R = tf.stop_gradient(m), tf.stop_gradient(R)
        stats = self.sum_over_rows(self.rows_step_statistics, X, Y, L, (m, R), projection)
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
        return stored_q(m, R[0], L, self.whiten)  # type: ignore[attr-defined]

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
        q_mu, q_sqrt = self.q_mu, self.q_sqrt  # type: ignore[attr-defined]
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
        (:func:`~gpflow_fastvi.gaussian.batching.sum_and_gradient_over_replicas`).
        """
        whiten = self.whiten  # type: ignore[attr-defined]
        q_mu, q_sqrt = tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt)  # type: ignore[attr-defined]
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
            replica_step, (X, Y), strategy, (L,), self.trainable_variables  # type: ignore[attr-defined]
        )
        self.store_q(q_mu, q_sqrt)
        m, R = whitened_q(q_mu, q_sqrt, L, whiten)
        return sites_elbo(expected, m, R, scale)
