"""
The four small records of the package: :class:`Sites` and :class:`SiteStatistics`, which every
model passes through the shared Gaussian algebra; :class:`SteppedSites`, the outcome of
closed-form steps that an optimiser evaluates before it adopts them; and :class:`Route`, one way
to train a model, declared by the model and run by :func:`gpflow_fastvi.fit`.

A *site* is a quadratic in the latent function value that stands in for one data point's
log-likelihood, :math:`\\log p(y_i \\mid f_i) \\ge (\\text{or} \\approx)\\; a_i + b_i f_i - \\tfrac12 w_i f_i^2`.
Site rules (:mod:`gpflow_fastvi.sites`) produce :class:`Sites`; the Gaussian algebra
(:mod:`gpflow_fastvi.gaussian`) turns them into :class:`SiteStatistics` and from there into the optimal
q(u) and the collapsed bound.
"""

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple, Optional, Tuple, Union

import tensorflow as tf

Data = Union[Tuple[tf.Tensor, tf.Tensor], tf.data.Dataset]
"""The data of a call once checked: ``(X, Y)`` tensors, or a ``tf.data.Dataset`` of ``(X, Y)``
batches streamed once per pass."""

SiteParameters = Tuple[tf.Tensor, ...]
"""The local parameters of a set of points' sites, each [N, L] (ξ for Jaakkola–Jordan)."""


class CheckedData(NamedTuple):
    """
    Training data (X [N, D], Y [N, 1]) as tensors, checked once where they entered a call of the
    model (``fit``, a GPflow closure, a model method) and converted to the likelihood's
    convention: every call below takes them as they are, without checking them again.
    """

    X: tf.Tensor
    Y: tf.Tensor


class Sites(NamedTuple):
    """Coefficients of the Gaussian sites a + b f − w f²/2, one per data point and latent function,
    each of shape [N, L] (L = 1 but for a likelihood of several latent functions)."""

    a: tf.Tensor
    """Constant term aᵢ (it carries the bound's dependence on the site parameters)."""
    b: tf.Tensor
    """Linear coefficient bᵢ (a precision-weighted pseudo-target)."""
    w: tf.Tensor
    """Curvature wᵢ > 0 (a pseudo-observation precision)."""


class SiteStatistics(NamedTuple):
    """
    Sums over data points that are all the collapsed algebra needs, expressed in the frame whitened
    by L = chol(Kmm), i.e. with A = L⁻¹ Kmn.

    Every field is a sum over points, so statistics of disjoint batches add up
    (:func:`gpflow_fastvi.gaussian.statistics.statistics_from_projection`).
    """

    AWAt: tf.Tensor
    """A W_l Aᵀ = L⁻¹ (Kmn W_l Knm) L⁻ᵀ of each latent function l, shape [L, M, M]."""
    Ab: tf.Tensor
    """A b_l = L⁻¹ Kmn b_l of each latent function as a column, shape [M, L]."""
    sum_a: tf.Tensor
    """Σᵢ Σ_l a_il, a scalar."""
    trace: tf.Tensor
    """Σᵢ Σ_l w_il (Knn,ᵢᵢ − Qnn,ᵢᵢ): the sites' weight on what u cannot explain, a scalar."""


class SteppedSites(NamedTuple):
    """
    The outcome of some closed-form site steps from a model's q(u): the objective of the last
    sites read and the q(u) that is optimal for them; what an optimiser evaluates at a trial θ and
    makes the model's own at an accepted one
    (:meth:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel._stepped_sites`).
    """

    objective: tf.Tensor
    """The objective of the last sites read, a scalar (its gradient holds their local parameters fixed)."""
    q_mu: tf.Tensor
    """The optimal q(u)'s mean for them, [M, L], stored as the model stores ``q_mu``."""
    q_sqrt: tf.Tensor
    """Its Cholesky factors, [L, M, M], or its standard deviations [M, L] (``q_diag=True``),
    stored as the model stores ``q_sqrt``."""
    site_parameters: Tuple[tf.Tensor, ...] = ()
    """The local parameters of the sites read off that q(u), each [N, L], where the next step
    starts; only when the steps started from given ones (else empty)."""
    yardstick: Optional[tf.Tensor] = None
    """The SVGP ELBO of that q(u) (the model's ``elbo`` once it is adopted), for a
    model whose objective is not a bound, from the marginals at which the next step's local
    parameters were read; only when those are returned (else ``None``)."""


@dataclass(frozen=True)
class Route:
    """
    One way to train a model, declared by the model as data and run by
    :func:`gpflow_fastvi.fit`: which training loop (the *driver*) runs it, with which fixed
    settings, and which keywords a user may pass (with their defaults).

    A model lists its routes in ``training_routes`` (name ↦ Route) and names one
    ``default_route``; ``fit(model, method=name, **options)`` checks the name and the keywords
    against this declaration, in one place, and hands ``settings`` and ``options`` to the driver.
    """

    driver: str
    """The loop in :mod:`gpflow_fastvi.training` that runs the route: ``"persistent"`` (one
    L-BFGS-B run on the hyperparameters, closed-form site steps at every evaluation),
    ``"alternating"`` (closed-form site steps alternating with bursts of L-BFGS-B on the
    hyperparameters) or ``"svi"`` (mini-batch natural-gradient steps on q(u) with Adam on the
    hyperparameters)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """The keywords ``fit`` accepts for this route, with their defaults."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """What makes the route what it is (e.g. whether site parameters join L-BFGS-B): passed to the
    driver, not a user keyword."""
    description: str = ""
    """One line for the docs and error messages, e.g. the paper's name for the scheme."""

    def __post_init__(self) -> None:
        # Read-only views: a route is declared once, on the model class, and shared by instances.
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
