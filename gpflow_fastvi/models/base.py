"""
:class:`GaussianSitesModel`: the base class of the models whose sites have a closed-form step —
its constructor (SVGP's signature, with the data optionally held as SGPR holds them), its
``training_loss`` and ``posterior``.

**State.** Like :class:`gpflow.models.SVGP`, a model is its hyperparameters θ and q(u) =
N(``q_mu``, ``q_sqrt q_sqrtᵀ``), nothing else: the sites' local parameters (ξ, the expansion
points, the tilted q(fₙ)) are a function of q(u) and are recomputed, point by point, during each
pass over the data (:mod:`~gpflow_fastvi.models.closed_form`). A model therefore needs no memory
proportional to the number of points, and the data can come with each call.

**The classes of a model**, each with one job (a model's own class adds its site rule):

=============================================  ================================================
class                                          job
=============================================  ================================================
:class:`gpflow.models.SVGP`                    the variables, ``posterior``, the closure contract
:class:`~.site_model.SiteModel`                the sites' protocol, the natural-gradient step,
                                               ``elbo``, ``prior_kl``, predictions; composed of
                                               ``_passes`` (data, Kmm's factor, devices) and
                                               ``_q_frame``
:class:`~.closed_form.ClosedFormSiteModel`     the closed-form steps and the collapsed bound
:class:`GaussianSitesModel` (this module)      the constructor, ``training_loss``
=============================================  ================================================

**What each model's ``training_loss`` is** on all the data (−objective − log prior density), and
whether it changes q(u). This table is the one place that says so; the objective is the model's
``maximum_log_likelihood_objective`` (at the stored q(u), without the steps):

====================  =========================================================  ===============
model                 objective after the evaluation's own steps on q(u)         sets q(u)?
====================  =========================================================  ===============
``VIJJ``              collapsed Jaakkola–Jordan bound, three site steps          yes, unless the
``VITaylor``          collapsed Taylor approximation, three site steps           loss is higher
``KLCorrected``       KL-corrected bound, three E-steps                          than the stored
``VIConcave``         SVGP's ELBO (``Softmax``'s by fixed quasi-random draws),   q(u)'s
                      three ascent steps
``PolyaGammaSVGP``    Pólya-Gamma ELBO, three natural-gradient steps of size 1
``KLCorrected``       with ``bound="standard"``: the standard bound at the q(u)   yes, always
                      of one E-step
====================  =========================================================  ===============

On a mini-batch (fewer rows than ``num_data``) every model takes one natural-gradient step on q(u)
and returns the batch's estimate of the sites' ELBO at the new q(u) (:mod:`.natural_step`).
``elbo`` changes nothing: for every model it is SVGP's ELBO at the stored q(u), the number to
compare with :class:`gpflow.models.SVGP`.
"""

from typing import Any, ClassVar, Optional

import gpflow
import tensorflow as tf
from check_shapes import check_shapes
from gpflow.base import RegressionData

from ..inducing import InducingSpec
from ..model_checks import (
    data_first_arguments,
    resolve_inducing_variable,
)
from ..types import Data, Route
from ..validation import (
    check_data,
    check_num_data,
    positive_int,
    targets_for_likelihood,
)
from .closed_form import ClosedFormSiteModel
from .step_sizes import FULL_DATA_STEPS

PERSISTENT_ROUTE = Route(
    "persistent",
    options={"n_upd": FULL_DATA_STEPS},
    description="one L-BFGS-B run over θ for the whole fit; each evaluation takes n_upd "
    "closed-form site steps (passes) from the sites of the last accepted iterate",
)
"""The persistent route (:mod:`gpflow_fastvi.training.persistent`), the same for every model whose
sites have a closed-form step and whose objective is that of
:meth:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel._stepped_sites`."""


class GaussianSitesModel(ClosedFormSiteModel):
    r"""
    Base class of sparse GP models whose likelihood is replaced by Gaussian sites
    aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2 with a closed-form step: a :class:`gpflow.models.SVGP` (SVGP's
    constructor makes its variables, and code written against SVGP takes it), trained with the
    data per call, or holding its data like :class:`gpflow.models.SGPR`.

    **What it changes of SVGP, and why.** ``training_loss`` takes the closed-form site steps on
    q(u) and returns the method's own objective (:meth:`training_loss`); ``elbo`` is SVGP's ELBO
    at the stored q(u), with the logit Bernoulli's expectation in a form that stays finite and
    the data checked; ``predict_f``, ``posterior`` and ``prior_kl`` use the factor of Kmm that
    training uses, whose jitter escalates where GPflow's fixed jitter fails.

    Notation (as in the papers and :mod:`gpflow_fastvi.gaussian`): X [N, D] inputs, Y [N, 1]
    targets, Z [M, D] inducing inputs, u = f(Z), Kmm = L Lᵀ, A = L⁻¹ Kmn, B = I + A W Aᵀ = LB LBᵀ.

    **Two ways to build one.** SVGP's signature, ``Model(kernel, likelihood, Z, num_data=N)``,
    then every data-taking method is called with the data: ``training_loss((X, Y))``,
    ``training_loss_closure((X, Y))``, ``elbo((X, Y))``, ``fit(model, (X, Y))``, and GPflow's
    ``gpflow.models.training_loss_closure(model, (X, Y))`` passes it the data. Or, as
    :class:`gpflow.models.SGPR` does, the model holds its data, ``Model(kernel, likelihood, Z,
    data=(X, Y))``: the methods are then called without it, and the inducing inputs may be an
    int M (k-means centres of X) or ``None`` (Z = X, the full GP). The data-first spelling
    ``Model((X, Y), kernel, ...)`` still builds that model, with a :class:`DeprecationWarning`.

    **State.** The kernel and mean-function hyperparameters θ, and ``q_mu`` and ``q_sqrt``, which
    hold q(u) exactly as in :class:`gpflow.models.SVGP` (whitened when ``whiten=True``). The
    sites' local parameters are recomputed from q(u) in every pass (module docstring). ``q_mu``
    and ``q_sqrt`` are not trainable: they are set in closed form, by every evaluation of
    :meth:`training_loss`, by :meth:`update_sites` and by :func:`gpflow_fastvi.fit`.

    **What a subclass writes, and what it may override or call.**

    ============================================  ===============================================
    must write                                    :meth:`_checked_likelihood`,
                                                  ``optimal_site_parameters``, ``site_rule``,
                                                  ``training_routes``, ``default_route``,
                                                  ``objective_is_bound``
    may override                                  ``step_rule`` (the sites a step goes
                                                  through), ``objective``,
                                                  ``closed_form_steps`` (a step that is not
                                                  the collapsed one),
                                                  ``expected_log_likelihood`` and
                                                  ``predict_f_at`` (a latent function other
                                                  than f), ``default_method``
    may call                                      every public method of the classes and parts
                                                  (module docstring), e.g.
                                                  ``pass_statistics``, ``site_statistics``,
                                                  ``steps_in_memory``,
                                                  ``passes.sum_over_data``
    ============================================  ===============================================
    """

    _full_data_loss_steps: ClassVar[int] = FULL_DATA_STEPS
    """The closed-form steps one full-data :meth:`training_loss` takes (at most, for a model whose
    steps end once they settle)."""

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
        data: Optional[RegressionData] = None,
        train_inducing: Optional[bool] = None,
        batch_size: Optional[int] = None,
        kmeans_seed: int = 0,
    ):
        """
        :param kernel: a single-output GPflow kernel, shared by the latent functions.
        :param likelihood: a GPflow likelihood the site rule supports (:meth:`_checked_likelihood`);
            ``None`` for the model's default.
        :param inducing_variable: a GPflow inducing variable or an array Z [M, D]; with ``data``
            also an int M for M k-means centres of X (seeded by ``kmeans_seed``), or ``None`` for
            inducing inputs at the data themselves, Z = X: the full GP, O(N³) per pass.
        :param num_latent_gps: the number of latent functions: 1, or C for a likelihood of C
            classes the model takes (:attr:`_multi_class_likelihoods`), as in
            :class:`gpflow.models.SVGP`; taken from ``q_sqrt``'s leading axis when it is given,
            as SVGP takes it.
        :param q_diag: a factorised q(u), as in SVGP (:class:`~gpflow_fastvi.models.site_model.SiteModel`).
        :param q_mu: q(u)'s starting mean [M, L], as in SVGP (zeros by default); the steps start
            from it, as every training route starts from the stored q(u).
        :param q_sqrt: q(u)'s starting covariance factor [L, M, M], lower triangular, as in SVGP
            (identities by default); for ``q_diag=True`` its standard deviations [M, L] (ones).
        :param whiten: store q(u) whitened by chol(Kmm), as :class:`gpflow.models.SVGP` does by default.
        :param num_data: the number of training points, as in SVGP: a call with fewer rows is a
            mini-batch (:meth:`training_loss`). ``None`` (the default) takes every call's data to
            be all of it.
        :param data: ``(X, Y)`` with X [N, D] and Y [N, 1] for the SGPR-like form, in which the
            model holds its data. Copied; the caller's arrays are untouched. (Given first, in
            the place of the kernel, it is taken as ``data=``, with a
            :class:`DeprecationWarning`.)
        :param train_inducing: whether training moves the inducing inputs with the
            hyperparameters. ``None`` (the default) does what :class:`gpflow.models.SVGP` does:
            inducing inputs given as an array or an int M are trained; a GPflow inducing variable
            keeps its own ``trainable`` flags; the full GP (Z = X) keeps them fixed. ``False``
            holds them where they start, as the source papers do.
        :param batch_size: accumulate the site statistics over batches of this many points, so that
            memory is O(batch_size · M) instead of O(N · M); ``None`` processes all points at once.
        """
        name = type(self).__name__
        kernel, likelihood, inducing_variable, data = data_first_arguments(
            name, kernel, likelihood, inducing_variable, data
        )
        likelihood, latent = self._checked_options(
            kernel, likelihood, inducing_variable, q_diag, num_latent_gps, q_sqrt
        )
        batch_size = positive_int(batch_size, "batch_size", optional=True)
        X = None
        if data is not None:
            X, Y = check_data(data, self._columns_of_Y(likelihood, latent, kernel))
            Y = targets_for_likelihood(likelihood, Y)
            num_data = check_num_data(num_data, X.shape[0])
        elif num_data is not None:
            num_data = positive_int(num_data, "num_data")
        self._build(
            kernel,
            likelihood,
            inducing_variable,
            resolve_inducing_variable(name, inducing_variable, X, kmeans_seed),
            latent,
            mean_function=mean_function,
            q_diag=q_diag,
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            whiten=whiten,
            num_data=num_data,
            train_inducing=train_inducing,
            full=X is not None and inducing_variable is None,
        )
        self.data = None if X is None else gpflow.models.util.data_input_to_tensor((X, Y))
        self.batch_size = batch_size

    # ----------------------------------------------------------------------------------------------
    # GPflow's training interface.

    @check_shapes("return: []")
    @tf.autograph.experimental.do_not_convert  # GPflow's Scipy compiles it with AutoGraph on
    def training_loss(self, data: Optional[RegressionData] = None) -> tf.Tensor:
        """
        −(objective + log prior density of the parameters), for GPflow's optimisers: each
        evaluation takes the closed-form site steps of one evaluation of the persistent route
        (three passes, from the stored q(u)) and stores their q(u) unless its loss is higher than
        that of the evaluation that stored the current one (a line search's trial point too far
        out), so that
        ``gpflow.optimizers.Scipy().minimize(model.training_loss_closure((X, Y)),
        model.trainable_variables)`` moves the sites with the hyperparameters and ends where
        :func:`gpflow_fastvi.fit` does (more slowly: ``fit`` keeps the sites of accepted
        iterates only, and restarts L-BFGS-B when the sites have moved under it).

        Where no jitter can factorise Kmm (a line search's extreme trial point) the loss is
        +inf with a zero gradient, and q(u) is left as it was: L-BFGS-B then shortens its step
        (:meth:`~gpflow_fastvi.models.passes.DataPasses.loss_or_inf`). Where the passes' gradient
        recomputes them batch by batch (a ``tf.data.Dataset``, a ``batch_size``, the replicas of
        a strategy) such a call raises instead: that gradient reads the model's variables
        again, and TensorFlow cannot build it inside the ``tf.cond`` that gives +inf once the
        loss is traced in a ``tf.function`` (tensorflow/tensorflow#50170).

        On a mini-batch (fewer rows than ``num_data``) the step is instead a natural-gradient step
        of size ρ = min(1, b / 10,000) on q(u) towards the batch's closed-form optimum, and the
        loss is the batch's estimate of the sites' ELBO at the new q(u)
        (:func:`~gpflow_fastvi.models.natural_step._mini_batch_loss_step`), so that an Adam
        loop over ``training_loss_closure(iter(dataset))`` trains the hyperparameters while q(u)
        follows by the method's own step.
        """
        data = self._passes.training_data(data)

        def loss() -> tf.Tensor:
            stepped = self._closed_form_steps(data, self._full_data_loss_steps)
            value = self._q_frame.adopt_unless_worse(
                -(stepped.objective + self.log_prior_density()), lambda: self._adopt(stepped)
            )
            return self._with_q_gradient(value, stepped.q_mu, stepped.q_sqrt)

        def all_data() -> tf.Tensor:
            if not self._projects_all_at_once(data):
                return loss()  # differentiable under tf.function, where no tf.cond wraps it
            return self._passes.where_factorisable(loss)

        return self._passes.by_rows(data, lambda: self._mini_batch_loss_step(data), all_data)

    def _closure_data(self, data: Any) -> Data:
        """The data a closure over all of them works on, checked once
        (:meth:`~gpflow_fastvi.models.passes.DataPasses.training_data`)."""
        return self._passes.training_data(data)
