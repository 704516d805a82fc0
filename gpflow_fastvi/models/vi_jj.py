"""VIJJ: sparse GP logit classification with Jaakkola–Jordan sites (paper 000, vi-JJ)."""

from typing import Optional, Tuple

import gpflow
import tensorflow as tf
from gpflow.base import Parameter, RegressionData

from ..inducing import InducingSpec
from ..sites.jaakkola_jordan import jj_optimal_xi, jj_sites
from ..types import Route, Sites
from ..validation import check_logit_bernoulli, signed_labels
from .base import PERSISTENT_ROUTE, GaussianSitesModel


class VIJJ(GaussianSitesModel):
    r"""
    Sparse variational GP classification with the logistic link, trained through the
    Jaakkola–Jordan lower bound (:cite:t:`izmailov2017faster`, "vi-JJ").

    Each log σ(yᵢ fᵢ) is bounded below by the Gaussian site
    log σ(ξᵢ) + (yᵢ fᵢ − ξᵢ)/2 − λ(ξᵢ)(fᵢ² − ξᵢ²), λ(ξ) = tanh(ξ/2)/(4ξ)
    (:mod:`gpflow_fastvi.sites.jaakkola_jordan`). For fixed ξ the optimal q(u) is closed form, and the
    collapsed bound Ĵ(θ, ξ) is a **lower bound** on log p(y) that depends on the hyperparameters θ
    and the n values ξ only (:mod:`gpflow_fastvi.gaussian.collapsed`).

    - :meth:`training_loss` is −Ĵ(θ, ξ). ξ is a trainable :class:`~gpflow.Parameter`, so
      ``gpflow.optimizers.Scipy().minimize(model.training_loss, model.trainable_variables)``
      maximises Ĵ over θ and ξ together (the paper's vi-JJ-full).
    - :func:`gpflow_fastvi.fit` runs, by default, one persistent L-BFGS-B run over θ for the
      whole fit, each evaluation taking ``n_upd`` = 2 closed-form ξ steps from the sites of the
      last accepted iterate (``method="persistent"``, :mod:`gpflow_fastvi.training.persistent`),
      and the paper's algorithms by name (:attr:`training_routes`): ``"analytic"`` (vi-JJ:
      ``n_upd`` closed-form updates of ξ and q(u), then L-BFGS-B on θ for at most ``maxfun``
      evaluations, default 3 and 5), ``"full"`` (vi-JJ-full: L-BFGS-B on θ and ξ together,
      ``maxfun`` default 20 per outer iteration) and ``"hybrid"`` (vi-JJ-hybrid: closed-form
      updates, then L-BFGS-B on both).
    - :meth:`elbo` is the standard SVGP ELBO at the current q(u), ≥ Ĵ.
    - ``q_mu``, ``q_sqrt``, ``whiten``, ``inducing_variable``, ``num_data`` mean what they mean in
      :class:`gpflow.models.SVGP`, so predictions, ``print_summary``, posteriors and checkpoints
      carry over between the two classes.

    Labels may be {0, 1} (GPflow's convention, stored as such) or {−1, +1}.
    """

    training_routes = {
        "analytic": Route(
            "alternating",
            options={"n_upd": 3, "maxfun": 5},
            settings={"closed_form_sites": True, "sites_in_lbfgs": False},
            description="vi-JJ: closed-form ξ and q(u), then L-BFGS-B on θ",
        ),
        "full": Route(
            "alternating",
            options={"maxfun": 20},
            settings={"closed_form_sites": False, "sites_in_lbfgs": True},
            description="vi-JJ-full: L-BFGS-B on θ and ξ together",
        ),
        "hybrid": Route(
            "alternating",
            options={"n_upd": 3, "maxfun": 5},
            settings={"closed_form_sites": True, "sites_in_lbfgs": True},
            description="vi-JJ-hybrid: closed-form ξ and q(u), then L-BFGS-B on θ and ξ",
        ),
        "persistent": PERSISTENT_ROUTE,
    }
    default_route = "persistent"
    objective_is_bound = True

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
        :param data: ``(X, Y)``, X [N, D], Y [N, 1] with labels in {0, 1} or {−1, +1}.
        :param kernel: any GPflow kernel for a single latent function.
        :param inducing_variable: a GPflow inducing variable, an array Z [M, D] or an int M
            (k-means centres of X, as in the paper). Fixed unless ``train_inducing=True``.
        :param likelihood: must be ``gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)``, the
            default. For the probit link use :class:`~gpflow_fastvi.VITaylor`.
        :param batch_size: accumulate over batches of this many points (memory O(batch · M)).
        """
        if likelihood is None:
            likelihood = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        check_logit_bernoulli(likelihood, "VIJJ's Jaakkola–Jordan bound")
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
        # ξ optimal for the prior: ξ² = E_p[f²] = μ(x)² + k(x, x).
        xi = jj_optimal_xi(self.mean_function(X), self.kernel(X, full_cov=False)[:, None])
        self.xi = Parameter(xi, dtype=gpflow.config.default_float())

    @property
    def site_parameters(self) -> Tuple[Parameter, ...]:
        return (self.xi,)

    def site_rule(self, X: tf.Tensor, Y: tf.Tensor, xi: tf.Tensor) -> Sites:  # type: ignore[override]
        return jj_sites(signed_labels(Y), xi)

    def site_update(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        return (jj_optimal_xi(Fmu, Fvar),)
