"""PolyaGammaSVGP: SVGP for logit classification with Pólya-Gamma sites and natural-gradient SVI (paper 004)."""

from typing import Any, Optional

import gpflow
import tensorflow as tf
from check_shapes import inherit_check_shapes
from gpflow.base import RegressionData

from ..exceptions import IncompatibleLikelihoodError
from ..gaussian import kmm_cholesky, sites_elbo, whitened_projection, whitened_q
from ..sites.polya_gamma import pg_optimal_c, pg_sites
from ..training.plans import TrainingPlan
from ..types import Sites
from ._checks import check_logit_bernoulli


def checked_signed_labels(Y: tf.Tensor) -> tf.Tensor:
    """
    Binary labels in {0, 1} or {−1, +1} as y ∈ {−1, +1}, with an in-graph check (mini-batches from
    a ``tf.data`` pipeline are never seen in NumPy) that raises naming the model's convention.
    """
    zero_one = tf.reduce_all((Y == 0.0) | (Y == 1.0))
    plus_minus = tf.reduce_all((Y == -1.0) | (Y == 1.0))
    check = tf.debugging.assert_equal(
        zero_one | plus_minus,
        True,
        message="PolyaGammaSVGP needs binary labels Y, either all in {0, 1} (GPflow's Bernoulli "
        "convention) or all in {-1, +1}",
    )
    with tf.control_dependencies([check]):
        return tf.where(Y == 1.0, tf.ones_like(Y), -tf.ones_like(Y))


class PolyaGammaSVGP(gpflow.models.SVGP):
    r"""
    :class:`gpflow.models.SVGP` for binary classification with the logit link, whose ELBO is in closed
    form through Pólya-Gamma augmentation (:cite:t:`wenzel2019efficient`), trained by stochastic
    variational inference with closed-form natural-gradient steps on q(u).

    The constructor, ``q_mu``, ``q_sqrt``, ``whiten``, ``num_data``, ``elbo(data)``,
    ``training_loss(data)``, ``training_loss_closure``, predictions and checkpoints are those of
    SVGP, so an SVGP script runs with the class name changed. What differs:

    - :meth:`elbo` is the Pólya-Gamma ELBO with the optimal q(ωᵢ) = PG(1, cᵢ) for each point, in
      closed form (no quadrature), every constant included:
      Σᵢ [−log 2 + yᵢ μᵢ/2 − E[ωᵢ] (μᵢ² + σᵢ²)/2 − KL(cᵢ)] − KL[q(u) ‖ p(u)], scaled by
      ``num_data``/batch size for a mini-batch as SVGP does. It equals the Jaakkola–Jordan bound
      with ξ = c (:mod:`gpflow_fastvi.sites.polya_gamma`), so it is a lower bound on log p(y) and
      lies below SVGP's own (quadrature) ELBO at the same q(u).
    - The fast way to train it is :func:`gpflow_fastvi.fit` (or
      :class:`gpflow_fastvi.NaturalGradientSVI` in your own loop): each mini-batch step sets the
      local cᵢ in closed form, takes a closed-form natural-gradient step on q(u) and an Adam step on
      the hyperparameters. ``q_mu`` and ``q_sqrt`` stay trainable, as in SVGP, so that a plain
      Adam or Scipy loop also works; the natural-gradient trainer leaves them out of Adam.

    Labels may be {0, 1} (GPflow's convention) or {−1, +1}.
    """

    def __init__(
        self,
        kernel: gpflow.kernels.Kernel,
        likelihood: gpflow.likelihoods.Likelihood,
        inducing_variable: Any,
        *,
        mean_function: Optional[gpflow.mean_functions.MeanFunction] = None,
        num_latent_gps: int = 1,
        q_diag: bool = False,
        q_mu: Optional[tf.Tensor] = None,
        q_sqrt: Optional[tf.Tensor] = None,
        whiten: bool = True,
        num_data: Optional[int] = None,
    ):
        """
        Arguments as for :class:`gpflow.models.SVGP`, with these restrictions:

        :param likelihood: must be ``gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)``.
        :param num_latent_gps: must be 1 (binary classification).
        :param q_diag: must be ``False``: the natural-gradient step produces a full covariance.
        :param num_data: the number of training points, needed to scale mini-batch ELBOs.
        """
        check_logit_bernoulli(likelihood, "PolyaGammaSVGP's Pólya-Gamma augmentation")
        if num_latent_gps != 1:
            raise IncompatibleLikelihoodError(
                f"PolyaGammaSVGP is for binary classification with one latent GP; got "
                f"num_latent_gps={num_latent_gps}."
            )
        if q_diag:
            raise ValueError(
                "PolyaGammaSVGP needs q_diag=False: its closed-form natural-gradient step gives q(u) "
                "a full covariance."
            )
        super().__init__(
            kernel,
            likelihood,
            inducing_variable,
            mean_function=mean_function,
            num_latent_gps=1,
            q_diag=False,
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            whiten=whiten,
            num_data=num_data,
        )

    # ----------------------------------------------------------------------------------------------
    # The site rule: Pólya-Gamma sites with c optimal for the current q(f).

    def local_sites(self, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """Sites of points with labels Y whose local q(ωᵢ) = PG(1, cᵢ) is optimal for q(f) = N(Fmu, Fvar)."""
        return pg_sites(checked_signed_labels(Y), pg_optimal_c(Fmu, Fvar))

    def local_c(self, X: tf.Tensor) -> tf.Tensor:
        """The optimal Pólya-Gamma parameters cᵢ = √(E_q[fᵢ²]) at inputs X [N, D] for the current q(u)."""
        Fmu, Fvar = self.predict_f(X)
        return pg_optimal_c(Fmu, Fvar)

    def Kmm_cholesky(self) -> tf.Tensor:
        """L = chol(Kmm + jitter), with jitter that escalates if needed."""
        return kmm_cholesky(self.kernel, self.inducing_variable)

    def data_scale(self, X: tf.Tensor) -> tf.Tensor:
        """num_data / batch size, or 1 when ``num_data`` is ``None`` (as in SVGP)."""
        dtype = gpflow.config.default_float()
        if self.num_data is None:
            return tf.constant(1.0, dtype=dtype)
        return tf.cast(self.num_data, dtype) / tf.cast(tf.shape(X)[0], dtype)

    def elbo_from_projection(
        self,
        L: tf.Tensor,
        A: tf.Tensor,
        Knn_diag: tf.Tensor,
        X: tf.Tensor,
        Y: tf.Tensor,
        q_mu: tf.Tensor,
        q_sqrt: tf.Tensor,
    ) -> tf.Tensor:
        """The closed-form ELBO of :meth:`elbo` for a batch already projected (A = L⁻¹ Kmn)."""
        m, R = whitened_q(q_mu, q_sqrt, L, self.whiten)
        return sites_elbo(
            A,
            Knn_diag,
            self.mean_function(X),
            m,
            R,
            lambda Fmu, Fvar: self.local_sites(Y, Fmu, Fvar),
            self.data_scale(X),
        )

    @inherit_check_shapes
    def elbo(self, data: RegressionData) -> tf.Tensor:
        """
        The Pólya-Gamma ELBO in closed form, at the optimal q(ω) for the current q(u); see the class
        docstring. For a mini-batch, an unbiased estimate of the full-data value.
        """
        X, Y = data
        L = self.Kmm_cholesky()
        A, Knn_diag = whitened_projection(self.kernel, self.inducing_variable, X, L)
        return self.elbo_from_projection(L, A, Knn_diag, X, Y, self.q_mu, self.q_sqrt)

    def training_plan(
        self, data: Any, *, method: Optional[str] = None, **svi_options: Any
    ) -> TrainingPlan:
        """
        What :func:`gpflow_fastvi.fit` runs: natural-gradient SVI
        (:func:`gpflow_fastvi.training.svi.svi_plan`, where ``svi_options`` are described).
        """
        from ..training.svi import svi_plan

        if method not in (None, "svi"):
            raise ValueError(f"PolyaGammaSVGP is trained by method='svi' only; got {method!r}.")
        return svi_plan(self, data, **svi_options)
