"""KLCorrected: GP classification by PPA with the KL-corrected bound of King & Lawrence (2006)."""

from typing import Any, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import MeanAndVariance, Parameter, RegressionData
from gpflow.utilities import positive

from ..inducing import InducingSpec
from ..model_checks import check_log_concave, check_scalar_likelihood, data_first_arguments
from ..sites.ppa import (
    LogNormaliser,
    local_terms,
    newton_sites,
    ppa_sites,
    tilted_evidence,
    tilted_log_normaliser,
    tilted_moments,
)
from ..types import Route, Sites, SteppedSites
from ..validation import OneOf
from .base import PERSISTENT_ROUTE, GaussianSitesModel
from .site_model import SITES, logit_log_prob

BOUNDS = ("kl_corrected", "standard")
E_STEPS = ("newton", "coordinate")

PPA_SITE_PARAMETERS = (
    "X: [N, D]",
    "Y: [N, L]",
    "f_mean: [N, L]",
    "f_var: [N, L]",
    "f_evidence: [N, L]",
    "cavity_mean: [N, L]",
)
"""The local parameters of a PPA site: the tilted q(fₙ)'s moments and evidence term, and the
cavity mean it was read at."""


class KLCorrected(GaussianSitesModel):
    r"""
    GP classification (or any log-concave scalar likelihood) by probabilistic point assimilation
    (PPA), trained with the KL-corrected bound of :cite:t:`king2006fast` or, for comparison, the
    standard variational bound.

    **The model.** The GP prior is on f̄; the likelihood sees fₙ = f̄ₙ + εₙ with εₙ ~ N(0, β⁻¹), so
    f ~ GP(μ, k + β⁻¹δ). The posterior is approximated by q(f̄) ∏ₙ q(fₙ), and both factors have
    closed-form updates (the E-step, :meth:`update_sites`; by default a Newton step on the mean
    of q(f̄) with the paper's fixed point, see :meth:`_step_rule`): q(fₙ) ∝ p(yₙ | fₙ) N(fₙ | ⟨f̄ₙ⟩, β⁻¹),
    whose moments come from derivatives of log Zₙ (closed form for GPflow's probit ``Bernoulli()``
    and ``Gaussian``, Gauss–Hermite quadrature for any other likelihood, :meth:`_log_normaliser`),
    one per point and output for L outputs; and q(f̄) is GP regression on the
    pseudo-targets ⟨fₙ⟩ with noise β⁻¹, i.e. Gaussian sites b = β⟨fₙ⟩, w = β whose constants carry
    the rest of the bound (:mod:`gpflow_fastvi.sites.ppa`), through the shared algebra of
    :mod:`gpflow_fastvi.gaussian` like every other model.

    **The bounds** (both ≤ log p(y); they differ in how the hyperparameters θ = (kernel, β) are
    fitted with q held fixed, the paper's M-step; β only with ``train_beta=True``):

    - ``bound="kl_corrected"`` (default, paper eqs. 9–10): log N(⟨f⟩ | μ(X), K + β⁻¹I) + terms
      free of the kernel. q(f̄) drops out: it is re-optimised for every θ, so the objective for θ
      is a GP marginal likelihood on the pseudo-targets.
    - ``bound="standard"`` (paper eq. 3): E_q[log N(⟨f⟩ | f̄, β⁻¹)] − KL[q(f̄) ‖ p(f̄)] + the same
      terms, at the stored q(f̄). It equals the corrected bound right after an E-step and is below
      it everywhere else, by KL[q(f̄) ‖ p(f̄ | ⟨f⟩)].

    **Two forms.** Built as SVGP is, ``KLCorrected(kernel, likelihood, Z, num_data=N)``, with the
    data per call, or holding its data, ``KLCorrected(kernel, likelihood, data=(X, Y))``. Holding
    its data and without ``inducing_variable`` the model is the full GP of the paper, like
    :class:`gpflow.models.VGP`: q(f̄) is over f̄(X), and each E-step costs O(N³);
    the KL-corrected bound is then exactly the marginal likelihood of :class:`gpflow.models.GPR`
    on the pseudo-targets. With an ``inducing_variable`` (Z [M, D], an int M for k-means centres,
    or a GPflow inducing variable) q(f̄) is through u = f̄(Z) as in :class:`gpflow.models.SVGP`,
    each E-step costs O(N M²), and the KL-corrected bound is Titsias' collapsed bound on the
    pseudo-targets, the objective of :class:`gpflow.models.SGPR`; the standard bound is the SVGP
    ELBO of the same pseudo-data. The full form *is* the sparse form with Z = X: one code path.

    **Use.** q(fₙ) is not stored: it is read off q(f̄) (its cavity mean) in every pass, and a call
    of :meth:`update_sites` with k steps is one such read, a coordinate step, then k − 1 E-steps.
    :func:`gpflow_fastvi.fit` runs, by default, one persistent L-BFGS-B run over the
    hyperparameters on the KL-corrected bound, each evaluation taking two closed-form E-steps from
    the q(f̄) of the last accepted iterate (``method="persistent"``,
    :mod:`gpflow_fastvi.training.persistent`, as for :class:`~gpflow_fastvi.VIJJ`): the E-step
    makes the bound's maximum over q(fₙ) and q(f̄) its value, so with q(fₙ) held fixed its gradient
    is that of the maximised bound. ``method="em"`` is the paper's Algorithm 1 (the model's
    E-step, the paper's own with ``e_step="coordinate"``; L-BFGS-B on the trainable
    hyperparameters for at most ``maxfun`` evaluations, default 10; until the bound stops
    changing), one row of the trace per EM iteration, each recorded after the E-step,
    where the two bounds coincide, so that the two choices can be compared row for row; it is the
    route for ``bound="standard"``, which the persistent route refuses, and ``fit`` takes it for
    that bound by default.
    :meth:`training_loss` takes E-steps and returns −(chosen bound), so GPflow's optimisers end
    where ``fit`` does.

    **Predictions.** The GP is f̄, and ε belongs to the observation model: the likelihood of f̄
    is p(y | f̄) = ∫ p(y | f̄ + ε) N(ε | 0, β⁻¹) dε. So :meth:`predict_f` is the predictive of f̄,
    as :meth:`posterior`'s and as an SVGP's at the same q(f̄) (a checkpoint restored into
    :class:`gpflow.models.SVGP` predicts the same f), and :meth:`predict_y` and
    :meth:`predict_log_density`, the model's predictive, integrate the likelihood over
    f = f̄ + ε, whose variance is larger by β⁻¹. :meth:`elbo` is the SVGP yardstick
    E_q(f̄)[log p(y | f̄)] − KL[q(f̄) ‖ p(f̄)] at the stored q(f̄), with ε integrated out.

    ``q_mu`` and ``q_sqrt`` hold q(f̄(Z)) whitened by default, as SVGP's do, so that a checkpoint
    restores into an SVGP built with SVGP's defaults. The paper's M-step (the ``"em"`` route)
    holds q(f̄(Z)) itself fixed while θ moves: build with ``whiten=False`` for exactly that; with
    the default it holds the whitened q fixed. The default route takes closed-form steps at every
    trial θ, so the frame changes only where it starts: like every model it starts from
    q(u) = N(0, I), SVGP's initial value (the prior of u when whitened); :meth:`update_sites`
    (or ``fit``) sets it.
    """

    training_routes = {
        "em": Route(
            "alternating",
            options={"maxfun": 10},
            settings={
                "closed_form_sites": True,
                "sites_in_lbfgs": False,
                "n_upd": 1,
                "max_iter": 10_000,
            },
            description="King & Lawrence's Algorithm 1: E-step, then L-BFGS-B on θ",
        ),
        "persistent": PERSISTENT_ROUTE,
    }
    default_route = "persistent"
    _mini_batch_closure_advice = (
        "KLCorrected's mini-batch closure ends short of fit's answer under Adam: train it with "
        "gpflow_fastvi.fit(model, data), which also streams a tf.data.Dataset."
    )
    _objective_is_bound = True

    bound = OneOf(BOUNDS, 'The bound the M-step maximises: ``"kl_corrected"`` or ``"standard"``.')
    e_step = OneOf(
        E_STEPS,
        'How a closed-form E-step moves q(fₙ): ``"newton"`` or ``"coordinate"`` '
        "(:meth:`_step_rule`).",
    )

    _num_gauss_hermite_points: int = 20
    """Nodes of GPflow's Gauss–Hermite rule for the expectation over q(f̄ₙ) in :meth:`elbo`."""

    def __init__(
        self,
        kernel: gpflow.kernels.Kernel,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        inducing_variable: Optional[InducingSpec] = None,
        *,
        bound: str = "kl_corrected",
        e_step: str = "newton",
        beta: float = 1.0,
        train_beta: bool = False,
        mean_function: Optional[gpflow.mean_functions.MeanFunction] = None,
        num_latent_gps: int = 1,
        q_diag: bool = False,
        q_mu: Optional[Any] = None,
        q_sqrt: Optional[Any] = None,
        whiten: bool = True,
        num_data: Optional[int] = None,
        data: Optional[RegressionData] = None,
        train_inducing: Optional[bool] = None,
        batch_size: Optional[int] = None,
        kmeans_seed: int = 0,
    ):
        """
        Arguments as for :class:`~gpflow_fastvi.models.base.GaussianSitesModel` (SVGP's, and
        ``data`` for the data-holding form ``KLCorrected(kernel, likelihood, data=(X, Y))``), and:

        :param likelihood: any log-concave :class:`gpflow.likelihoods.ScalarLikelihood`; default GPflow's
            ``Bernoulli()``, the probit link of the paper. Binary labels may be {0, 1} or {−1, +1}.
        :param inducing_variable: with ``data``, ``None`` (default) for the full GP; else a GPflow
            inducing variable, an array Z [M, D] or (with ``data``) an int M (k-means centres of X).
        :param bound: ``"kl_corrected"`` (default) or ``"standard"``; see the class docstring.
        :param e_step: ``"newton"`` (default) or ``"coordinate"``, how a closed-form E-step moves
            q(fₙ); both have the same fixed point, the E-step of the paper. See
            :meth:`_step_rule`.
        :param beta: the precision β > 0 of f around f̄ (default 1).
        :param train_beta: optimise β in the M-step with the kernel hyperparameters. Off by default,
            as in the paper's code: for the probit likelihood p(y | f̄) depends on the kernel
            variance and β only through K / (1 + β⁻¹), so the two are not identifiable, and the
            bounds creep along that ridge (β → 0, variance → ∞) for thousands of EM iterations.
        :param whiten: store q(f̄(Z)) whitened by chol(Kmm), SVGP's default; ``False`` for the
            paper's M-step, which holds q(f̄(Z)) itself fixed (see the class docstring).
        """
        kernel, likelihood, inducing_variable, data = data_first_arguments(
            type(self).__name__, kernel, likelihood, inducing_variable, data
        )
        if inducing_variable is None and (train_inducing or batch_size is not None):
            raise ValueError(
                "train_inducing and batch_size need inducing points: the full form "
                "(inducing_variable=None) works with the whole N × N kernel matrix of the inputs."
            )
        if not (np.ndim(beta) == 0 and np.isfinite(beta) and beta > 0):
            raise ValueError(f"beta must be a positive finite number; got {beta!r}.")
        super().__init__(
            kernel,
            likelihood,
            inducing_variable,
            mean_function=mean_function,
            num_latent_gps=num_latent_gps,
            q_diag=q_diag,
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            whiten=whiten,
            num_data=num_data,
            data=data,
            train_inducing=train_inducing,
            batch_size=batch_size,
            kmeans_seed=kmeans_seed,
        )
        self.bound = bound
        self.e_step = e_step
        self.beta = Parameter(
            float(beta),
            transform=positive(),
            dtype=gpflow.config.default_float(),
            trainable=train_beta,
        )

    @classmethod
    def _checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        Any log-concave :class:`gpflow.likelihoods.ScalarLikelihood`
        (:func:`~gpflow_fastvi.model_checks.check_log_concave`); default ``Bernoulli()`` (probit).
        """
        if likelihood is None:
            return gpflow.likelihoods.Bernoulli()
        check_scalar_likelihood(likelihood, "KLCorrected")
        check_log_concave(likelihood, "KLCorrected")
        return likelihood

    # ----------------------------------------------------------------------------------------------
    # Configuration.

    def _default_method(self) -> str:
        """
        The route ``fit`` takes without ``method``: ``"persistent"`` for the KL-corrected bound,
        ``"em"`` for the standard bound, which only EM can train (its M-step holds q(f̄) fixed).
        """
        return "em" if self.bound == "standard" else self.default_route

    # ----------------------------------------------------------------------------------------------
    # The PPA site rule.

    @check_shapes(*PPA_SITE_PARAMETERS, *SITES)
    def _site_rule(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        f_mean: tf.Tensor,
        f_var: tf.Tensor,
        f_evidence: tf.Tensor,
        cavity_mean: tf.Tensor,
    ) -> Sites:
        """
        The PPA sites of the stored q(fₙ) (:func:`~gpflow_fastvi.sites.ppa.ppa_sites`), which
        hold q(fₙ) fixed. Their gradient in the likelihood's own parameters φ is that of the bound
        maximised over q(fₙ) (the envelope theorem), E_q(fₙ)[∂φ log p(yₙ | fₙ)] = ∂φ log Zₙ at the
        held cavity mean: a term of zero value, added where the likelihood has trainable ones.
        """
        beta = tf.convert_to_tensor(self.beta)
        sites = ppa_sites(f_mean, f_var, f_evidence, beta)
        if not self.likelihood.trainable_variables:
            return sites
        held_beta, held_mean = tf.stop_gradient(beta), tf.stop_gradient(cavity_mean)
        log_Z = self._log_normaliser(X, Y, held_beta)(held_mean)
        return sites._replace(a=sites.a + (log_Z - tf.stop_gradient(log_Z)))

    @check_shapes(*PPA_SITE_PARAMETERS, *SITES)
    def _step_rule(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        f_mean: tf.Tensor,
        f_var: tf.Tensor,
        f_evidence: tf.Tensor,
        cavity_mean: tf.Tensor,
    ) -> Sites:
        r"""
        The sites of one E-step. Maximised over q(fₙ), the bound is a function of the mean m̄ of
        q(f̄) alone, Σₙ log Zₙ(m̄ₙ) + log p(f̄ = m̄) up to terms free of m̄ (:mod:`~gpflow_fastvi.sites.ppa`),
        and each E-step moves m̄ towards its maximiser:

        - ``e_step="newton"``: the Taylor sites of log Zₙ at the cavity mean cₙ of the stored
          q(fₙ), w = −∂² log Zₙ, read off its moments (:func:`~gpflow_fastvi.sites.ppa.newton_sites`),
          so the step is Newton's method on that concave function, and converges in a few steps;
        - ``e_step="coordinate"``: the PPA sites themselves (w = β), the paper's coordinate
          ascent on q(f̄) and q(fₙ). β bounds −∂² log Zₙ, so this is Newton's method with the
          curvature replaced by its bound: it never lowers the bound, and needs hundreds of steps
          where points are confidently classified, as −∂² log Zₙ ≪ β there.
        """
        if self.e_step == "coordinate":
            return self._site_rule(X, Y, f_mean, f_var, f_evidence, cavity_mean)
        beta = tf.convert_to_tensor(self.beta)
        return newton_sites(f_mean, f_var, f_evidence, cavity_mean, beta)

    def _log_normaliser(
        self, X: Optional[tf.Tensor], Y: tf.Tensor, beta: Optional[tf.Tensor] = None
    ) -> LogNormaliser:
        """
        μ ↦ log Zₙₗ(μₙₗ) = log ∫ p(yₙₗ | f) N(f | μₙₗ, β⁻¹) df [N, L], the likelihood's predictive
        density of each point and output (β the model's unless given): GPflow's closed form for
        the ``Gaussian`` and the probit ``Bernoulli``; for the logit Bernoulli, Gauss–Hermite
        quadrature in log space on the stable log σ(y f) (GPflow's takes the log of 1 − Zₙ,
        which rounds to log 0 for a confident point); for any other likelihood, quadrature
        centred on the tilted distribution
        (:func:`~gpflow_fastvi.sites.ppa.tilted_log_normaliser`), as a count far from the cavity
        mean falls between the points of a rule centred on the cavity. GPflow's forms sum over
        the outputs, so they are evaluated on the outputs' values as rows, [N·L, 1].
        """
        beta = tf.convert_to_tensor(self.beta) if beta is None else beta
        likelihood = self.likelihood
        closed = isinstance(likelihood, (gpflow.likelihoods.Gaussian, gpflow.likelihoods.Bernoulli))
        if not closed:
            return tilted_log_normaliser(lambda F: likelihood._scalar_log_prob(X, F, Y), beta)
        outputs = tf.shape(Y)[-1]  # a tensor: a graph traced for any shape has no static L
        X_rows = None if X is None else tf.repeat(X, outputs, axis=0)  # row n·L + l: point n
        Y_rows = tf.reshape(Y, [-1, 1])

        def log_Z(cavity_mean: tf.Tensor) -> tf.Tensor:
            mu = tf.reshape(cavity_mean, [-1, 1])
            var = tf.ones_like(mu) / beta
            if self._logit_bernoulli:
                rows = likelihood.quadrature.logspace(logit_log_prob, mu, var, Y=Y_rows)[:, 0]
            else:
                rows = likelihood.predict_log_density(X_rows, mu, var, Y_rows)
            return tf.reshape(rows, tf.shape(cavity_mean))

        return log_Z

    @inherit_check_shapes
    def _optimal_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        """
        The tilted q(fₙ) for q(f̄ₙ) = N(Fmu, Fvar): only the mean enters (the cavity is
        N(Fmu, β⁻¹)). Returns its moments, its evidence term and the cavity mean Fmu.
        """
        beta = tf.convert_to_tensor(self.beta)
        name = type(self.likelihood).__name__
        log_Z, f_mean, f_var = tilted_moments(self._log_normaliser(X, Y), Fmu, beta, name=name)
        return f_mean, f_var, tilted_evidence(log_Z, Fmu, f_mean, f_var, beta), Fmu

    def _local_bound_terms(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> tf.Tensor:
        """
        Σₙ E_q[log p(yₙ | fₙ)] + H[q(fₙ)] − β Var[fₙ]/2 at the q(fₙ) of the stored q(f̄) (or
        given as ``site_parameters``) (:func:`local_terms`): the part of the sites' constants
        that the kernel does not touch. Both bounds include it; without it the KL-corrected
        bound is a GP marginal likelihood on the pseudo-targets.
        """
        if site_parameters is None:
            site_parameters = self._site_parameters(data)
        _, f_var, f_evidence, _ = site_parameters
        return local_terms(f_var, f_evidence, tf.convert_to_tensor(self.beta))

    # ----------------------------------------------------------------------------------------------
    # The two bounds.

    def _kl_corrected_bound(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> tf.Tensor:
        """
        The KL-corrected bound (paper eq. 9) at the current θ and β, for the q(fₙ) of the stored
        q(f̄) (or given as ``site_parameters``); q(f̄) is optimal for them. It is the collapsed
        bound of the PPA sites: in the full form (Z = X) exactly log N(⟨f⟩ | μ(X), K + β⁻¹I)
        (paper eq. 10) plus the local terms.
        """
        return self._site_bound(data, site_parameters)

    def _standard_bound(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> tf.Tensor:
        """
        The standard variational bound (paper eq. 3) at the current θ and β and the stored
        q(f̄), for the q(fₙ) of the stored q(f̄) (or given as ``site_parameters``).
        """
        return self._sites_elbo(data, site_parameters)

    def _objective(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> tf.Tensor:
        """The bound selected by :attr:`bound`."""
        if self.bound == "standard":
            return self._standard_bound(data, site_parameters)
        return self._kl_corrected_bound(data, site_parameters)

    def _stepped_sites(
        self,
        num_updates: int,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> SteppedSites:
        """
        :meth:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel._stepped_sites`:
        E-steps and the KL-corrected bound after them. Refused for ``bound="standard"``, whose
        M-step holds q(f̄) fixed and has no such collapsed form.
        """
        if self.bound == "standard":
            raise ValueError(
                'KLCorrected(bound="standard") holds q(f̄) fixed in its M-step; the persistent '
                'route maximises the KL-corrected bound. Train it with fit(model, method="em").'
            )
        return super()._stepped_sites(num_updates, data, site_parameters)

    @check_shapes("return: []")
    @tf.autograph.experimental.do_not_convert  # GPflow's Scipy compiles it with AutoGraph on
    def training_loss(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        −(selected bound + log prior density), for GPflow's optimisers. Each evaluation first
        takes one closed-form E-step and stores its q(f̄), as for every model
        (:meth:`~gpflow_fastvi.models.base.GaussianSitesModel.training_loss`);
        for the KL-corrected bound the loss is that bound, for ``bound="standard"`` the standard
        bound at the stored q(f̄) and q(fₙ), whose gradient holds both fixed (the paper's
        M-step), so that an optimiser on it runs generalised EM.
        """
        if self.bound != "standard":
            return super().training_loss(data)
        data = self._passes.training_data(data)
        self.update_sites(1, data=data)
        return -(self._standard_bound(data) + self.log_prior_density())

    def _expected_log_likelihood(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        """
        Σₙₗ E_q(f̄ₙₗ)[log p(yₙₗ | f̄ₙₗ)] for :meth:`elbo`, where p(yₙₗ | f̄ₙₗ) = ∫ p(yₙₗ | f)
        N(f | f̄ₙₗ, β⁻¹) df is the likelihood with the noise ε integrated out (log Zₙₗ at mean f̄ₙₗ,
        :meth:`_log_normaliser`), and the expectation is by Gauss–Hermite quadrature. :meth:`elbo`
        is then the ELBO of :class:`gpflow.models.SVGP` with that likelihood at q(f̄), so it is
        ≤ log p(y).
        """
        Fmu, Fvar = self._predict_f_at(X)  # q(f̄ₙ) [N, L], without the noise
        points, weights = np.polynomial.hermite_e.hermegauss(self._num_gauss_hermite_points)
        H = len(points)
        z = tf.constant(points, dtype=Fmu.dtype)[:, None, None]
        F = tf.reshape(Fmu + tf.sqrt(Fvar) * z, [-1, tf.shape(Fmu)[1]])  # [H·N, L]
        log_Z = self._log_normaliser(tf.tile(X, [H, 1]), tf.tile(Y, [H, 1]))(F)
        w = tf.constant(weights / np.sqrt(2.0 * np.pi), dtype=Fmu.dtype)  # E over N(0, 1)
        return tf.reduce_sum(w[:, None, None] * tf.reshape(log_Z, [H, -1, tf.shape(Fmu)[1]]))

    # ----------------------------------------------------------------------------------------------
    # What the likelihood sees: f = f̄ + ε.

    def _observed_f_at(self, Xnew: tf.Tensor) -> MeanAndVariance:
        """q(f*) for f = f̄ + ε, which :meth:`predict_y` and :meth:`predict_log_density` integrate
        over: the marginals of f̄ (:meth:`predict_f`) with the noise variance β⁻¹ added."""
        mean, var = self._predict_f_at(Xnew)
        return mean, var + 1.0 / tf.convert_to_tensor(self.beta)
