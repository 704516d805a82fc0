"""
:class:`SiteModel`: the base class of every model of the package, a :class:`gpflow.models.SVGP`
whose likelihood terms are replaced by Gaussian sites aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2 for training.

In the spirit of Markovflow's ``update_sites()``: the sites are the model's business, the step
that moves them is a model method, and the method's own objective sits beside SVGP's ELBO.

What a model adds to SVGP's public surface, and all it adds (a test counts it):

=====================================  =========================================================
what                                   member
=====================================  =========================================================
the sites for the current q(u)         :meth:`~SiteModel.local_sites` (X, Y, q(f)) ↦ Sites
a step towards the sites' optimum      :meth:`~SiteModel.update_sites` (closed form, full data);
                                       :meth:`~SiteModel.natural_gradient_step` (size ρ, a batch)
how the model is trained               ``training_routes`` and ``default_route`` (data, read by
                                       :func:`gpflow_fastvi.fit`)
=====================================  =========================================================

SVGP's own names keep their meaning: ``elbo`` is SVGP's ELBO at the stored q(u) for every model,
``maximum_log_likelihood_objective`` the method's own objective (the bound the steps maximise)
and ``training_loss`` its negation after the method's steps on q(u). The rest (the closed-form
steps, the frame of q(u), the checks of a call) is private to the package: the training layer
(:mod:`gpflow_fastvi.training`) calls it, a user does not.

What SVGP does right a model inherits: its variables (``q_mu`` [M, L]; ``q_sqrt`` [L, M, M], or
[M, L] for ``q_diag``; ``whiten``), ``posterior`` and the training-loss closure's contract. What
every model shares beyond SVGP is held in two parts with one job each, composed rather than
inherited:

* ``model._passes`` (:class:`~gpflow_fastvi.models.passes.DataPasses`): how the model meets its
  data: the checks of a call, Kmm's factor and the projection, and the one sum over the data on
  one device or many;
* ``model._q_frame`` (:class:`~gpflow_fastvi.models.q_frame.QFrame`): where q(u) was set, and what
  a step may store.

The natural-gradient step on a batch is :mod:`~gpflow_fastvi.models.natural_step`, written once
as functions of the model. Predictions use the factor of Kmm that training uses.
"""

import abc
import warnings
from typing import Any, Callable, ClassVar, Mapping, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import InputData, MeanAndVariance, RegressionData
from gpflow.models import SVGP

from ..distribution import set_trainable
from ..exceptions import InvalidDataError, UnsupportedConfigurationError
from ..gaussian import (
    WhitenedQ,
    diagonal_q_sqrt,
    kl_between,
    kl_to_prior,
    marginal_covariance,
    marginals,
    mean_field_sqrt,
    mixed_covariance,
    mixing,
    output_marginals,
    prior_covariance,
    robust_cholesky,
    single_output_parts,
    stored_q,
    whitened_q,
)
from ..inducing import InducingSpec, set_inducing_trainable
from ..model_checks import (
    check_latent_functions,
    check_svgp_options,
    is_logit_bernoulli,
    resolve_inducing_variable,
    svgp_initial_q,
    svgp_num_latent_gps,
)
from ..sites.expectation import expected_log_softmax
from ..types import Route, Sites
from ..validation import checked_inputs, inducing_inputs, positive_int, signed_labels
from . import natural_step
from .passes import DataPasses
from .q_frame import QFrame


def logit_log_prob(F: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
    """
    log p(y | f) = log σ(y f) for the logit Bernoulli with Y in {0, 1} (y = 2Y − 1), at F of Y's
    shape or with leading quadrature axes: finite with finite derivatives at every f. GPflow's
    Bernoulli takes log(1 − σ(f)), which is log 0 = −inf once f passes about 37, as it does for a
    confident point (a posterior mean, or a quadrature node of a wide q(fᵢ)).
    """
    return tf.math.log_sigmoid(signed_labels(Y) * F)


MARGINALS = ("X: [N, D]", "Y: [N, P]", "Fmu: [N, L]", "Fvar: [N, L]")
"""The shapes a site rule reads: points X, their targets Y (one column, the class, for C
classes; one per latent function for L independent outputs) and the marginals
q(fₙ) = N(Fmu, Fvar) of the L latent functions."""

SITES = ("return.a: [N, L]", "return.b: [N, L]", "return.w: [N, L]")
"""The shapes of the sites (a, b, w) a site rule returns: one per point and latent function."""


def _is_all_the_data(data: Any) -> bool:
    """Whether a closure's ``data`` are all the data (``None`` for the data the model holds, a
    tuple, a ``tf.data.Dataset``) rather than an iterator of mini-batches."""
    return data is None or isinstance(data, (tuple, list, tf.data.Dataset))


def only_marginals(full_cov: bool, full_output_cov: bool, method: str) -> None:
    """The error GPflow gives where ``method`` is asked for more than the marginals."""
    if full_cov or full_output_cov:
        raise NotImplementedError(
            f"{method} supports only full_cov=False and full_output_cov=False, as in GPflow."
        )


class SiteModel(SVGP):
    """
    The protocol of the module docstring, on :class:`gpflow.models.SVGP`, with SVGP's
    constructor: its checks (:meth:`_checked_options`) and its variables (:meth:`_build`) are
    the steps a subclass's own constructor reuses.
    """

    batch_size: Optional[int] = None
    """Accumulate a pass's sums over batches of this many points; ``None``: all at once."""

    training_routes: ClassVar[Mapping[str, Route]]
    """The ways :func:`gpflow_fastvi.fit` can train the model, by name."""
    default_route: ClassVar[str]
    """The route ``fit`` takes when no ``method`` is given (:meth:`_default_method`)."""
    _multi_class_likelihoods: ClassVar[Tuple[type, ...]] = ()
    """The likelihoods of C classes the model takes, with C latent functions (none unless the
    model says so)."""
    _mixed_outputs: ClassVar[bool] = False
    """Whether the model takes outputs mixed from its latent functions by a matrix W
    (:class:`~gpflow.kernels.LinearCoregionalization`): its sites on each latent function are
    read through W (:func:`~gpflow_fastvi.gaussian.output_marginals`)."""
    _objective_is_bound: ClassVar[bool]
    """Whether :meth:`_objective` is a lower bound on log p(y) (then also ≤ the yardstick at the
    q(u) it stores); ``False`` for a local approximation such as Taylor sites."""
    _mini_batch_closure_advice: ClassVar[Optional[str]] = None
    """What to use instead where an Adam loop over ``training_loss_closure(iter(dataset))`` ends
    short of :func:`gpflow_fastvi.fit` (the figures are in the docs' guarantees page): the
    warning that the first such closure of a model gives (:meth:`_advise_on_closure`)."""

    def __init__(
        self,
        kernel: gpflow.kernels.Kernel,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        inducing_variable: Optional[InducingSpec] = None,
        *,
        mean_function: Optional[gpflow.mean_functions.MeanFunction] = None,
        num_latent_gps: int = 1,
        q_diag: bool = False,
        q_mu: Optional[Any] = None,
        q_sqrt: Optional[Any] = None,
        whiten: bool = True,
        num_data: Optional[int] = None,
        train_inducing: Optional[bool] = None,
    ):
        """
        SVGP's constructor, for a model that takes its data per call.

        :param kernel: a single-output GPflow kernel, shared by the latent functions.
        :param likelihood: a GPflow likelihood the site rule supports (:meth:`_checked_likelihood`);
            ``None`` for the model's default, where it has one.
        :param inducing_variable: a GPflow inducing variable or an array Z [M, D].
        :param num_latent_gps: the number of latent functions: 1, or C for a likelihood of C
            classes the model takes, as in :class:`gpflow.models.SVGP`; taken from ``q_sqrt``'s
            leading axis when it is given, as SVGP takes it.
        :param q_diag: a factorised q(u), as in SVGP: ``q_sqrt`` holds the standard deviations
            [M, L], and every step goes to the optimum of the factorised family (the mean field
            of the full optimum, :func:`~gpflow_fastvi.gaussian.natural.mean_field_sqrt`).
            ``False`` (the default) gives q(u) its full covariance.
        :param q_mu: q(u)'s starting mean [M, L], as in SVGP (zeros by default); the steps start
            from it, as every training route starts from the stored q(u).
        :param q_sqrt: q(u)'s starting covariance factor [L, M, M], lower triangular, as in SVGP
            (identities by default); for ``q_diag=True`` its standard deviations [M, L] (ones).
        :param whiten: store q(u) whitened by chol(Kmm), as :class:`gpflow.models.SVGP` does by
            default.
        :param num_data: the number of training points, as in SVGP: a call with fewer rows is a
            mini-batch (:meth:`training_loss`). ``None`` (the default) takes every call's data to
            be all of it.
        :param train_inducing: whether training moves the inducing inputs with the
            hyperparameters. ``None`` (the default) does what :class:`gpflow.models.SVGP` does:
            inducing inputs given as an array are trained; a GPflow inducing variable keeps its
            own ``trainable`` flags. ``False`` holds them where they start, as the source papers
            do.
        """
        likelihood, latent = self._checked_options(
            kernel, likelihood, inducing_variable, q_diag, num_latent_gps, q_sqrt
        )
        if num_data is not None:
            num_data = positive_int(num_data, "num_data")
        self._build(
            kernel,
            likelihood,
            inducing_variable,
            resolve_inducing_variable(type(self).__name__, inducing_variable, None, 0),
            latent,
            mean_function=mean_function,
            q_diag=q_diag,
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            whiten=whiten,
            num_data=num_data,
            train_inducing=train_inducing,
        )

    def _checked_options(
        self,
        kernel: Any,
        likelihood: Optional[gpflow.likelihoods.Likelihood],
        inducing_variable: Any,
        q_diag: bool,
        num_latent_gps: int,
        q_sqrt: Optional[Any],
    ) -> Tuple[gpflow.likelihoods.Likelihood, int]:
        """
        The constructor's checks of SVGP's options, before anything is built: the kernel, the
        likelihood (the model's default for ``None``), the options the closed-form q(u) cannot
        take, and the number of latent functions (read off ``q_sqrt`` in the layout
        ``q_diag`` gives it, where it is given). Returns the likelihood and that number.
        """
        name = type(self).__name__
        if not isinstance(kernel, gpflow.kernels.Kernel):
            raise TypeError(
                f"{name} takes a GPflow kernel first, as SVGP does; got {type(kernel).__name__}."
            )
        likelihood = self._checked_likelihood(likelihood)
        num_latent_gps = svgp_num_latent_gps(num_latent_gps, q_sqrt, q_diag)
        latent = self._latent_functions(likelihood)
        if latent == 1:  # L independent outputs, Y [N, L], as SVGP takes them
            latent = positive_int(num_latent_gps, "num_latent_gps")
        check_svgp_options(name, kernel, inducing_variable, latent, self._mixed_outputs)
        check_latent_functions(name, likelihood, num_latent_gps, latent)
        if mixing(kernel) is not None and isinstance(likelihood, self._multi_class_likelihoods):
            raise UnsupportedConfigurationError(
                f"{name} takes LinearCoregionalization with a likelihood of one output per "
                f"column of Y, not {type(likelihood).__name__}'s classes: give a kernel per "
                "class in SeparateIndependent."
            )
        return likelihood, latent

    def _build(
        self,
        kernel: gpflow.kernels.Kernel,
        likelihood: gpflow.likelihoods.Likelihood,
        given: Any,
        inducing_variable: gpflow.inducing_variables.InducingVariables,
        latent: int,
        *,
        mean_function: Optional[gpflow.mean_functions.MeanFunction],
        q_diag: bool,
        q_mu: Optional[Any],
        q_sqrt: Optional[Any],
        whiten: bool,
        num_data: Optional[int],
        train_inducing: Optional[bool],
        full: bool = False,
    ) -> None:
        """
        SVGP's variables, with q(u) where SVGP's would start (``given`` is the inducing variable
        as the caller gave it; ``full`` for Z = X), held out of the gradients; then the parts.
        """
        if mixing(kernel) is not None and not isinstance(
            mean_function, (type(None), gpflow.mean_functions.Zero)
        ):
            raise UnsupportedConfigurationError(
                f"{type(self).__name__} takes LinearCoregionalization without a mean function: "
                "the sites are read through W on the latent functions, and a mean of the "
                "outputs has no latent function to go to. Subtract it from Y."
            )
        initial_mu, initial_sqrt = svgp_initial_q(
            q_mu, q_sqrt, int(inducing_variable.num_inducing), latent, q_diag
        )
        SVGP.__init__(
            self,
            kernel,
            likelihood,
            inducing_variable,
            mean_function=mean_function,
            num_latent_gps=latent,
            q_diag=q_diag,
            q_mu=initial_mu,
            q_sqrt=initial_sqrt,
            whiten=whiten,
            num_data=num_data,
        )
        set_trainable(self.q_mu, False)  # the steps set q(u), never a gradient
        set_trainable(self.q_sqrt, False)
        set_inducing_trainable(
            self.inducing_variable,
            train_inducing,
            given_as_variable=isinstance(given, gpflow.inducing_variables.InducingVariables),
            full=full,
        )
        self._attach_parts()

    @classmethod
    @abc.abstractmethod
    def _checked_likelihood(
        cls, likelihood: Optional[gpflow.likelihoods.Likelihood]
    ) -> gpflow.likelihoods.Likelihood:
        """
        ``likelihood`` if the site rule supports it (the model's default for ``None``); else an
        :class:`~gpflow_fastvi.exceptions.IncompatibleLikelihoodError` that says what to use.
        """

    @classmethod
    def _latent_functions(cls, likelihood: gpflow.likelihoods.Likelihood) -> int:
        """The number of latent functions the model needs for ``likelihood``: its C classes for
        one of :attr:`_multi_class_likelihoods`, else 1."""
        if isinstance(likelihood, cls._multi_class_likelihoods):
            return int(likelihood.num_classes)
        return 1

    @classmethod
    def _columns_of_Y(
        cls, likelihood: gpflow.likelihoods.Likelihood, latent: int, kernel: gpflow.kernels.Kernel
    ) -> int:
        """The columns of Y for ``likelihood`` with ``latent`` latent functions: one, the class,
        for a likelihood of C classes; one per output P of a kernel that mixes the latent
        functions into P outputs (:func:`~gpflow_fastvi.gaussian.mixing`); else one per latent
        function, an output each."""
        if isinstance(likelihood, cls._multi_class_likelihoods):
            return 1
        W = mixing(kernel)
        return latent if W is None else int(W.shape[0])

    @property
    def _target_columns(self) -> int:
        """The columns of the model's targets Y (:meth:`_columns_of_Y`), as the data are checked."""
        return self._columns_of_Y(self.likelihood, self.num_latent_gps, self.kernel)

    def _default_method(self) -> str:
        """
        The route ``fit`` takes for this model when no ``method`` is given: ``default_route``,
        unless the model's configuration can be trained by one route only.
        """
        return self.default_route

    def training_loss_closure(
        self, data: Any = None, *, compile: bool = True
    ) -> Callable[[], tf.Tensor]:
        """
        ``training_loss`` as a closure for GPflow's optimisers, as
        :meth:`gpflow.models.SVGP.training_loss_closure` builds it: ``data`` is all the data,
        ``(X, Y)`` (checked and converted once, here, by :meth:`_closure_data`) or what the model
        accepts for them, or an iterator of mini-batches (a new batch at every call, one trace
        for all of a ``tf.data`` iterator's batches). A model whose mini-batch loop ends short of
        ``fit`` says so at its first such closure (:meth:`_advise_on_closure`).

        Compiled without AutoGraph: the models' control flow is written with ``tf.cond`` and
        ``tf.while_loop`` already, and AutoGraph's conversion of every function the loss calls
        would only lengthen the first call.
        """
        self._advise_on_closure(data)
        if _is_all_the_data(data):
            fixed = self._closure_data(data)

            def closure() -> tf.Tensor:
                return self.training_loss(fixed)

            return tf.function(closure, autograph=False) if compile else closure
        batches = data

        def batch_loss(batch: Any) -> tf.Tensor:
            with self._passes.iterator_batches():  # each batch a mini-batch, whatever its rows
                return self.training_loss(batch)

        if not compile:
            return lambda: batch_loss(next(batches))
        spec = getattr(batches, "element_spec", None)  # a tf.data iterator: one trace for all
        step = tf.function(
            batch_loss, input_signature=None if spec is None else [spec], autograph=False
        )
        return lambda: step(next(batches))

    @abc.abstractmethod
    def _closure_data(self, data: Any) -> Any:
        """All the data a closure of :meth:`training_loss_closure` works on, checked once."""

    @check_shapes("return: []")
    @abc.abstractmethod
    def training_loss(self, data: Any = None) -> tf.Tensor:
        """−(:meth:`_objective` + log prior density) after the method's own step on q(u)."""

    def _advise_on_closure(self, data: Any) -> None:
        """
        Warn, at the first closure of this model whose loop is known to end short of ``fit``
        (:meth:`_closure_advice`), with what to use instead.
        """
        advice = self._closure_advice(_is_all_the_data(data))
        if advice and not getattr(self, "_advised", False):
            self._advised = True
            warnings.warn(advice, UserWarning, stacklevel=3)

    def _closure_advice(self, all_the_data: bool) -> Optional[str]:
        """
        The warning a closure over all the data (``gpflow.optimizers.Scipy``) or over an
        iterator of mini-batches gives, or ``None``: by default :attr:`_mini_batch_closure_advice`
        for mini-batches, and nothing for all the data, which trains the model by its method.
        """
        return None if all_the_data else self._mini_batch_closure_advice

    # ----------------------------------------------------------------------------------------------
    # What each model provides.

    @abc.abstractmethod
    @check_shapes(*MARGINALS, *SITES)
    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """
        The sites (a, b, w) on f of the points (X, Y) whose local parameters (ξ, c, the tilted
        q(fₙ)) are optimal for the marginals q(f) = N(Fmu, Fvar) of the current q(u).
        """

    @abc.abstractmethod
    def update_sites(
        self, num_updates: int = 1, *, data: Optional[RegressionData] = None
    ) -> tf.Tensor:
        """
        Move the sites and q(u) to their joint optimum for the current hyperparameters by
        ``num_updates`` closed-form steps over all the data; return :meth:`_objective` after them.
        """

    @abc.abstractmethod
    def _objective(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """The method's own objective (to be maximised) at the current state."""

    @inherit_check_shapes
    def maximum_log_likelihood_objective(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        The method's own objective at the stored state, to be maximised (GPflow's name for it):
        the bound or approximation that :meth:`training_loss` negates, without its steps on
        q(u) (the table of :mod:`gpflow_fastvi.models.base`). Assigns nothing.
        """
        return self._objective(data)

    def _attach_parts(self) -> None:
        """
        Build the parts the model is composed of, once its variables exist: its passes over the
        data (``self._passes``, which also records the ``tf.distribute`` strategy whose scope the
        model is built in, if any) and the frame of its q(u) (``self._q_frame``).
        """
        self._passes = DataPasses(self)
        self._q_frame = QFrame(self)
        # Decided once, eagerly: the link is checked numerically, which a traced elbo() cannot do.
        self._logit_bernoulli = is_logit_bernoulli(self.likelihood)

    # ----------------------------------------------------------------------------------------------
    # Shared by every model: q(u) in the whitened frame, the natural-gradient step, the devices.

    @property
    def _q_diag(self) -> bool:
        """Whether q(u) is factorised (``q_diag=True``), read off ``q_sqrt``'s layout as GPflow
        reads it: standard deviations [M, L] rather than square roots [L, M, M]."""
        return len(self.q_sqrt.shape) == 2

    def _whitened(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor, L: tf.Tensor) -> WhitenedQ:
        """GPflow's ``(q_mu [M, L], q_sqrt)`` (``q_sqrt`` [L, M, M], or [M, L] for ``q_diag``) as
        q(v_l) = N(m_l, R_l R_lᵀ) in the frame whitened by L = chol(Kmm)
        (:func:`~gpflow_fastvi.gaussian.natural.whitened_q`)."""
        if self._q_diag:
            q_sqrt = diagonal_q_sqrt(q_sqrt)
        return whitened_q(q_mu, q_sqrt, L, self.whiten)

    def _stored(self, q: WhitenedQ, L: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        q(v), whitened by L, as the model stores it (:func:`~gpflow_fastvi.gaussian.natural.stored_q`);
        for ``q_diag=True`` the factorised Gaussian in the stored frame closest to it
        (:func:`~gpflow_fastvi.gaussian.natural.mean_field_sqrt`), which for q the optimum of
        Gaussian sites is their optimum in the model's family. Every step stores q(u) by this.
        """
        q_mu, q_sqrt = stored_q(q, L, self.whiten)
        if self._q_diag:
            return q_mu, mean_field_sqrt(q_sqrt)
        return q_mu, q_sqrt

    def _in_family(self, q: WhitenedQ, L: tf.Tensor) -> WhitenedQ:
        """q(v) itself, or for ``q_diag=True`` the q(v) that :meth:`_stored` keeps of it: what a
        step that goes on from q reads."""
        if not self._q_diag:
            return q
        return self._whitened(*self._stored(q, L), L)

    def _with_q_gradient(self, loss: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> tf.Tensor:
        """
        ``loss``, whose value is unchanged, carrying in the variables ``q_mu`` and ``q_sqrt`` the
        gradient of KL[q(u) ‖ N(``q_mu``, ``q_sqrt`` ``q_sqrt``ᵀ)] (given in SVGP's stored
        form): what a full-data ``training_loss`` adds for the q(u) its steps reached, so that
        GPflow's recipe of ``NaturalGradient`` on ``(q_mu, q_sqrt)`` alternating with Adam runs.
        For sites whose optimum is that q(u) the KL is the gap between their collapsed bound and
        their ELBO at the stored q(u) (:func:`~gpflow_fastvi.gaussian.natural.kl_between`), so
        this is the gradient of the uncollapsed objective in q(u): zero where the evaluation
        stored the q(u) it reached, as it does unless a line search's trial point was worse.
        Read after the step's assignment; no gradient in the hyperparameters.
        """
        L = tf.stop_gradient(self._passes.Kmm_cholesky())
        with tf.control_dependencies([loss]):
            now = self._whitened(self.q_mu, self.q_sqrt, L)
        reached = WhitenedQ(*(tf.stop_gradient(t) for t in self._whitened(q_mu, q_sqrt, L)))
        gap = kl_between(now, reached)
        return loss + (gap - tf.stop_gradient(gap))

    def _start_frame_here(self) -> None:
        """
        Record the current hyperparameters as those the stored q(u) was set at: until q(u) is
        next stored, its sites are read here, whatever trial hyperparameters an optimiser tries
        (:meth:`QFrame.start_here <gpflow_fastvi.models.q_frame.QFrame.start_here>`).
        """
        self._q_frame.start_here()

    def natural_gradient_step(self, data: RegressionData, rho: Any) -> tf.Tensor:
        """
        One stochastic variational step of size ``rho`` on the batch ``data`` = (X, Y): q(u)
        moves towards the batch's closed-form optimum and is stored; returns the batch's estimate
        of the sites' ELBO at the new q(u), differentiable in the hyperparameters
        (:func:`~gpflow_fastvi.models.natural_step.natural_gradient_step`).
        """
        return natural_step.natural_gradient_step(self, data, rho)

    def _mini_batch_loss_step(self, data: RegressionData) -> tf.Tensor:
        """The loss of a mini-batch ``training_loss`` after its step on q(u)
        (:func:`~gpflow_fastvi.models.natural_step._mini_batch_loss_step`)."""
        return natural_step._mini_batch_loss_step(self, data)

    # ----------------------------------------------------------------------------------------------
    # SVGP's ELBO and KL, with the factor of Kmm that training uses.

    @inherit_check_shapes
    def elbo(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        The standard SVGP ELBO at the model's current q(u): Σᵢ E_q[log p(yᵢ | fᵢ)] − KL[q(u) ‖ p(u)],
        the expectations by the likelihood's own (Gauss–Hermite) quadrature, the sum scaled by
        ``num_data`` / rows for a mini-batch as SVGP scales it. This is the yardstick to compare
        with :class:`gpflow.models.SVGP`; for VIJJ it is ≥ the bound. Models change the
        likelihood term through :meth:`_expected_log_likelihood`.
        """
        return self._variational_bound(self._expected_log_likelihood, data)

    def _variational_bound(
        self,
        expected_log_likelihood: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
        data: Optional[RegressionData] = None,
    ) -> tf.Tensor:
        """
        ``expected_log_likelihood``(X, Y), a sum over the points at the model's q(f), minus
        KL[q(u) ‖ p(u)], the sum scaled by ``num_data`` / rows for a mini-batch: :meth:`elbo`
        with the likelihood's expectation, or a model's bound with a bound on it.
        """
        data = self._passes.training_data(data)
        var_exp = self._passes.sum_over_data(expected_log_likelihood, data, (), self.batch_size)
        scale = 1.0 if isinstance(data, tf.data.Dataset) else self._passes.data_scale(data[0])
        return scale * var_exp - self.prior_kl()

    @inherit_check_shapes
    def prior_kl(self) -> tf.Tensor:
        """
        KL[q(u) ‖ p(u)] at the model's q(u), the term :meth:`elbo` subtracts (SVGP's name for
        it), with the factor of Kmm that training uses.
        """
        return kl_to_prior(self._whitened(self.q_mu, self.q_sqrt, self._passes.Kmm_cholesky()))

    def _expected_log_likelihood(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        """Σᵢ E_q[log p(yᵢ | fᵢ)] over the points (X, Y) at the model's q(f)."""
        return tf.reduce_sum(self._expected_log_density(X, Y, *self._predict_f_at(X)))

    def _expected_log_density(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> tf.Tensor:
        """
        E_{N(fᵢ | Fmu, Fvar)}[log p(yᵢ | fᵢ)] [N], by the likelihood's own quadrature (closed form
        where GPflow has one; for the logit Bernoulli the same Gauss–Hermite rule on
        :func:`logit_log_prob`, finite everywhere; for GPflow's Softmax, whose own estimate
        draws new samples at every call, :func:`expected_log_softmax`).
        """
        if isinstance(self.likelihood, gpflow.likelihoods.Softmax):
            # The labels were checked where the data entered the model's call.
            return expected_log_softmax(Fmu, Fvar, Y, labels_checked=True)
        if not self._logit_bernoulli:
            return self.likelihood.variational_expectations(
                X, Fmu, Fvar, self._likelihood_targets(Y)
            )
        return tf.reduce_sum(self.likelihood.quadrature(logit_log_prob, Fmu, Fvar, Y=Y), axis=-1)

    def _expected_latent_density(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> tf.Tensor:
        """:meth:`_expected_log_density` [N] at the marginals of the latent functions, through the
        outputs they make (:func:`~gpflow_fastvi.gaussian.output_marginals`; the same where each
        output is a latent function)."""
        return self._expected_log_density(X, Y, *output_marginals(self.kernel, Fmu, Fvar))

    # ----------------------------------------------------------------------------------------------
    # Predictions, as gpflow.models.SVGP makes them.

    @inherit_check_shapes
    def predict_f(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """
        The mean and variance of f at ``Xnew`` under q(u), as :meth:`gpflow.models.SVGP.predict_f`
        gives them, from the same factor L = chol(Kmm + jitter) as training
        (:meth:`~gpflow_fastvi.models.passes.DataPasses.Kmm_cholesky`: where GPflow's fixed jitter is not enough, the jitter training
        escalated to). ``Xnew`` is checked and converted as training inputs are: any real
        array-like with the inducing inputs' columns, finite.
        """
        Xnew = checked_inputs(Xnew, self.inducing_variable)
        return self._predict_f_at(Xnew, full_cov, full_output_cov)

    def _predict_f_at(
        self, Xnew: tf.Tensor, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """:meth:`predict_f` at inputs already checked (training data, test data)."""
        L = self._passes.Kmm_cholesky()
        q = self._whitened(self.q_mu, self.q_sqrt, L)
        projection = self._passes.projection(Xnew, L)
        Gmu, var = marginals(projection.A, projection.Ktilde_diag, q)  # [N, L] each
        cov = None
        if full_cov:
            kernel, _ = single_output_parts(self.kernel, self.inducing_variable)
            Knn = prior_covariance(kernel, Xnew)  # [N, N], or [L, N, N] separate
            cov = marginal_covariance(projection.A, Knn, q.R)  # [L, N, N]
        W = mixing(self.kernel)
        if W is not None:  # outputs f = W g; a mean function is refused with them
            mean = tf.matmul(Gmu, W, transpose_b=True)
            return mean, mixed_covariance(var, cov, W, full_cov, full_output_cov)
        mean = Gmu + self.mean_function(Xnew)
        if cov is not None:
            if not full_output_cov:
                return mean, cov
            # Independent latent functions: [N, L, N, L], zero between two of them.
            eye = tf.eye(self.num_latent_gps, dtype=cov.dtype)
            return mean, tf.einsum("lnm,lk->nlmk", cov, eye)
        return mean, (tf.linalg.diag(var) if full_output_cov else var)  # [N, L, L] or [N, L]

    def _observed_f_at(self, Xnew: tf.Tensor) -> MeanAndVariance:
        """
        The marginals [N, P] of the f the likelihood sees at checked inputs, which
        :meth:`predict_y` and :meth:`predict_log_density` integrate over: :meth:`predict_f`'s,
        unless a model puts noise between its GP and its likelihood
        (:class:`~gpflow_fastvi.KLCorrected`'s f = f̄ + ε).
        """
        return self._predict_f_at(Xnew)

    @inherit_check_shapes
    def predict_y(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """The mean and variance of y at ``Xnew``, as GPflow gives them; ``Xnew`` checked as in :meth:`predict_f`."""
        only_marginals(full_cov, full_output_cov, "predict_y")
        Xnew = checked_inputs(Xnew, self.inducing_variable)
        f_mean, f_var = self._observed_f_at(Xnew)
        return self.likelihood.predict_mean_and_var(Xnew, f_mean, f_var)

    @inherit_check_shapes
    def predict_log_density(
        self, data: RegressionData, full_cov: bool = False, full_output_cov: bool = False
    ) -> tf.Tensor:
        """
        log ∫ p(y* | f*) q(f*) df* at test points, as GPflow gives it; the points are checked as
        training data are (:meth:`~gpflow_fastvi.models.passes.DataPasses.checked_data`: labels outside the likelihood's support are an
        error, not a score).
        """
        only_marginals(full_cov, full_output_cov, "predict_log_density")
        X, Y = self._passes.checked_data(data)
        f_mean, f_var = self._observed_f_at(X)
        return self.likelihood.predict_log_density(X, f_mean, f_var, self._likelihood_targets(Y))

    def _likelihood_targets(self, Y: tf.Tensor) -> tf.Tensor:
        """Checked targets Y (floats) as the likelihood's own methods take them: integer classes
        for GPflow's :class:`~gpflow.likelihoods.Softmax`, whose kernel refuses floats."""
        if isinstance(self.likelihood, gpflow.likelihoods.Softmax):
            return tf.cast(Y, tf.int64)
        return Y

    # ----------------------------------------------------------------------------------------------
    # Where the inducing inputs are: greedy selection weighted by the sites, and moving them.

    def _site_precisions(self, data: Optional[RegressionData] = None) -> np.ndarray:
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
        X, Y = self._passes.checked_data(data)
        Fmu, Fvar = self._predict_f_at(X)
        return tf.reduce_sum(self.local_sites(X, Y, Fmu, Fvar).w, axis=1).numpy()

    def _move_inducing_inputs(self, Z: Any) -> None:
        """
        Put the inducing inputs at ``Z`` [M, D] (as many as now) and q(u) at the current posterior
        of f there, q(f(Z)), for each latent function: the model keeps what it has learnt, as far
        as the new inputs can carry it, and a closed-form step starts from there.
        """
        kernel, points = single_output_parts(self.kernel, self.inducing_variable)
        Z_old = points.Z
        Z = tf.constant(inducing_inputs(Z), dtype=Z_old.dtype)
        if Z.shape != Z_old.shape:
            raise InvalidDataError(
                f"Moving the inducing inputs keeps their number and columns, {list(Z_old.shape)}; "
                f"got {list(Z.shape)}."
            )
        L = self._passes.Kmm_cholesky()
        q = self._whitened(self.q_mu, self.q_sqrt, L)
        projection = self._passes.projection(Z, L)
        Gmu, _ = marginals(projection.A, projection.Ktilde_diag, q)  # [M, L]
        covariance = marginal_covariance(projection.A, kernel(Z), q.R)  # [L, M, M]
        Z_old.assign(Z)
        L = self._passes.Kmm_cholesky()
        m = tf.linalg.triangular_solve(L, Gmu, lower=True)
        LinvS = tf.linalg.triangular_solve(L, covariance, lower=True)
        S = tf.linalg.triangular_solve(L, tf.linalg.matrix_transpose(LinvS), lower=True)
        S = 0.5 * (S + tf.linalg.matrix_transpose(S))  # L⁻¹ Σ_l L⁻ᵀ, symmetric to rounding
        R = robust_cholesky(S, what="q(u) at the new inducing inputs")
        self._q_frame.store(*self._stored(WhitenedQ(m=m, R=R), L))
