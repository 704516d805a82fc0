"""VITaylor: sparse variational GP with Taylor sites, for any log-concave GPflow likelihood (vi-Taylor of Izmailov & Kropotov, 2017)."""

from typing import Callable, Optional, Tuple

import gpflow
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes

from ..exceptions import IncompatibleLikelihoodError
from ..gaussian import mixing
from ..likelihoods import log_density_ceiling, one_hot_of_checked_classes
from ..model_checks import check_log_concave, check_scalar_likelihood
from ..sites.taylor import mixed_derivatives, softmax_derivatives, taylor_sites
from ..types import Route, Sites
from .base import PERSISTENT_ROUTE, GaussianSitesModel
from .site_model import SITES, logit_log_prob


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

    Built as :class:`gpflow.models.SVGP` is, ``VITaylor(kernel, likelihood, Z, num_data=N)`` with
    the data per call, or holding its data, ``VITaylor(kernel, likelihood, Z, data=(X, Y))``; the
    likelihood defaults to ``Bernoulli(invlink=tf.sigmoid)``. ξ is not stored: it is read off
    q(u) (ξ = E_q[f]) in every pass.

    - :func:`gpflow_fastvi.fit` runs, by default, one persistent L-BFGS-B run over θ with ξ
      stepped in closed form between accepted iterates (``method="persistent"``), or the paper's
      vi-Taylor by name (``method="analytic"``: ``n_upd`` closed-form updates of ξ and q(u), then
      L-BFGS-B on θ at fixed ξ for at most ``maxfun`` evaluations, default 3 and 5). ξ is not a
      free parameter of a bound, so the 'full' and 'hybrid' schemes of VIJJ do not apply and ξ
      is never optimised numerically.
    - :meth:`training_loss` is −J̃ with ξ read off the stored q(u), and each evaluation stores the
      q(u) that is optimal for that ξ, so GPflow's optimisers on
      ``model.training_loss_closure((X, Y))`` move ξ with θ towards the fixed point ``fit``
      reaches. Their gradient holds ξ fixed, and J̃ is not stationary in ξ as a bound is in its
      variational parameters: where the sites go on moving under L-BFGS-B, its line searches
      can fail and ``gpflow.optimizers.Scipy`` stop short of that point (GPflow's mixed
      multi-output notebook ended 0.25 nats per point below SVGP's ELBO; a closure over mixed
      outputs says so once). ``fit`` starts L-BFGS-B again as the sites move, and reaches it.
    - ``q_mu``, ``q_sqrt``, ``whiten``, ``inducing_variable``, ``num_data`` mean what they mean in
      :class:`gpflow.models.SVGP`.

    **C classes.** ``VITaylor(kernel, gpflow.likelihoods.Softmax(C), Z, num_latent_gps=C)``, as
    GPflow's multi-class SVGP is built: one latent GP per class, one site per point and class from
    the diagonal of the softmax's Hessian, one q(u_c) per class stored as SVGP stores them, one
    projection of the data per pass shared by the classes. Labels are the classes
    {0, …, C − 1} of shape [N, 1]. The SVGP yardstick (:meth:`elbo`) is then a Monte Carlo
    estimate with fixed draws (:func:`~gpflow_fastvi.models.base.expected_log_softmax`).

    **Mixed outputs.** With GPflow's :class:`~gpflow.kernels.LinearCoregionalization` the P
    outputs are f = W g of L independent latent functions (Y [N, P], ``num_latent_gps=L``): the
    expansion is of the outputs' log-likelihood in the latent values, one site per point and
    latent function with the curvature that is exact for q(u) independent across them, as
    SVGP's is; the steps before the last go through a curvature that makes them converge
    whatever W's columns (:mod:`gpflow_fastvi.sites.taylor`). For a Gaussian likelihood the
    fixed point is SVGP's optimum for the mixed model.

    Bernoulli labels may be {0, 1} or {−1, +1} (stored as {0, 1}); Poisson targets must be
    non-negative integers. Likelihoods that are not log-concave (Student-t, Beta) are refused
    (:func:`~gpflow_fastvi.model_checks.check_log_concave`); where a log-concave one bends slightly
    upwards in floating point (GPflow's probit link far in its tails) the site curvature is clipped
    at 0 (see :mod:`gpflow_fastvi.sites.taylor`).
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
    _objective_is_bound = False
    _multi_class_likelihoods = (gpflow.likelihoods.Softmax,)
    _mixed_outputs = True

    @classmethod
    def _checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        Any :class:`gpflow.likelihoods.ScalarLikelihood` with a log-concave density, or
        :class:`gpflow.likelihoods.Softmax` of C classes (log-concave too) with C latent
        functions; default ``Bernoulli(invlink=tf.sigmoid)`` (the logit link, as in the paper).
        """
        if likelihood is None:
            return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        if isinstance(likelihood, cls._multi_class_likelihoods):
            return likelihood
        if isinstance(likelihood, gpflow.likelihoods.MultiClass):
            raise IncompatibleLikelihoodError(
                "VITaylor expands log p(y | f) to second order at a point, and MultiClass's "
                "RobustMax is flat almost everywhere: its derivatives there are 0. Use VIConcave, "
                "which takes MultiClass(C) (its sites come from GPflow's quadrature over q(f)), "
                "or VITaylor with gpflow.likelihoods.Softmax(C)."
            )
        check_scalar_likelihood(likelihood, "VITaylor")
        check_log_concave(likelihood, "VITaylor")
        return likelihood

    @check_shapes("X: [N, D]", "Y: [N, P]", "xi: [N, L]", *SITES)
    def _site_rule(self, X: tf.Tensor, Y: tf.Tensor, xi: tf.Tensor) -> Sites:
        """
        The second-order Taylor expansion of log p(yᵢ | fᵢ) at ξᵢ (:func:`taylor_sites`), its
        peak held at or below the likelihood's ceiling where one is known (0 for a discrete
        variable, :func:`~gpflow_fastvi.likelihoods.log_density_ceiling`), so that the collapsed
        objective never exceeds the ceiling of log p(y). For outputs mixed by W, the curvature in
        each latent function is the exact one for q(u) independent across them
        (:func:`~gpflow_fastvi.sites.taylor.mixed_derivatives`).
        """
        return self._taylor_sites(X, Y, xi, majorized=False)

    @check_shapes("X: [N, D]", "Y: [N, P]", "xi: [N, L]", *SITES)
    def _step_rule(self, X: tf.Tensor, Y: tf.Tensor, xi: tf.Tensor) -> Sites:
        """
        The sites of every step but the last: :meth:`_site_rule`'s, except for outputs mixed by
        W, where the curvature is the Hessian's absolute row sums, through which the steps
        converge to the same fixed point (:mod:`gpflow_fastvi.sites.taylor`).
        """
        return self._taylor_sites(X, Y, xi, majorized=True)

    def _taylor_sites(self, X: tf.Tensor, Y: tf.Tensor, xi: tf.Tensor, majorized: bool) -> Sites:
        """Taylor sites at ξ of the model's likelihood (:meth:`_site_rule`)."""
        log_density, derivatives = None, None
        ceiling = log_density_ceiling(self.likelihood)
        W = mixing(self.kernel)
        if isinstance(self.likelihood, gpflow.likelihoods.Softmax):
            # f_yᵢ − log Σ_c exp f_c, its derivatives in closed form; the labels were checked
            # where the data entered (DataPasses.training_data), outside the loops this runs in.
            own = one_hot_of_checked_classes(Y, self._latent_functions(self.likelihood), xi.dtype)
            derivatives = softmax_derivatives(own, xi)
        elif W is not None:  # Σₚ log p(yᵢₚ | fᵢₚ) of f = W g: each of the P outputs' ceiling
            derivatives = mixed_derivatives(self._log_density(X, Y), xi, W, majorized=majorized)
            ceiling = None if ceiling is None else ceiling * int(W.shape[0])
        else:
            log_density = self._log_density(X, Y)
        return taylor_sites(
            log_density,
            xi,
            ceiling=ceiling,
            name=type(self.likelihood).__name__,
            derivatives=derivatives,
        )

    def _log_density(self, X: tf.Tensor, Y: tf.Tensor) -> Callable[[tf.Tensor], tf.Tensor]:
        """
        F ↦ log p(y_ip | f_ip) [N, P] of a scalar likelihood, one per point and output,
        differentiated by :func:`taylor_sites`; for the logit Bernoulli in the stable form
        :func:`~gpflow_fastvi.models.base.logit_log_prob`, else by the likelihood's own
        elementwise log-density (GPflow's ``ScalarLikelihood._scalar_log_prob``, which its
        ``log_prob`` sums over the outputs).
        """
        if self._logit_bernoulli:
            return lambda F: logit_log_prob(F, Y)
        return lambda F: self.likelihood._scalar_log_prob(X, F, Y)

    def _closure_advice(self, all_the_data: bool) -> Optional[str]:
        """
        For outputs mixed by W, a closure over all the data warns that L-BFGS-B can stop short
        on it (the class docstring); otherwise as every model.
        """
        if all_the_data and mixing(self.kernel) is not None:
            return (
                "VITaylor's loss over outputs mixed by W has a gradient that holds its expansion "
                "points fixed, and L-BFGS-B (gpflow.optimizers.Scipy) can stop short on it (on "
                "GPflow's multi-output notebook 0.25 nats per point below SVGP's ELBO): train it "
                "with gpflow_fastvi.fit(model, data), which reaches SVGP's answer there."
            )
        return super()._closure_advice(all_the_data)

    @inherit_check_shapes
    def _optimal_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        """The expansion point ξ = E_q[f], the mean of q(f) (the variance plays no part)."""
        return (Fmu,)
