"""
:class:`SitePredictions`: what q(u) says at given points — predictions as
:class:`gpflow.models.SVGP` makes them (through training's factorisation of Kmm), the site
precisions that weight greedy inducing-input selection, and q(u) carried to new inducing inputs.
"""

from typing import Any, Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.base import InputData, MeanAndVariance, RegressionData

from ..exceptions import InvalidDataError
from ..gaussian import WhitenedQ, marginal_covariance, marginals, robust_cholesky, stored_q
from ..validation import checked_inputs, inducing_inputs
from .q_frame import QStorage


def only_marginals(full_cov: bool, full_output_cov: bool, method: str) -> None:
    """The error GPflow gives where ``method`` is asked for more than the marginals."""
    if full_cov or full_output_cov:
        raise NotImplementedError(
            f"{method} supports only full_cov=False and full_output_cov=False, as in GPflow."
        )


class SitePredictions(QStorage):
    """Predictions, site precisions and inducing-input moves, the same for every model."""

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
        Xnew = checked_inputs(Xnew, self.inducing_variable)
        return self.predict_f_at(Xnew, full_cov, full_output_cov)

    def predict_f_at(
        self, Xnew: tf.Tensor, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """
        :meth:`predict_f` at inputs already checked (training data, test data): the hook a model
        whose latent function differs from f̄ overrides (:class:`~gpflow_fastvi.KLCorrected`).
        """
        L = self.Kmm_cholesky()
        q = self.whitened(self.q_mu, self.q_sqrt, L)
        projection = self.projection(Xnew, L)
        Gmu, var = marginals(projection.A, projection.Ktilde_diag, q)  # [N, L] each
        mean = Gmu + self.mean_function(Xnew)
        if full_cov:
            Knn = self.kernel(Xnew, full_cov=True)
            cov = marginal_covariance(projection.A, Knn, q.R)  # [L, N, N]
            if not full_output_cov:
                return mean, cov
            # Independent latent functions: [N, L, N, L], zero between two of them.
            eye = tf.eye(self.num_latent_gps, dtype=cov.dtype)
            return mean, tf.einsum("lnm,lk->nlmk", cov, eye)
        return mean, (tf.linalg.diag(var) if full_output_cov else var)  # [N, L, L] or [N, L]

    def predict_y(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """The mean and variance of y at ``Xnew``, as GPflow gives them; ``Xnew`` checked as in :meth:`predict_f`."""
        only_marginals(full_cov, full_output_cov, "predict_y")
        Xnew = checked_inputs(Xnew, self.inducing_variable)
        f_mean, f_var = self.predict_f_at(Xnew)
        return self.likelihood.predict_mean_and_var(Xnew, f_mean, f_var)

    def predict_log_density(
        self, data: RegressionData, full_cov: bool = False, full_output_cov: bool = False
    ) -> tf.Tensor:
        """
        log ∫ p(y* | f*) q(f*) df* at test points, as GPflow gives it; the points are checked as
        training data are (:meth:`checked_data`: labels outside the likelihood's support are an
        error, not a score).
        """
        only_marginals(full_cov, full_output_cov, "predict_log_density")
        X, Y = self.checked_data(data)
        f_mean, f_var = self.predict_f_at(X)
        return self.likelihood.predict_log_density(X, f_mean, f_var, self.likelihood_targets(Y))

    def likelihood_targets(self, Y: tf.Tensor) -> tf.Tensor:
        """Checked targets Y (floats) as the likelihood's own methods take them: integer classes
        for GPflow's :class:`~gpflow.likelihoods.Softmax`, whose kernel refuses floats."""
        if isinstance(self.likelihood, gpflow.likelihoods.Softmax):
            return tf.cast(Y, tf.int64)
        return Y

    # ----------------------------------------------------------------------------------------------
    # Where the inducing inputs are: greedy selection weighted by the sites, and moving them.

    def site_precisions(self, data: Optional[RegressionData] = None) -> np.ndarray:
        """
        The site precisions wᵢ [N] of the points ``data`` = (X, Y) (default: the data the model
        holds) at the current q(u), summed over the latent functions: how firmly each point's
        likelihood pins f there. They weight
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
        Fmu, Fvar = self.predict_f_at(X)
        return tf.reduce_sum(self.local_sites(X, Y, Fmu, Fvar).w, axis=1).numpy()

    def move_inducing_inputs(self, Z: Any) -> None:
        """
        Put the inducing inputs at ``Z`` [M, D] (as many as now) and q(u) at the current posterior
        of f there, q(f(Z)), for each latent function: the model keeps what it has learnt, as far
        as the new inputs can carry it, and a closed-form step starts from there.
        """
        Z_old = self.inducing_variable.Z
        Z = tf.constant(inducing_inputs(Z), dtype=Z_old.dtype)
        if Z.shape != Z_old.shape:
            raise InvalidDataError(
                f"Moving the inducing inputs keeps their number and columns, {list(Z_old.shape)}; "
                f"got {list(Z.shape)}."
            )
        L = self.Kmm_cholesky()
        q = self.whitened(self.q_mu, self.q_sqrt, L)
        projection = self.projection(Z, L)
        Gmu, _ = marginals(projection.A, projection.Ktilde_diag, q)  # [M, L]
        covariance = marginal_covariance(projection.A, self.kernel(Z), q.R)  # [L, M, M]
        self.inducing_variable.Z.assign(Z)
        L = self.Kmm_cholesky()
        m = tf.linalg.triangular_solve(L, Gmu, lower=True)
        LinvS = tf.linalg.triangular_solve(L, covariance, lower=True)
        S = tf.linalg.triangular_solve(L, tf.linalg.matrix_transpose(LinvS), lower=True)
        S = 0.5 * (S + tf.linalg.matrix_transpose(S))  # L⁻¹ Σ_l L⁻ᵀ, symmetric to rounding
        R = robust_cholesky(S, what="q(u) at the new inducing inputs")
        self.store_q(*stored_q(WhitenedQ(m=m, R=R), L, self.whiten))
