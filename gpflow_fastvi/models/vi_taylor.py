"""VITaylor: sparse variational GP with Taylor sites, for any log-concave GPflow likelihood (paper 000, vi-Taylor)."""

from typing import Callable, Optional, Tuple

import gpflow
import tensorflow as tf
from gpflow.base import Parameter, RegressionData

from ..inducing import InducingSpec
from ..sites.taylor import taylor_sites
from ..types import Route, Sites
from ..validation import check_scalar_likelihood
from .base import PERSISTENT_ROUTE, GaussianSitesModel, logit_log_prob


class VITaylor(GaussianSitesModel):
    r"""
    Sparse variational GP with a second-order Taylor expansion of the log-likelihood
    (:cite:t:`izmailov2017faster`, "vi-Taylor"), for any GPflow likelihood whose log-density is
    concave in f: Bernoulli with the logit or probit link, Poisson, Gaussian, ...

    Each log p(yᵢ | fᵢ) is replaced by its expansion at ξᵢ, the current mean of q(fᵢ), a Gaussian
    site whose coefficients come from automatic differentiation of ``likelihood.log_prob``
    (:mod:`gpflow_fastvi.sites.taylor`). For fixed ξ the optimal q(u) is closed form and the
    collapsed objective J̃(θ; ξ) depends on the hyperparameters only, as for :class:`VIJJ`.

    J̃ is an **approximation** to the ELBO, not a bound on log p(y): it can lie above or below. The
    number to report and compare is :meth:`elbo`, the standard SVGP ELBO at the model's q(u) (by the
    likelihood's own quadrature). With a Gaussian likelihood the expansion is exact and J̃ is
    Titsias' bound, the objective of :class:`gpflow.models.SGPR`.

    - :func:`gpflow_fastvi.fit` runs, by default, one persistent L-BFGS-B run over θ with ξ
      stepped in closed form between accepted iterates (``method="persistent"``), or the paper's
      vi-Taylor by name (``method="analytic"``: ``n_upd`` closed-form updates of ξ and q(u), then
      L-BFGS-B on θ at fixed ξ for at most ``maxfun`` evaluations, default 3 and 5). ξ is not a
      free parameter of a bound, so the 'full' and 'hybrid' schemes of VIJJ do not apply and ξ
      is never optimised numerically.
    - :meth:`training_loss` is −J̃ at the current ξ, and stores the matching q(u), so
      ``gpflow.optimizers.Scipy().minimize(model.training_loss, model.trainable_variables)`` fits θ
      for the current expansion points.
    - ``q_mu``, ``q_sqrt``, ``whiten``, ``inducing_variable``, ``num_data`` mean what they mean in
      :class:`gpflow.models.SVGP`.

    Bernoulli labels may be {0, 1} or {−1, +1} (stored as {0, 1}); Poisson targets must be
    non-negative integers. Where the likelihood is not log-concave the site curvature is clipped at 0
    (see :mod:`gpflow_fastvi.sites.taylor`).
    """

    training_routes = {
        "analytic": Route(
            "alternating",
            options={"n_upd": 3, "maxfun": 5},
            settings={"closed_form_sites": True, "sites_in_lbfgs": False},
            description="vi-Taylor: closed-form ξ and q(u), then L-BFGS-B on θ at fixed ξ",
        ),
        "persistent": PERSISTENT_ROUTE,
    }
    default_route = "persistent"
    objective_is_bound = False

    def __init__(
        self,
        data: RegressionData,
        kernel: gpflow.kernels.Kernel,
        inducing_variable: InducingSpec,
        *,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        mean_function: Optional[gpflow.mean_functions.MeanFunction] = None,
        whiten: bool = True,
        train_inducing: bool = False,
        batch_size: Optional[int] = None,
        kmeans_seed: int = 0,
    ):
        """
        :param data: ``(X, Y)``, X [N, D], Y [N, 1] in the likelihood's convention.
        :param kernel: any GPflow kernel for a single latent function.
        :param inducing_variable: a GPflow inducing variable, an array Z [M, D] or an int M
            (k-means centres of X). Fixed unless ``train_inducing=True``.
        :param likelihood: any :class:`gpflow.likelihoods.ScalarLikelihood` with a log-concave
            density; default ``Bernoulli(invlink=tf.sigmoid)`` (the logit link, as in the paper).
        :param batch_size: accumulate over batches of this many points (memory O(batch · M)).
        """
        if likelihood is None:
            likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        check_scalar_likelihood(likelihood, "VITaylor")
        super().__init__(
            data,
            kernel,
            likelihood,
            inducing_variable,
            mean_function=mean_function,
            whiten=whiten,
            train_inducing=train_inducing,
            batch_size=batch_size,
            kmeans_seed=kmeans_seed,
        )
        X, _ = self.data
        # Expansion at the prior mean: the mean of q(f) for the initial q(u) = p(u).
        self.xi = Parameter(self.mean_function(X), trainable=False)

    @property
    def site_parameters(self) -> Tuple[Parameter, ...]:
        return (self.xi,)

    def site_rule(self, X: tf.Tensor, Y: tf.Tensor, xi: tf.Tensor) -> Sites:  # type: ignore[override]
        return taylor_sites(self._log_density(X, Y), xi, name=type(self.likelihood).__name__)

    def _log_density(self, X: tf.Tensor, Y: tf.Tensor) -> Callable[[tf.Tensor], tf.Tensor]:
        """
        F ↦ log p(yᵢ | fᵢ) [N]; for the logit Bernoulli in the stable form
        :func:`~gpflow_fastvi.models.base.logit_log_prob`.
        """
        if self._logit_bernoulli:
            return lambda F: logit_log_prob(F, Y)[:, 0]
        return lambda F: self.likelihood.log_prob(X, F, Y)

    def site_update(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        return (Fmu,)
