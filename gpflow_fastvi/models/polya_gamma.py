"""PolyaGammaSVGP: SVGP for logit classification with Pólya-Gamma sites and natural-gradient SVI (Wenzel et al., 2019)."""

from typing import Any, Optional, Tuple

import gpflow
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import RegressionData

from ..exceptions import InvalidDataError
from ..likelihoods import LogisticSoftmax, one_hot_classes
from ..model_checks import (
    check_logit_bernoulli,
)
from ..sites.logistic_softmax import ls_optimal_locals, ls_sites
from ..sites.polya_gamma import pg_optimal_c, pg_sites
from ..stream_validation import ZERO_ONE_OR_SIGNS, checked_stream, static_cardinality
from ..types import Route, Sites
from ..validation import checked_signed_labels, positive_int
from .natural_step import batch_sites_elbo, stepped_natural_parameters, stored_q_from_natural
from .site_model import SiteModel
from .step_sizes import FULL_DATA_STEPS

NOT_FINITE_STEP = (
    "PolyaGammaSVGP's step on q(u) has natural parameters that are not finite at these "
    "hyperparameters (a trial point too far out, or NaN in the mean function)."
)
"""What a full-data ``training_loss`` on a stream says where its step cannot be taken."""


class PolyaGammaSVGP(SiteModel):
    r"""
    :class:`gpflow.models.SVGP` for binary classification with the logit link, whose ELBO is in closed
    form through Pólya-Gamma augmentation (:cite:t:`wenzel2019efficient`), trained by stochastic
    variational inference with closed-form natural-gradient steps on q(u).

    The constructor, ``q_mu``, ``q_sqrt``, ``whiten``, ``num_data``, ``elbo(data)``,
    ``training_loss(data)``, ``training_loss_closure``, predictions and checkpoints are those of
    SVGP, so an SVGP script runs with the class name changed (``train_inducing=False`` holds the
    inducing inputs where they start). What differs:

    - :meth:`maximum_log_likelihood_objective` is the Pólya-Gamma ELBO with the optimal
      q(ωᵢ) = PG(1, cᵢ) for each point, in closed form (no quadrature), every constant included:
      Σᵢ [−log 2 + yᵢ μᵢ/2 − E[ωᵢ] (μᵢ² + σᵢ²)/2 − KL(cᵢ)] − KL[q(u) ‖ p(u)], scaled by
      ``num_data``/batch size for a mini-batch as SVGP does. It equals the Jaakkola–Jordan bound
      with ξ = c (:mod:`gpflow_fastvi.sites.polya_gamma`), so it is a lower bound on log p(y) and
      lies below SVGP's own (quadrature) ELBO, :meth:`elbo`, at the same q(u).
    - q(u) is set by the method's closed-form steps, never by gradients, so ``q_mu`` and ``q_sqrt``
      are not trainable: each mini-batch step sets the local cᵢ in closed form, takes a
      closed-form natural-gradient step on q(u), and the hyperparameters take a gradient step at
      the new q(u). :func:`gpflow_fastvi.fit` (or :class:`gpflow_fastvi.NaturalGradientSVI` in your
      own loop) runs that with Adam; :meth:`training_loss` takes the same step on q(u) at every
      evaluation, so GPflow's Adam or Scipy loop on ``training_loss_closure`` trains the model
      by the method too.

    Built with SVGP's constructor and arguments
    (:class:`~gpflow_fastvi.models.site_model.SiteModel`): the likelihood is
    ``gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)`` (labels {0, 1}, GPflow's convention, or
    {−1, +1}; with ``num_latent_gps=L``, L binary outputs Y [N, L], one latent function each)
    or :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax` of C classes with
    ``num_latent_gps=C``; with ``q_diag=True`` every step goes to the factorised q(u) closest to
    its full-covariance target, and ``num_data`` scales mini-batch ELBOs.
    """

    training_routes = {
        "svi": Route(
            "svi",
            options={
                "batch_size": None,
                "step_size": None,
                "learning_rate": None,
                "steps_per_iteration": None,
                "seed": 0,
                "plateau": True,
            },
            description="natural-gradient SVI on q(u), Adam on θ (Wenzel et al.)",
        ),
    }
    default_route = "svi"
    _objective_is_bound = True
    _multi_class_likelihoods = (LogisticSoftmax,)
    _mini_batch_closure_advice = (
        "PolyaGammaSVGP's mini-batch closure ends short of fit's answer under Adam: train it with "
        "gpflow_fastvi.fit(model, data), which also streams a tf.data.Dataset."
    )

    @classmethod
    def _checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        ``gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)``, or
        :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax` of C classes with C latent
        functions; no default, as in SVGP.
        """
        if isinstance(likelihood, cls._multi_class_likelihoods):
            return likelihood
        # None is refused here too, by name: SVGP's likelihood has no default either.
        return check_logit_bernoulli(likelihood, "PolyaGammaSVGP's Pólya-Gamma augmentation")

    # ----------------------------------------------------------------------------------------------
    # The site rule: Pólya-Gamma sites with c optimal for the current q(f).

    @inherit_check_shapes
    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """
        Sites of points with labels Y whose local variational factors are optimal for
        q(f) = N(Fmu, Fvar): q(ωᵢ) = PG(1, cᵢ) for binary labels (one site per point); for
        :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax`, q(λᵢ), q(n_ic) and q(ω_ic | n_ic)
        of its augmentation (one site per point and class, :mod:`~gpflow_fastvi.sites.logistic_softmax`).
        """
        likelihood = self.likelihood
        if isinstance(likelihood, LogisticSoftmax):
            Y = one_hot_classes(Y, likelihood.num_classes, "PolyaGammaSVGP", Fmu.dtype)
            return ls_sites(Y, ls_optimal_locals(Fmu, Fvar))
        return pg_sites(checked_signed_labels(Y, "PolyaGammaSVGP"), pg_optimal_c(Fmu, Fvar))

    # ----------------------------------------------------------------------------------------------
    # The rest of the protocol.

    def _objective(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        The Pólya-Gamma ELBO in closed form, at the optimal q(ω) for the current q(u); see the class
        docstring. For a mini-batch, an unbiased estimate of the full-data value; a
        ``tf.data.Dataset`` is all the data, streamed. Concrete data are checked as the other
        models check theirs (:meth:`_checked_call_data`); without data, a ValueError says to pass
        them.
        """
        X, Y = self._checked_call_data(data, "maximum_log_likelihood_objective")
        return batch_sites_elbo(self, X, Y, self._passes.Kmm_cholesky(), self.q_mu, self.q_sqrt)

    def _closure_data(self, data: Any) -> Any:
        """The data a closure over all of them works on: ``(X, Y)`` or a ``tf.data.Dataset``,
        checked once."""
        X, Y = self._checked_call_data(data, "training_loss_closure")
        return X if Y is None else (X, Y)

    def _checked_call_data(self, data: Any, method: str) -> Tuple[Any, Optional[tf.Tensor]]:
        """
        The data of a call as ``(X, Y)``, checked (:meth:`~gpflow_fastvi.models.passes.DataPasses.checked_training_data`); or, for a
        ``tf.data.Dataset`` of ``(X [b, D], Y [b, 1])`` batches, all the data streamed once per
        pass, as ``(dataset, None)``: its batches checked as they stream, its rows counted
        against ``num_data`` in every pass and, where TensorFlow knows them without reading it,
        here (:func:`~gpflow_fastvi.stream_validation.checked_stream`). A dataset that repeats
        without end is refused: a pass over it would never end.
        """
        data = self._require_data(data, method)
        if not isinstance(data, tf.data.Dataset):
            return self._passes.checked_training_data(data)
        if static_cardinality(data) == tf.data.INFINITE_CARDINALITY:
            raise InvalidDataError(
                f"The dataset repeats without end, and {method} takes a tf.data.Dataset as all "
                "the data, read in every pass: pass a finite dataset (without .repeat()). For "
                "mini-batches of an endless stream use fit(model, dataset), or "
                "training_loss_closure(iter(dataset))."
            )
        labels = () if isinstance(self.likelihood, LogisticSoftmax) else ZERO_ONE_OR_SIGNS
        num_data = None if self.num_data is None else int(self.num_data)
        return checked_stream(data, labels, num_data, self._target_columns), None

    @check_shapes("return: []")
    @tf.autograph.experimental.do_not_convert  # GPflow's Scipy compiles it with AutoGraph on
    def training_loss(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        −(:meth:`maximum_log_likelihood_objective` + log prior density) after the method's own step on q(u), so that GPflow's
        optimisers on ``training_loss_closure`` move the hyperparameters while q(u) follows by
        closed-form natural-gradient steps, as in :func:`gpflow_fastvi.fit`:

        - on a mini-batch (fewer rows than ``num_data``, or rows known only when it runs: an
          Adam loop over ``training_loss_closure(iter(dataset))``), the step of
          :class:`~gpflow_fastvi.NaturalGradientSVI` with ρ = min(1, b / 10,000)
          (:func:`~gpflow_fastvi.models.natural_step._mini_batch_loss_step`); the loss is the
          batch's estimate at the new q(u);
        - on all the data (``gpflow.optimizers.Scipy`` on ``training_loss_closure((X, Y))``),
          three steps of size ρ = 1 (coordinate ascent in q(u) and the cᵢ), kept unless the
          loss is higher than that of the evaluation that set the stored q(u) (a line search's
          trial point too far out); +inf where no jitter factorises Kmm or a step's natural
          parameters are not finite, with q(u) left as it was;
        - on a ``tf.data.Dataset``, the same on all the data, each step a pass over the stream;
          where the step cannot be taken the call raises instead of returning +inf
          (:meth:`~gpflow_fastvi.models.base.GaussianSitesModel.training_loss` says why).

        The loss's gradient holds q(u) fixed: ``q_mu`` and ``q_sqrt`` are not trainable (the
        steps set them).
        """
        X, Y = self._checked_call_data(data, "training_loss")
        streamed = Y is None

        def loss() -> tf.Tensor:
            L = self._passes.Kmm_cholesky()
            # On one device the data are projected once for every pass (:meth:`sum_over_projected_rows`).
            passes = self._passes
            projection = None if streamed or passes.pass_strategy() else passes.projection(X, L)
            q_mu, q_sqrt = tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt)
            # The sites are read at the trial hyperparameters, which a line search may take so far
            # out that the step's precision is not finite: the loss is then +inf, nothing stored.
            finite = tf.constant(True)
            for _ in range(FULL_DATA_STEPS):
                natural = stepped_natural_parameters(self, X, Y, L, q_mu, q_sqrt, 1.0, projection)
                finite &= tf.reduce_all(
                    [tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(natural)]
                )
                q_mu, q_sqrt = tf.cond(
                    finite,
                    lambda natural=natural: stored_q_from_natural(self, natural, L),
                    lambda q=(q_mu, q_sqrt): q,
                )

            def evaluated() -> tf.Tensor:
                elbo = batch_sites_elbo(self, X, Y, L, q_mu, q_sqrt, projection)
                value = self._q_frame.adopt_unless_worse(
                    -(elbo + self.log_prior_density()), lambda: self._q_frame.store(q_mu, q_sqrt)
                )
                return self._with_q_gradient(value, q_mu, q_sqrt)

            if not streamed:
                return passes.loss_or_inf(finite, evaluated)
            # A streamed pass's gradient reads the variables again, which TensorFlow cannot
            # differentiate inside a tf.cond once traced (GaussianSitesModel.training_loss).
            with tf.control_dependencies([tf.debugging.Assert(finite, [NOT_FINITE_STEP])]):
                return evaluated()

        if streamed:
            return loss()
        return self._passes.by_rows(
            (X, Y),
            lambda: self._mini_batch_loss_step((X, Y)),
            lambda: self._passes.where_factorisable(loss),
        )

    def update_sites(
        self, num_updates: int = 1, *, data: Optional[RegressionData] = None
    ) -> tf.Tensor:
        """
        ``num_updates`` natural-gradient steps of size ρ = 1 on the batch ``data``: with all the
        training data each lands on the closed-form optimum q(u) for the current hyperparameters
        and the sites of the previous q(u). Returns the Pólya-Gamma ELBO after the last step.
        """
        data = self._require_data(data, "update_sites")
        for _ in range(positive_int(num_updates, "num_updates")):
            objective = self.natural_gradient_step(data, 1.0)
        return objective

    def _require_data(self, data: Any, method: str) -> RegressionData:
        if data is None:
            raise ValueError(
                f"PolyaGammaSVGP takes its data per call, as SVGP does: {method}((X, Y))."
            )
        return data
