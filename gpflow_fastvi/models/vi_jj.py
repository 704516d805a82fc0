"""VIJJ: sparse GP logit classification with Jaakkola–Jordan sites (paper 000, vi-JJ)."""

from typing import Optional, Tuple

import gpflow
import tensorflow as tf
from gpflow.base import Parameter, RegressionData

from ..inducing import InducingSpec
from ..sites._labels import signed_labels
from ..sites.jaakkola_jordan import jj_optimal_xi, jj_sites
from ..training.plans import TrainingPlan, alternating_plan
from ..types import Sites
from ._checks import check_logit_bernoulli
from .base import GaussianSitesModel


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
    - :func:`gpflow_fastvi.fit` runs the paper's algorithms: ``method="analytic"`` (vi-JJ, the
      default: closed-form updates of ξ and q(u), then a few L-BFGS-B steps on θ), ``"full"``
      (vi-JJ-full) or ``"hybrid"`` (vi-JJ-hybrid).
    - :meth:`elbo` is the standard SVGP ELBO at the current q(u), ≥ Ĵ.
    - ``q_mu``, ``q_sqrt``, ``whiten``, ``inducing_variable``, ``num_data`` mean what they mean in
      :class:`gpflow.models.SVGP`, so predictions, ``print_summary``, posteriors and checkpoints
      carry over between the two classes.

    Labels may be {0, 1} (GPflow's convention, stored as such) or {−1, +1}.
    """

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

    def training_plan(
        self,
        data: None = None,
        *,
        method: Optional[str] = None,
        n_upd: int = 3,
        maxfun: Optional[int] = None,
    ) -> TrainingPlan:
        """
        The outer iteration :func:`gpflow_fastvi.fit` repeats.

        :param method: ``"analytic"`` (vi-JJ, default): ``n_upd`` closed-form updates of ξ and q(u),
            then L-BFGS-B on the hyperparameters for at most ``maxfun`` evaluations (default 5);
            ``"full"`` (vi-JJ-full): L-BFGS-B on hyperparameters and ξ together (default 20
            evaluations per outer iteration); ``"hybrid"`` (vi-JJ-hybrid): closed-form updates, then
            L-BFGS-B on both (default 5).
        """
        if data is not None:
            raise ValueError(
                "VIJJ holds its training data (given to the constructor); call fit(model) without data."
            )
        return alternating_plan(
            self,
            method=method or "analytic",
            n_upd=n_upd,
            maxfun=maxfun,
            site_variables=[self.xi.unconstrained_variable],
        )
