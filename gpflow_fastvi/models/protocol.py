"""
The protocols every model of the package offers, and what its training drivers may call.

In the spirit of Markovflow's ``update_sites()``: the sites are the model's business, the step
that moves them is a model method, and the method's own objective sits beside the reference ELBO.

:class:`SiteModel` is the protocol of every model, whatever its family:

=====================================  =========================================================
what                                   member
=====================================  =========================================================
the sites for the current q(u)         :meth:`~SiteModel.local_sites` (X, Y, q(f)) ↦ Sites
a step towards the sites' optimum      :meth:`~SiteModel.update_sites` (closed form, full data);
                                       :meth:`~SiteModel.natural_gradient_step` (size ρ, a batch)
the method's own objective             :meth:`~SiteModel.objective`
the SVGP yardstick                     :meth:`~SiteModel.yardstick_elbo`
the devices its passes are shared by   :meth:`~SiteModel.distributed_by` (``tf.distribute``)
how the model is trained               ``training_routes`` and ``default_route`` (data, read by
                                       :func:`gpflow_fastvi.fit`)
=====================================  =========================================================

:class:`ClosedFormSiteModel` is what the family with a closed-form step adds: the members the
persistent and alternating drivers call (:mod:`gpflow_fastvi.training`), and the site rule a
subclass writes. The SVI driver serves every :class:`SiteModel`; the persistent and alternating
drivers serve :class:`ClosedFormSiteModel` only.

Both declare the attributes their host, a GPflow model, has (``kernel``, ``likelihood``,
``inducing_variable``, ``mean_function``, ``q_mu``, ``q_sqrt``, ``whiten``, ``num_data``, each
meaning what it means in :class:`gpflow.models.SVGP`), so that the shared implementation
(:mod:`~gpflow_fastvi.models.passes`, :mod:`~gpflow_fastvi.models.q_frame`,
:mod:`~gpflow_fastvi.models.predictions`, :mod:`~gpflow_fastvi.models.natural_step`,
:mod:`~gpflow_fastvi.models.closed_form`) is checked against them.
"""

import abc
import warnings
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional, Sequence, Tuple, Union

import gpflow
import tensorflow as tf
from gpflow.base import RegressionData

from ..types import Route, Sites, SteppedSites

Data = Union[Tuple[tf.Tensor, tf.Tensor], tf.data.Dataset]
"""The data of a call once checked: ``(X, Y)`` tensors, or a ``tf.data.Dataset`` of ``(X, Y)``
batches streamed once per pass."""

SiteParameters = Tuple[tf.Tensor, ...]
"""The local parameters of a set of points' sites, each [N, 1] (ξ for Jaakkola–Jordan)."""


def _is_all_the_data(data: Any) -> bool:
    """Whether a closure's ``data`` are all the data (``None`` for the data the model holds, a
    tuple, a ``tf.data.Dataset``) rather than an iterator of mini-batches."""
    return data is None or isinstance(data, (tuple, list, tf.data.Dataset))


class SiteModel(abc.ABC):
    """
    The protocol of the module docstring. The host class is a GPflow model; the attributes below
    are its own (set by its constructor, or by :class:`gpflow.models.SVGP`'s).
    """

    kernel: gpflow.kernels.Kernel
    likelihood: gpflow.likelihoods.Likelihood
    inducing_variable: gpflow.inducing_variables.InducingPoints
    mean_function: gpflow.mean_functions.MeanFunction
    q_mu: gpflow.Parameter
    q_sqrt: gpflow.Parameter
    whiten: bool
    num_latent_gps: int
    """The number of latent functions: 1, or C for a likelihood of C classes."""
    num_data: Any
    """The number of training points (an int, a scalar tensor or variable), or ``None``."""

    if TYPE_CHECKING:  # the host's GPflow module members, declared for the type checker only:
        # defined here, they would come before the host's in the method resolution order.

        @property
        def trainable_variables(self) -> Sequence[tf.Variable]: ...

        @property
        def trainable_parameters(self) -> Tuple[gpflow.Parameter, ...]: ...

        def log_prior_density(self) -> tf.Tensor: ...

    training_routes: ClassVar[Mapping[str, Route]]
    """The ways :func:`gpflow_fastvi.fit` can train the model, by name."""
    default_route: ClassVar[str]
    """The route ``fit`` takes when no ``method`` is given (:meth:`default_method`)."""
    multi_class_likelihoods: ClassVar[Tuple[type, ...]] = ()
    """The likelihoods of C classes the model takes, with C latent functions (none unless the
    model says so)."""
    objective_is_bound: ClassVar[bool]
    """Whether :meth:`objective` is a lower bound on log p(y) (then also ≤ the yardstick at the
    q(u) it stores); ``False`` for a local approximation such as Taylor sites."""
    mini_batch_closure_shortfall: ClassVar[Optional[str]] = None
    """Where an Adam loop over ``training_loss_closure(iter(dataset))`` was measured to end short
    of :func:`gpflow_fastvi.fit`, what was measured and what to use instead: the warning that
    building such a closure gives (:meth:`warn_if_closure_falls_short`)."""
    full_data_closure_shortfall: ClassVar[Optional[str]] = None
    """The same for ``gpflow.optimizers.Scipy`` on ``training_loss_closure((X, Y))`` (or on the
    data the model holds, or a ``tf.data.Dataset``)."""

    def default_method(self) -> str:
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
        ``(X, Y)`` (checked and converted once, here, by :meth:`closure_data`) or what the model
        accepts for them, or an iterator of mini-batches (a new batch at every call, one trace
        for all of a ``tf.data`` iterator's batches). A model whose loop on such a closure was
        measured to end short of ``fit`` says so when the closure is built
        (:meth:`warn_if_closure_falls_short`).

        Compiled without AutoGraph: the models' control flow is written with ``tf.cond`` and
        ``tf.while_loop``, and AutoGraph's conversion of every function the loss calls cost
        8 to 30 seconds at the first call.
        """
        self.warn_if_closure_falls_short(data)
        if _is_all_the_data(data):
            fixed = self.closure_data(data)

            def closure() -> tf.Tensor:
                return self.training_loss(fixed)

            return tf.function(closure, autograph=False) if compile else closure
        batches = data
        if not compile:
            return lambda: self.training_loss(next(batches))
        spec = getattr(batches, "element_spec", None)  # a tf.data iterator: one trace for all
        step = tf.function(
            self.training_loss, input_signature=None if spec is None else [spec], autograph=False
        )
        return lambda: step(next(batches))

    @abc.abstractmethod
    def closure_data(self, data: Any) -> Any:
        """All the data a closure of :meth:`training_loss_closure` works on, checked once."""

    @abc.abstractmethod
    def training_loss(self, data: Any = None) -> tf.Tensor:
        """−(:meth:`objective` + log prior density) after the method's own step on q(u)."""

    def warn_if_closure_falls_short(self, data: Any) -> None:
        """
        Warn, once per closure, when this model's closure on ``data`` (all the data, or an
        iterator of mini-batches) is known to end short of ``fit``
        (:attr:`full_data_closure_shortfall`, :attr:`mini_batch_closure_shortfall`).
        """
        shortfall = (
            self.full_data_closure_shortfall
            if _is_all_the_data(data)
            else self.mini_batch_closure_shortfall
        )
        if shortfall:
            warnings.warn(shortfall, UserWarning, stacklevel=3)

    # ----------------------------------------------------------------------------------------------
    # What each model provides.

    @abc.abstractmethod
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
        ``num_updates`` closed-form steps over all the data; return :meth:`objective` after them.
        """

    @abc.abstractmethod
    def objective(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """The method's own objective (to be maximised) at the current state."""

    @abc.abstractmethod
    def yardstick_elbo(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        The standard SVGP ELBO Σᵢ E_q[log p(yᵢ | fᵢ)] − KL[q(u) ‖ p(u)] at the stored q(u), the
        expectations by quadrature: the number to compare with :class:`gpflow.models.SVGP`.
        """

    # ----------------------------------------------------------------------------------------------
    # Shared by every model (the natural-gradient step, the strategy, the host's GPflow members).

    @abc.abstractmethod
    def natural_gradient_step(self, data: RegressionData, rho: Any) -> tf.Tensor:
        """
        One stochastic variational step of size ``rho`` on the batch ``data`` = (X, Y): q(u)
        moves towards the batch's closed-form optimum and is stored; returns the batch's estimate
        of the sites' ELBO at the new q(u), differentiable in the hyperparameters
        (:meth:`~gpflow_fastvi.models.natural_step.NaturalGradientStep.natural_gradient_step`).
        """

    @abc.abstractmethod
    def distributed_by(self, strategy: Optional[tf.distribute.Strategy]) -> Any:
        """A context within which the model's passes are shared among the replicas of
        ``strategy`` (:meth:`~gpflow_fastvi.models.passes.DataPasses.distributed_by`)."""


class ClosedFormSiteModel(SiteModel):
    """
    What the models with a closed-form site step add to :class:`SiteModel`: the members the
    persistent and alternating drivers call, and the site rule a subclass writes
    (:class:`~gpflow_fastvi.models.base.GaussianSitesModel` implements the rest).
    """

    steps_from_site_parameters: ClassVar[bool] = True
    """Whether :meth:`stepped_sites` can start from given local site parameters, which a training
    loop then keeps between evaluations (the persistent route, in memory); ``False`` for a model
    whose step starts from q(u) itself (:class:`~gpflow_fastvi.VIConcave`, whose step is measured
    against the ELBO of the q(u) it leaves)."""

    # ----------------------------------------------------------------------------------------------
    # The site rule, which a subclass writes.

    @abc.abstractmethod
    def optimal_site_parameters(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> SiteParameters:
        """The local site parameters that are optimal for q(f) = N(Fmu, Fvar) at the points X."""

    @abc.abstractmethod
    def site_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """Sites (a, b, w) on f at inputs X with targets Y for the given local parameters."""

    def step_rule(self, X: tf.Tensor, Y: tf.Tensor, *site_parameters: tf.Tensor) -> Sites:
        """
        The sites whose optimal q(u) a closed-form step goes through when further steps follow
        it. By default the model's own sites (:meth:`site_rule`): the step is then coordinate
        ascent, as for VIJJ's ξ and VITaylor's expansion points. A model may step through other
        sites with the same fixed point (:class:`~gpflow_fastvi.KLCorrected`'s Newton E-step).
        """
        return self.site_rule(X, Y, *site_parameters)

    def local_sites(self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor) -> Sites:
        """The site rule at the local parameters that are optimal for q(f) = N(Fmu, Fvar)."""
        return self.site_rule(X, Y, *self.optimal_site_parameters(X, Y, Fmu, Fvar))

    @abc.abstractmethod
    def expected_log_density(
        self, X: tf.Tensor, Y: tf.Tensor, Fmu: tf.Tensor, Fvar: tf.Tensor
    ) -> tf.Tensor:
        """E_{N(fᵢ | Fmu, Fvar)}[log p(yᵢ | fᵢ)] [N], as :meth:`yardstick_elbo` sums it."""

    # ----------------------------------------------------------------------------------------------
    # What the persistent and alternating drivers call.

    @abc.abstractmethod
    def training_data(self, data: Any = None) -> Data:
        """The data a call works on, checked: ``data``, or the data the model holds for ``None``."""

    @abc.abstractmethod
    def projects_all_at_once(self, data: Data) -> bool:
        """Whether a step projects all of ``data`` at once and keeps the projection for its
        passes (arrays, no batches, no strategy sharing the passes)."""

    @abc.abstractmethod
    def stepped_sites(
        self,
        num_updates: int,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> SteppedSites:
        """``num_updates`` closed-form site steps from the stored q(u), assigning nothing: the
        objective after them and the q(u) they reach, for an optimiser's trial point."""

    @abc.abstractmethod
    def adopt(self, stepped: SteppedSites) -> None:
        """Make the q(u) of :meth:`stepped_sites` the model's own."""

    @abc.abstractmethod
    def site_parameters(self, data: Optional[RegressionData] = None) -> SiteParameters:
        """The sites' local parameters for the stored q(u), each [N, 1]: what the alternating
        schemes hold fixed while L-BFGS-B moves θ."""

    @abc.abstractmethod
    def update_q(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """Set q(u) to the closed-form optimum for the sites with the given local parameters (or
        read off the stored q(u)); return their collapsed bound."""

    @abc.abstractmethod
    def objective(
        self,
        data: Optional[RegressionData] = None,
        site_parameters: Optional[SiteParameters] = None,
    ) -> tf.Tensor:
        """The method's own objective, of the sites read off the stored q(u) or of the sites with
        the given local parameters. Assigns nothing."""

    @abc.abstractmethod
    def start_frame_here(self) -> None:
        """From now until q(u) is next stored, read the sites of the stored q(u) at the current
        hyperparameters, whatever trial hyperparameters follow
        (:meth:`~gpflow_fastvi.models.q_frame.QStorage.start_frame_here`)."""
