"""VIJJ: sparse GP logit classification with Jaakkola–Jordan sites (vi-JJ of Izmailov & Kropotov, 2017)."""

from typing import Optional, Tuple

import gpflow
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes

from ..model_checks import check_logit_bernoulli
from ..sites.jaakkola_jordan import jj_optimal_xi, jj_sites
from ..types import Route, Sites
from ..validation import signed_labels
from .base import PERSISTENT_ROUTE, GaussianSitesModel
from .site_model import SITES


class VIJJ(GaussianSitesModel):
    r"""
    Sparse variational GP classification with the logistic link, trained through the
    Jaakkola–Jordan lower bound (:cite:t:`izmailov2017faster`, "vi-JJ").

    Each log σ(yᵢ fᵢ) is bounded below by the Gaussian site
    log σ(ξᵢ) + (yᵢ fᵢ − ξᵢ)/2 − λ(ξᵢ)(fᵢ² − ξᵢ²), λ(ξ) = tanh(ξ/2)/(4ξ)
    (:mod:`gpflow_fastvi.sites.jaakkola_jordan`). For fixed ξ the optimal q(u) is closed form, and the
    collapsed bound Ĵ(θ, ξ) is a **lower bound** on log p(y) that depends on the hyperparameters θ
    and the n values ξ only (:mod:`gpflow_fastvi.gaussian.collapsed`).

    Built as :class:`gpflow.models.SVGP` is, ``VIJJ(kernel, likelihood, Z, num_data=N)`` with the
    data per call, or holding its data, ``VIJJ(kernel, likelihood, Z, data=(X, Y))`` (Z may then be an int M for
    k-means centres); the likelihood defaults to ``Bernoulli(invlink=tf.sigmoid)``. ξ is not
    stored: it is read off q(u) (ξ² = E_q[f²]) in every pass.

    - :func:`gpflow_fastvi.fit` runs, by default, one persistent L-BFGS-B run over θ for the
      whole fit, each evaluation taking ``n_upd`` = 3 closed-form ξ steps from the sites of the
      last accepted iterate (``method="persistent"``, :mod:`gpflow_fastvi.training.persistent`),
      and the paper's algorithms by name (:attr:`training_routes`): ``"analytic"`` (vi-JJ:
      ``n_upd`` closed-form updates of ξ and q(u), then L-BFGS-B on θ at fixed ξ for at most
      ``maxfun`` evaluations, default 3 and 5), ``"full"`` (vi-JJ-full: L-BFGS-B on θ and ξ
      together, ``maxfun`` default 20 per outer iteration; ξ lives for the run) and ``"hybrid"``
      (vi-JJ-hybrid: closed-form updates, then L-BFGS-B on both).
    - :meth:`training_loss` is −Ĵ(θ, ξ) with ξ read off the stored q(u), and each evaluation stores
      the q(u) that is optimal for that ξ, so GPflow's optimisers on
      ``model.training_loss_closure((X, Y))`` move ξ with θ.
    - :meth:`elbo` is the standard SVGP ELBO at the current q(u), ≥ Ĵ.
    - ``q_mu``, ``q_sqrt``, ``whiten``, ``inducing_variable``, ``num_data`` mean what they mean in
      :class:`gpflow.models.SVGP`, so predictions, ``print_summary``, posteriors and checkpoints
      carry over between the two classes.

    Labels may be {0, 1} (GPflow's convention, stored as such) or {−1, +1}. With
    ``num_latent_gps=L`` the targets are L binary outputs, Y [N, L], one latent function and one
    column of sites each, sharing the kernel and Z, as SVGP takes them (multi-label
    classification).
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
    _objective_is_bound = True

    @classmethod
    def _checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        ``gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)``, the default (the Jaakkola–Jordan bound
        is for the logit link; for the probit link use :class:`~gpflow_fastvi.VITaylor`).
        """
        if likelihood is None:
            return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        check_logit_bernoulli(likelihood, "VIJJ's Jaakkola–Jordan bound")
        return likelihood

    @inherit_check_shapes
    def _optimal_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        """ξ optimal for q(f) = N(Fmu, Fvar): ξ² = E_q[f²] (:func:`jj_optimal_xi`)."""
        return (jj_optimal_xi(Fmu, Fvar),)

    @check_shapes("X: [N, D]", "Y: [N, P]", "xi: [N, L]", *SITES)
    def _site_rule(self, X: tf.Tensor, Y: tf.Tensor, xi: tf.Tensor) -> Sites:
        """The Jaakkola–Jordan sites of points with labels Y at ξ (:func:`jj_sites`)."""
        return jj_sites(signed_labels(Y), xi)
