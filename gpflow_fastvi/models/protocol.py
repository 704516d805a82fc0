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
how the model is trained               ``training_routes`` and ``default_route`` (data, read by
                                       :func:`gpflow_fastvi.fit`)
=====================================  =========================================================

Two families implement it: :class:`~gpflow_fastvi.models.base.GaussianSitesModel` (the models with
a closed-form step, built like SVGP with the data per call, or holding their data like SGPR) and
:class:`~gpflow_fastvi.PolyaGammaSVGP` (an SVGP that takes data per call).
Training code (:mod:`gpflow_fastvi.training`) drives a model through these members only.
"""

import abc
import warnings
from typing import Any, ClassVar, Mapping, Optional, Tuple

import gpflow
import tensorflow as tf
from gpflow.base import InputData, MeanAndVariance, RegressionData

from ..gaussian import (
    Projection,
    is_factorisable,
    kmm_cholesky,
    marginal_covariance,
    marginals,
    natural_gradient_update,
    sites_elbo,
    stored_q,
    whitened_projection,
    whitened_q,
)
from ..types import Route, Sites
from ..validation import (
    check_data,
    check_input_columns,
    checked_inputs,
    is_symbolic,
    targets_for_likelihood,
)

AVERAGED_POINTS = 3000
"""
The step size for mini-batches of s points, of :func:`~gpflow_fastvi.training.svi_plan` and of a
mini-batch ``training_loss``, is the constant ρ = min(1, s / this): q(u) then averages the batches' targets over about this many points, whatever the batch size, and keeps
up with the hyperparameters that Adam moves at every step (a Robbins–Monro ρₜ → 0 lets it lag
them). Measured with batches of 1000 (30 s): on ijcnn1 ρ = 0.3 reached the benchmark target in
15.8 s, ρ = 0.1 in 24.4 s, and Robbins–Monro (τ = 1, κ = 0.6) not at all; on a9a all three within
3.1–3.6 s.
"""


def mini_batch_step_size(batch_size: Any) -> Any:
    """
    The default constant ρ = min(1, s / :data:`AVERAGED_POINTS`) for mini-batches of s points; s
    may be an int or a scalar tensor (a batch whose size is known only when it runs).
    """
    if tf.is_tensor(batch_size):
        dtype = gpflow.config.default_float()
        return tf.minimum(tf.constant(1.0, dtype), tf.cast(batch_size, dtype) / AVERAGED_POINTS)
    return min(1.0, batch_size / AVERAGED_POINTS)


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
    building such a closure gives (:meth:`warn_if_mini_batch_closure_falls_short`)."""

    def warn_if_mini_batch_closure_falls_short(self, data: Any) -> None:
        """
        Warn, once per closure, when ``data`` is an iterator of mini-batches and this model's
        mini-batch closure is known to end short of ``fit`` (:attr:`mini_batch_closure_shortfall`).
        """
        is_full_data = data is None or isinstance(data, (tuple, list, tf.data.Dataset))
        if self.mini_batch_closure_shortfall and not is_full_data:
            warnings.warn(self.mini_batch_closure_shortfall, UserWarning, stacklevel=3)

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
        A: tf.Tensor,
        Ktilde_diag: tf.Tensor,
        q_mu: tf.Tensor,
        q_sqrt: tf.Tensor,
    ) -> tf.Tensor:
        """
        The ELBO of the sites at q(u) = (``q_mu``, ``q_sqrt``) estimated from the batch (X, Y),
        whose projection A = L⁻¹ Kmn is given: data_scale · Σᵢ E_q[aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2] − KL,
        with each site's local parameters optimal for the marginals (:func:`sites_elbo`).
        """
        m, R = whitened_q(q_mu, q_sqrt, L, self.whiten)  # type: ignore[attr-defined]
        return sites_elbo(
            A,
            Ktilde_diag,
            self.mean_function(X),  # type: ignore[attr-defined]
            m,
            R,
            lambda Fmu, Fvar: self.local_sites(X, Y, Fmu, Fvar),
            self.data_scale(X),
        )

    def store_q(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> None:
        """Assign ``q_mu`` and ``q_sqrt`` (in the stored frame), set at the current hyperparameters."""
        self.q_mu.assign(q_mu)  # type: ignore[attr-defined]
        self.q_sqrt.assign(q_sqrt)  # type: ignore[attr-defined]

    def natural_gradient_step(self, data: RegressionData, rho: tf.Tensor) -> tf.Tensor:
        """
        One stochastic variational step on the batch ``data`` = (X, Y): the sites' local
        parameters are set for the current q(u) (:meth:`local_sites`), q(u) moves by a natural-gradient
        step of size ``rho`` towards the batch's closed-form optimum scaled by :meth:`data_scale`
        (:func:`~gpflow_fastvi.gaussian.natural_gradient_update`), and ``q_mu``/``q_sqrt`` are
        assigned once.

        Returns the batch's estimate of the sites' ELBO at the new q(u) (:meth:`batch_sites_elbo`),
        differentiable in the hyperparameters and computed from the same projection, so that a
        caller can take its hyperparameter step at no extra cost (as
        :class:`~gpflow_fastvi.NaturalGradientSVI` does). With the full batch and ρ = 1 the step
        lands on the closed-form optimum from any start.
        """
        X, Y = data
        L = self.Kmm_cholesky()
        projection = self.projection(X, L)
        prior_mean = self.mean_function(X)  # type: ignore[attr-defined]
        m, R = whitened_q(self.q_mu, self.q_sqrt, tf.stop_gradient(L), self.whiten)  # type: ignore[attr-defined]
        m, R = natural_gradient_update(
            tf.nest.map_structure(tf.stop_gradient, projection),
            tf.stop_gradient(prior_mean),
            m,
            R[None],
            tf.stop_gradient(L),
            True,
            lambda Fmu, Fvar: self.local_sites(X, Y, Fmu, Fvar),
            self.data_scale(X),
            tf.convert_to_tensor(rho, dtype=L.dtype),
        )
        q_mu, q_sqrt = stored_q(m, R[0], tf.stop_gradient(L), self.whiten)  # type: ignore[attr-defined]
        self.store_q(q_mu, q_sqrt)
        return self.batch_sites_elbo(X, Y, L, projection.A, projection.Ktilde_diag, q_mu, q_sqrt)
