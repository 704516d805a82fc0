"""VIConcave: the standard variational bound by convergent site steps (Khan, Mohamed & Murphy, 2012)."""

import functools
from typing import Any, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import RegressionData

from ..gaussian import (
    WhitenedQ,
    centred_q,
    expected_sites,
    expected_sites_from_statistics,
    kl_to_prior,
    marginals,
    mixing,
    q_from_natural,
    site_target,
)
from ..gaussian.ascent import ROUND_OFF, Evaluation, Fallback, ascend, nest_stop_gradient
from ..model_checks import check_log_concave, check_scalar_likelihood
from ..sites.expectation import expectation_sites, expected_log_softmax_gradient
from ..types import Data, Sites, SiteStatistics, SteppedSites
from ..validation import positive_int
from .base import PERSISTENT_ROUTE, GaussianSitesModel
from .site_model import SITES

SETTLED = 1e-11
"""The steps of :meth:`VIConcave._closed_form_steps` (``training_loss``, ``update_sites``) end
once a step raised the ELBO by at most this much relative to max(1, |ELBO|): q(u) has settled at
its optimum for this θ, and the loss's gradient in θ at that q(u) held fixed is the gradient of
the loss itself (the envelope theorem), as GPflow's Scipy needs it to be."""

LOSS_STEPS = 25
"""The most steps one full-data ``training_loss`` of :class:`VIConcave` takes before
:data:`SETTLED` holds. A warm start settles in one or two; GPflow's multi-class notebook
(``MultiClass``, the kernel variance in the thousands) takes tens after each move of θ, and with
three steps L-BFGS-B read a loss that the steps were still lowering, ended ``ABNORMAL`` and
0.06 nats a point below SVGP's ELBO."""


class VIConcave(GaussianSitesModel):
    r"""
    The standard variational bound of a GP with any log-concave scalar likelihood, maximised over
    q by site steps that never lower it (:cite:t:`khan2012fast`).

    The paper writes the optimal covariance as V = (K⁻¹ + diag λ)⁻¹: N site precisions instead of
    N² covariance entries, with λᵢ = −2 ∂fᵦ/∂vᵢ at the optimum, where
    fᵦ(yᵢ, mᵢ, vᵢ) = E_{N(mᵢ, vᵢ)}[log p(yᵢ | fᵢ)] is jointly concave in (mᵢ, vᵢ) for a
    log-concave likelihood. Here that fixed point is reached on the shared core: the sites are
    those of :mod:`gpflow_fastvi.sites.expectation` (w = −2 ∂fᵦ/∂v, b = ∂fᵦ/∂m + w m at the current
    marginals), and a step moves the natural parameters of q(u) towards the closed-form optimum
    for them by ρ, trying ρ = 1, ½, ¼, … until the ELBO does not fall (ρ = 1 is the paper's
    fixed-point update, and the conjugate-computation step of Khan & Lin). The steps are
    natural-gradient steps on the ELBO, so a small enough ρ always raises it: the bound never
    falls, and at the fixed point q(u) is the optimum of the standard ELBO itself — the q(u) that
    :class:`gpflow.models.SVGP` reaches when trained to convergence, with no learning rate.

    fᵦ is the likelihood's own ``variational_expectations`` (closed form for Poisson and
    Gaussian, Gauss–Hermite quadrature for the Bernoulli links); the paper's piecewise bound for
    the logit is not used: quadrature is exact to rounding at the same cost.

    **Two forms.** ``VIConcave(kernel, likelihood, data=(X, Y))`` holds its data; with no
    ``inducing_variable`` it is the full GP (Z = X, like :class:`gpflow.models.VGP`; O(N³) per
    step, for N up to a few thousand), with one (an array Z, a GPflow inducing variable, or an int
    M for k-means centres) the sparse form. SVGP's signature,
    ``VIConcave(kernel, likelihood, Z, num_data=N)``, takes the data per call, as every model of
    the package does.

    **Training.** :func:`gpflow_fastvi.fit` runs one L-BFGS-B run over θ on the ELBO at the
    model's q(u), each evaluation taking ``n_upd`` steps (the persistent route): the first to the
    optimal q(u), at the trial θ, for the sites of the last accepted iterate (kept by ``fit`` as
    their marginals with the data in memory; a stream reads them again), the later ones halved
    until the ELBO does not fall (:meth:`_stepped_sites`). By the envelope theorem its gradient at
    the fixed point is that of the ELBO at the optimal q. That gradient is taken through the
    sites of the steps' last pass (they touch fᵦ to first order in the marginals), not through
    the quadrature. :meth:`update_sites` takes steps at fixed θ. The
    model's :meth:`_objective` is the standard ELBO, :meth:`elbo`.

    **C classes.** ``VIConcave(kernel, gpflow.likelihoods.Softmax(C), Z, num_latent_gps=C)``, as
    GPflow's multi-class SVGP is built, with one q(u_c) per class stored as SVGP stores them and
    labels {0, …, C − 1} of shape [N, 1]. The objective is SVGP's softmax ELBO itself:
    E[log softmax(f)_y] has no closed form, and a Monte Carlo estimate with new draws at every
    call would make the steps' ELBO test and L-BFGS-B's line search see noise, so it is computed
    with fixed quasi-random draws (:func:`~gpflow_fastvi.sites.expectation.expected_log_softmax`),
    one deterministic function of the marginals (its error: :ref:`defaults-softmax-draws`).
    Each step is followed by removing the shift common to all classes (the softmax cannot see
    it, the KL sets it), which the site steps would otherwise approach only slowly.

    GPflow's ``MultiClass(C)`` (its RobustMax) is taken too, as GPflow's multi-class notebook
    builds it: fᵦ is GPflow's own quadrature of it, and its sites are read the same way. Its
    log-density is flat almost everywhere, not concave, so fᵦ can bend upwards in v: such a
    site's precision is clipped at 0, and the ELBO test of every step still keeps the bound from
    falling. RobustMax too sees only differences between classes, and the common shift is removed
    as for the softmax.

    **Mixed outputs.** With GPflow's :class:`~gpflow.kernels.LinearCoregionalization` the P
    outputs are f = W g of L independent latent functions (Y [N, P], ``num_latent_gps=L``). fᵦ is
    then the outputs' expected log-likelihood at the marginals W makes of the latent ones
    (:func:`~gpflow_fastvi.gaussian.output_marginals`), and the sites, its derivatives in those
    latent marginals, are one per latent function as for C classes: the steps end at SVGP's
    optimum for the mixed model.

    **Student-t.** GPflow's ``StudentT`` is taken as ``MultiClass`` is: its log-density bends
    upwards away from the data, so at an outlier fᵦ can bend upwards in v and that site's
    precision is clipped at 0, while the ELBO test of every step keeps the bound from falling.
    On 1-D data with 10–30 % of the points moved by 3 to 30 noise scales, the steps at SVGP's
    trained θ ended within 2·10⁻³ nats of SVGP's ELBO, and ``fit`` within 2·10⁻³ nats of SVGP
    trained by Scipy (tests/test_vi_concave.py).

    Likelihoods: any :class:`gpflow.likelihoods.ScalarLikelihood` whose log-density is concave
    in f (Bernoulli with the logit or probit link, Poisson, Gaussian, Exponential, Gamma),
    GPflow's ``StudentT``, ``Softmax`` and ``MultiClass``; Beta is refused
    (:func:`~gpflow_fastvi.model_checks.check_log_concave`). Default
    ``Bernoulli(invlink=tf.sigmoid)``.
    """

    training_routes = {"persistent": PERSISTENT_ROUTE}
    default_route = "persistent"
    _objective_is_bound = True
    _multi_class_likelihoods = (gpflow.likelihoods.Softmax, gpflow.likelihoods.MultiClass)
    _full_data_loss_steps = LOSS_STEPS
    _mixed_outputs = True

    @classmethod
    def _checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        Any log-concave scalar likelihood, or :class:`gpflow.likelihoods.Softmax` or
        :class:`gpflow.likelihoods.MultiClass` of C classes with C latent functions; default
        ``Bernoulli(invlink=tf.sigmoid)``.
        """
        if likelihood is None:
            return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
        if isinstance(likelihood, cls._multi_class_likelihoods):
            return likelihood
        check_scalar_likelihood(likelihood, "VIConcave")
        if not isinstance(likelihood, gpflow.likelihoods.StudentT):  # taken: class docstring
            check_log_concave(likelihood, "VIConcave")
        return likelihood

    def _shift_removed(self, q: WhitenedQ) -> WhitenedQ:
        """
        q(v) as a step left it, or for the softmax and RobustMax with the common shift of its
        latent functions removed (:func:`~gpflow_fastvi.gaussian.natural.centred_q`): both see
        only differences between classes, so this only raises the ELBO, and the steps
        need not crawl along a direction the likelihood cannot see (on digits, 25 steps had not
        found it from p(u) at a kernel variance of 100).
        """
        if isinstance(self.likelihood, self._multi_class_likelihoods):
            return centred_q(q)
        return q

    @inherit_check_shapes
    def _optimal_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> Tuple[tf.Tensor, ...]:
        """
        The sites (a, b, w) that touch fᵦ at the marginal q(fᵢ) = N(Fmu, Fvar)
        (:func:`~gpflow_fastvi.sites.expectation.expectation_sites`), each [N, L]. They are
        numbers once read, whatever θ: a step at another θ from the sites of an accepted iterate
        uses them as kept, with no pass through fᵦ (for the softmax, its fixed draws) again.
        """
        gradient = (
            functools.partial(expected_log_softmax_gradient, Y=Y, labels_checked=True)
            if isinstance(self.likelihood, gpflow.likelihoods.Softmax)
            else None  # fᵦ's automatic derivatives
        )
        return tuple(
            expectation_sites(
                lambda m, v: self._expected_latent_density(X, Y, m, v),
                Fmu,
                Fvar,
                name=type(self.likelihood).__name__,
                gradient=gradient,
            )
        )

    @check_shapes("X: [N, D]", "Y: [N, P]", "a: [N, L]", "b: [N, L]", "w: [N, L]", *SITES)
    def _site_rule(
        self, X: tf.Tensor, Y: tf.Tensor, a: tf.Tensor, b: tf.Tensor, w: tf.Tensor
    ) -> Sites:
        """The sites themselves: a VIConcave site's local parameters are its (a, b, w)."""
        return Sites(a=a, b=b, w=w)

    def _objective(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> tf.Tensor:
        """The objective the steps maximise at the stored q(u): the standard ELBO, :meth:`elbo`."""
        if site_parameters is not None:
            raise ValueError(
                "VIConcave's objective is the ELBO at its q(u); it holds no site parameters."
            )
        return self.elbo(data)

    # ----------------------------------------------------------------------------------------------
    # The steps.

    def _expectation_and_sites(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Any, *q: tf.Tensor
    ) -> Tuple[tf.Tensor, Sites]:
        """
        Σᵢ fᵦ at the marginals of q(v), given as its tensors ``q`` = (m, R), at the points X
        (whose ``projection`` is given), and the sites there (on f): one pass gives the ELBO of
        q, and the sites give the step from it and the objective's gradient in θ at it.
        """
        Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, WhitenedQ(*q))
        Fmu = Gmu + self.mean_function(X)
        sites = self.local_sites(X, Y, Fmu, Fvar)
        total = tf.reduce_sum(expected_sites(sites, Fmu, Fvar))  # = Σ fᵦ: the sites touch it
        return total, sites

    def _expectation_and_statistics(
        self, X: tf.Tensor, Y: tf.Tensor, projection: Any, *q: tf.Tensor
    ) -> Tuple[tf.Tensor, SiteStatistics]:
        """Σᵢ fᵦ as :meth:`_expectation_and_sites` gives it, and the statistics of the sites: a
        batch of a stream, which keeps no sites."""
        total, sites = self._expectation_and_sites(X, Y, projection, *q)
        return total, self._site_statistics(X, Y, projection, self._site_rule, tuple(sites))

    def _expected_total(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        projection: Any,
        *q: tf.Tensor,
        sites: Optional[Sites] = None,
    ) -> tf.Tensor:
        """
        Σᵢ fᵦ at the marginals of q(v) (``q`` = (m, R), as above) at the points
        X (``projection`` given), as the expectation of the sites there (``sites``, or read at the
        marginals held fixed): they touch fᵦ to first order in the marginals, so it has fᵦ's value
        and gradient in the kernel, inducing inputs and mean function without differentiating
        the quadrature. The expectation is read off the sites' statistics
        (:func:`~gpflow_fastvi.gaussian.expected_sites_from_statistics`), whose gradient is
        written by hand: two N·M² products fewer than autodiff's way back through the marginals
        and A = L⁻¹ Kmn (a fit on ijcnn1, N = 49,990, M = 100: 55 s against 66 s).
        """
        # fᵦ's own gradient in the likelihood's parameters and in a mixing W (below).
        own_gradient = bool(self.likelihood.trainable_variables) or mixing(self.kernel) is not None
        if sites is None or own_gradient:
            held_Fmu, held_Fvar = self._held_marginals(X, projection, q)
        if sites is None:
            sites = self.local_sites(X, Y, held_Fmu, held_Fvar)
        stats = self._site_statistics(
            X, Y, projection, self._site_rule, tuple(nest_stop_gradient(sites))
        )
        total = expected_sites_from_statistics(stats, WhitenedQ(*q))
        if not own_gradient:
            return total
        # The sites carry fᵦ's gradient in the marginals only; its gradient in the likelihood's
        # own parameters (a Gaussian's variance) and in the W that mixes the latent functions
        # into the outputs is fᵦ's at the held marginals, added at value 0.
        f_b = tf.reduce_sum(self._expected_latent_density(X, Y, held_Fmu, held_Fvar))
        return total + (f_b - tf.stop_gradient(f_b))

    def _stepped_sites(
        self,
        num_updates: int,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
    ) -> SteppedSites:
        """
        ``num_updates`` steps at the current θ, as an optimiser of θ evaluates them
        (:func:`~gpflow_fastvi.fit`'s persistent route); nothing is assigned.

        The first step goes to the optimal q(u), at this θ, for the sites of the stored q(u) read
        where it was set (the θ of the last accepted iterate): as given in ``site_parameters``
        (the sites (a, b, w) themselves, which ``fit`` keeps between evaluations when the data
        are in memory, as the result's ``site_parameters`` hand them on), or read per batch. Sites
        usually carry over a change of θ better than the whitened q(u) does, but that whole step
        can lower the ELBO where the steps settle slowly (C classes), so where its loss is above
        the loss recorded with the stored q(u) the stored q(u) is evaluated too, and the steps go
        on from the better of the two (:class:`~gpflow_fastvi.gaussian.ascent.Fallback`): at the θ
        where q(u) was set the objective is never below the ELBO of the stored q(u), and the loss
        is continuous there.
        The later steps are :meth:`update_sites`'s, halved until the ELBO does not fall.
        """
        return self._ascent(self._passes.training_data(data), num_updates, site_parameters, True)

    def _adopt(self, stepped: SteppedSites) -> None:
        """
        Make the q(u) of the steps the model's own, with the loss they were evaluated at
        (:attr:`QFrame.loss <gpflow_fastvi.models.q_frame.QFrame.loss>`): the level at which the
        next steps from its sites need not evaluate it again
        (:class:`~gpflow_fastvi.gaussian.ascent.Fallback`). The objective is the ELBO, which the steps
        never lower: a full-data ``training_loss`` at this θ is then no higher, and adopts its own
        q(u).
        """
        loss = -(stepped.objective + self.log_prior_density())
        self._q_frame.store(stepped.q_mu, stepped.q_sqrt, loss)

    def _closed_form_steps(
        self, data: Data, num_updates: int, site_parameters: Optional[Tuple[tf.Tensor, ...]] = None
    ) -> SteppedSites:
        """
        At most ``num_updates`` steps from the stored q(u) itself (:meth:`update_sites`, the
        full-data ``training_loss``), each by the largest ρ of 1, ½, ¼, … that does not lower the
        ELBO, ending once one raised it by no more than :data:`SETTLED`.
        """
        return self._ascent(data, num_updates, site_parameters, settled=SETTLED)

    def _ascent(
        self,
        data: Data,
        num_updates: int,
        site_parameters: Optional[Tuple[tf.Tensor, ...]] = None,
        from_sites: bool = False,
        settled: Optional[float] = None,
    ) -> SteppedSites:
        """
        ``num_updates`` steps, each from the sites at the marginals of the q(u) it starts from
        towards their optimal q(u), by the largest ρ of 1, ½, ¼, … that does not lower the ELBO;
        the objective is the ELBO at the q(u) reached, differentiable in θ with that q(u)
        (whitened) held fixed.

        The steps start from the stored q(u) (:meth:`update_sites`, the full-data loss), or
        ``from_sites`` from the optimal q(u) for the sites of the stored q(u) where it was set,
        or the stored q(u) where that is better (:meth:`_stepped_sites`,
        :class:`~gpflow_fastvi.gaussian.ascent.Fallback`), the sites given in ``site_parameters`` (in
        memory) or read per batch; the result then
        carries the sites at the marginals of the q(u) reached in memory. With ``settled`` the
        steps end once one raised the ELBO by no more than that, relative to max(1, |ELBO|)
        (:data:`SETTLED`).
        """
        num_updates = positive_int(num_updates, "num_updates")
        in_memory = self._steps_in_memory(data, site_parameters)
        L = self._passes.Kmm_cholesky()
        projection = self._passes.projection(data[0], L) if in_memory else None

        def over_data(per_rows: Any, q: WhitenedQ, differentiable: bool) -> Any:
            """
            ``per_rows(X, Y, projection, m, R)`` of all the data in memory, or its sum over a
            stream's batches; with a gradient in θ only where ``differentiable`` (the objective,
            not the steps' passes).
            """
            if in_memory:
                held = projection if differentiable else nest_stop_gradient(projection)
                return per_rows(*data, held, *q)

            def batch(X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, *q: tf.Tensor) -> Any:
                return per_rows(X, Y, self._passes.projection(X, L), *q)

            factor = L if differentiable else tf.stop_gradient(L)
            return self._passes.sum_over_data(batch, data, (factor, *q), self.batch_size)

        def evaluate(q: WhitenedQ) -> Evaluation:
            """
            The ELBO of q(v) and, in memory, its sites; a stream, which keeps nothing per point,
            gives the sites' statistics from the same pass instead.
            """
            if in_memory:
                total, sites = over_data(self._expectation_and_sites, q, False)
                return tf.stop_gradient(total - kl_to_prior(q)), None, nest_stop_gradient(sites)
            total, stats = over_data(self._expectation_and_statistics, q, False)
            return tf.stop_gradient(total - kl_to_prior(q)), nest_stop_gradient(stats), ()

        def statistics(sites: Sites) -> SiteStatistics:
            """In memory, the statistics of the sites a pass kept, at this θ."""
            held = nest_stop_gradient(projection)
            return nest_stop_gradient(
                self._site_statistics(data[0], data[1], held, self._site_rule, tuple(sites))
            )

        if from_sites:
            # The first step: the optimal q(u), at this θ, for the sites of the stored q(u) where
            # it was set, kept (in memory) or read off it batch by batch.
            stats = (
                self._pass_statistics(data, L, self._site_rule, projection)
                if site_parameters is None
                else self._site_statistics(
                    *self._arrays_of(data, "site_parameters"),
                    projection,
                    self._site_rule,
                    site_parameters,
                )
            )
            one = tf.ones((), L.dtype)
            optimal = q_from_natural(site_target(nest_stop_gradient(stats), one))
            start = self._in_family(self._shift_removed(nest_stop_gradient(optimal)), L)
            # The stored q(u) is the fallback start, for where the sites' optimum, a whole step,
            # lies below it (the steps settle slowly), evaluated only where the first start's
            # loss is above the loss recorded where q(u) was set. Which of the two the steps go
            # on from must not depend on whether θ is exactly that θ: evaluated there alone (an
            # L-BFGS-B restart evaluates there), the stored q(u) made the loss jump at every
            # accepted iterate, by up to 0.27 nats on breast cancer (M = 100), and the line
            # searches from there failed and started again, at twice the evaluations.
            frame = self._q_frame
            own_frame = frame.belongs_to(self.q_mu, self.q_sqrt)
            recorded = own_frame & tf.math.is_finite(frame.loss)
            # The fallback is needless once the first start reaches the level recorded with the
            # stored q(u), less round-off (at a fixed point of the steps the first start is the
            # stored q(u) itself, and a sum's rounding must not decide); with no loss recorded,
            # or q(u) set from outside since, it is always evaluated.
            level = tf.where(recorded, -frame.loss - self.log_prior_density(), tf.zeros_like(one))
            sufficient = tf.where(
                recorded,
                level - ROUND_OFF * tf.maximum(one, tf.abs(level)),
                tf.constant(np.inf, L.dtype),
            )
            stored = nest_stop_gradient(self._whitened(self.q_mu, self.q_sqrt, L))
            known_stored = None
            if in_memory and site_parameters is not None:
                # At the θ where q(u) was set, the kept sites are those of the stored q(u)
                # itself (read there at the start of a fit, or the last pass of the steps that
                # reached it): they touch fᵦ at its marginals, so its ELBO is their expectation
                # there, and their statistics are the ones just formed. No pass through fᵦ.
                known_stored = (
                    own_frame & frame.is_at_model(),
                    lambda: self._known_evaluation(
                        data[0], projection, stored, stats, site_parameters
                    ),
                )
            fallback: Optional[Fallback] = Fallback(stored, sufficient, known_stored)
            steps = num_updates - 1
        else:
            start = nest_stop_gradient(self._whitened(self.q_mu, self.q_sqrt, L))
            fallback = None
            steps = num_updates
        # What the loop keeps of a pass: in memory the sites ([N, L] each).
        zeros = (
            tf.zeros([tf.shape(data[1])[0], self.num_latent_gps], L.dtype) if in_memory else None
        )
        nothing_kept = Sites(zeros, zeros, zeros) if in_memory else ()
        q, kept = ascend(
            start,
            steps,
            evaluate,
            statistics,
            nothing_kept,
            lambda q: self._in_family(self._shift_removed(q), L),
            fallback,
            settled,
        )
        sites = kept if in_memory else None
        # In memory, the sites of the q(u) reached are those of the loop's last pass.
        per_rows = (
            functools.partial(self._expected_total, sites=sites)
            if in_memory
            else self._expected_total
        )
        q_mu, q_sqrt = (tf.stop_gradient(t) for t in self._stored(q, L))
        # The objective's gradient in θ holds q(u) fixed as the model stores it, as SVGP's does.
        # The steps end at the optimum of the model's family, so by the envelope theorem that is
        # the gradient of the optimum, provided the family does not move with θ when q(u) is
        # held: it does not in the stored frame, but with q_diag=True and whiten=False a
        # factorised q(u) held in the whitened frame would stop being factorised as Kmm moved
        # (its θ-gradient was then off by a term of the constraint: the lengthscales' sign
        # flipped on a 2-D set).
        held = self._whitened(q_mu, q_sqrt, L)
        total = over_data(per_rows, held, differentiable=True)
        return SteppedSites(
            objective=total - kl_to_prior(held),
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            site_parameters=(
                tuple(sites) if sites is not None and site_parameters is not None else ()
            ),
        )

    def _known_evaluation(
        self,
        X: tf.Tensor,
        projection: Any,
        q: WhitenedQ,
        stats: SiteStatistics,
        sites: Tuple[tf.Tensor, ...],
    ) -> Tuple[tf.Tensor, SiteStatistics, Any]:
        """
        What a pass would give for q(v) whose sites at this θ are known (``sites``, with their
        ``stats`` at the ``projection`` of the points X in memory): its ELBO, Σᵢ of the sites'
        expectation at its marginals (equal to Σᵢ fᵦ, as they touch it there) less the KL, those
        statistics, and the sites. One product for the marginals; nothing through fᵦ.
        """
        held = Sites(*sites)
        total = tf.reduce_sum(expected_sites(held, *self._held_marginals(X, projection, q)))
        elbo = tf.stop_gradient(total - kl_to_prior(q))
        return elbo, nest_stop_gradient(stats), nest_stop_gradient(held)
