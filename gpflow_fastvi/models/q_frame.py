"""
Where q(u) was set, and what a step may store: the :class:`QFrame` of the stored q(u), read at the
hyperparameters it was set at, and the guards that keep a line search's wild trial point from
becoming the state its next trial starts from (:class:`QStorage`).
"""

from typing import Any, Callable, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from ..gaussian import WhitenedQ, kmm_cholesky, marginals, whitened_projection, whitened_q
from .passes import DataPasses


class QFrame:
    """
    Where q(u) was last set: copies of the model's kernel, inducing variable and mean function at
    that moment, of the ``q_mu`` and ``q_sqrt`` it was set to, and the full-data training loss of
    the evaluation that set it.

    Two uses. :class:`~gpflow_fastvi.models.base.GaussianSitesModel` reads the sites' local
    parameters off the marginals q(fᵢ) of the stored q(u) *at these hyperparameters*, whatever
    hyperparameters it then forms statistics at, so the sites an optimiser's trial point starts
    from are those of the last state, fixed in f-space, as if they were stored per point. Read at
    the trial hyperparameters instead, they move with them: a larger kernel variance inflates
    whitened means, a longer lengthscale makes Kmm⁻¹ amplify u-space means, and on ijcnn1
    VITaylor's L-BFGS-B followed such readings to expansion points of 10⁵ and an objective of 10¹⁰
    (its Taylor objective is not a bound, so it can be inflated). And every model's full-data
    ``training_loss`` keeps the q(u) of an evaluation only if its loss is no higher than
    :attr:`loss` (:meth:`QStorage.adopt_unless_worse`).

    When ``q_mu`` or ``q_sqrt`` has been changed from outside since (a restored checkpoint, an
    assignment, an optimiser), the frame no longer belongs to it (:meth:`belongs_to`): q(u) is
    then read at the current hyperparameters, as SVGP reads it, and any evaluation may set it.

    A plain object, not a :class:`tf.Module`: its variables are scratch state of the training
    step, not part of the model, so they are neither trainable nor written to checkpoints, which
    therefore hold exactly SVGP's variables.
    """

    def __init__(self, model: Any):
        self.kernel = gpflow.utilities.deepcopy(model.kernel)
        self.inducing_variable = gpflow.utilities.deepcopy(model.inducing_variable)
        self.mean_function = gpflow.utilities.deepcopy(model.mean_function)
        dtype = gpflow.config.default_float()
        M, latent = model.q_mu.shape  # [M, L]: L latent functions
        not_yet = np.full((M, latent), np.nan)  # equal to no q_mu: no frame yet
        self.q_mu = tf.Variable(not_yet, dtype=dtype, trainable=False)
        self.q_sqrt = tf.Variable(np.tile(np.eye(M), (latent, 1, 1)), dtype=dtype, trainable=False)
        self.loss = tf.Variable(np.inf, dtype=dtype, trainable=False)
        """The full-data training loss of the evaluation that set q(u); +inf if none did."""

    def _pairs(self, model: Any) -> Sequence[Tuple[tf.Variable, tf.Variable]]:
        pairs = []
        for copy, original in (
            (self.kernel, model.kernel),
            (self.inducing_variable, model.inducing_variable),
            (self.mean_function, model.mean_function),
        ):
            pairs += list(zip(copy.variables, original.variables))
        return pairs

    def set(self, model: Any, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> None:
        """Record the model's current hyperparameters as the frame of ``(q_mu, q_sqrt)``."""
        for copy, original in self._pairs(model):
            copy.assign(original)
        self.q_mu.assign(q_mu)
        self.q_sqrt.assign(q_sqrt)
        self.loss.assign(np.inf)

    def belongs_to(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> tf.Tensor:
        """Whether the stored q(u) is still the one the frame was recorded with."""
        return tf.reduce_all(tf.equal(self.q_mu, q_mu)) & tf.reduce_all(
            tf.equal(self.q_sqrt, q_sqrt)
        )

    def is_at(self, model: Any) -> tf.Tensor:
        """Whether the model's hyperparameters are still the frame's (no optimiser moved them)."""
        return tf.reduce_all([tf.reduce_all(tf.equal(c, o)) for c, o in self._pairs(model)])


class QStorage(DataPasses):
    """
    How every model stores q(u): always with its :class:`QFrame`, and from a full-data
    ``training_loss`` evaluation only when the evaluation is no worse than the one that set it.
    """

    _q_frame: QFrame
    num_latent_gps: int  # GPflow's GPModel sets it: L, the columns of q_mu

    def set_up_step_state(self) -> None:
        """
        What the steps keep beside the model's variables, set up by each constructor once its
        variables exist: the :class:`QFrame` of q(u), and the strategy whose scope the model is
        built in (:attr:`~gpflow_fastvi.models.passes.DataPasses.distribute_strategy`), if any.
        """
        self._q_frame = QFrame(self)
        self.remember_built_in_strategy()

    def whitened(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor, L: tf.Tensor) -> WhitenedQ:
        """GPflow's ``(q_mu [M, L], q_sqrt [L, M, M])`` as q(v_l) = N(m_l, R_l R_lᵀ) in the frame
        whitened by L = chol(Kmm) (:func:`~gpflow_fastvi.gaussian.natural.whitened_q`)."""
        return whitened_q(q_mu, q_sqrt, L, self.whiten)

    def store_q(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> None:
        """
        Assign ``q_mu`` and ``q_sqrt`` (in the stored frame), set at the current hyperparameters,
        and record them as the model's :class:`QFrame`.
        """
        self.q_mu.assign(q_mu)
        self.q_sqrt.assign(q_sqrt)
        self._q_frame.set(self, q_mu, q_sqrt)

    def start_frame_here(self) -> None:
        """
        Record the current hyperparameters as those the stored q(u) was set at: until q(u) is
        next stored, its sites are read here, whatever trial hyperparameters an optimiser tries
        (the persistent route's start).
        """
        self.store_q(tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt))

    def adopt_unless_worse(self, loss: tf.Tensor, adopt: Callable[[], Any]) -> tf.Tensor:
        """
        ``loss``, after calling ``adopt`` (which stores the q(u) the full-data evaluation reached)
        unless that loss is higher than the one of the evaluation that set the stored q(u), or not
        finite: a line search's wild trial point must not become the state that its next trial
        starts from. Any finite evaluation adopts when q(u) was set otherwise since
        (:meth:`QFrame.belongs_to`).
        """
        frame = self._q_frame
        fresh = ~frame.belongs_to(self.q_mu, self.q_sqrt)
        keep = tf.math.is_finite(loss) & (fresh | (loss <= frame.loss))

        def adopted() -> tf.Tensor:
            adopt()
            frame.loss.assign(tf.stop_gradient(loss))
            return tf.constant(True)

        with tf.control_dependencies([tf.cond(keep, adopted, lambda: tf.constant(False))]):
            return tf.identity(loss)

    def loss_or_inf(self, ok: tf.Tensor, loss: Callable[[], tf.Tensor]) -> tf.Tensor:
        """
        ``loss()`` where the boolean tensor ``ok`` holds, else +inf with a zero gradient, without
        evaluating it (nothing it would store is stored): what a full-data ``training_loss``
        returns at a trial point where its step cannot be taken, so that L-BFGS-B backtracks.
        Not NaN, which :class:`gpflow.models.SVGP`'s loss is there: SciPy's L-BFGS-B may accept
        a NaN trial point and, its gradient being zero, report convergence at it (on ijcnn1,
        KLCorrected's Scipy loop ended so after 324 iterations, at a lengthscale of 1.6·10⁻¹⁵
        where no jitter factorises Kmm), or end its line search there.

        When a strategy's replicas share the passes (:meth:`pass_strategy`), ``loss()`` is
        evaluated as it is, and fails where it cannot be taken: TensorFlow cannot differentiate
        a ``tf.cond`` around them (the gradient of the branch captures the replicas' variables
        from outside the function). :func:`~gpflow_fastvi.fit` takes such a failure at a trial
        point as an infinite loss too.
        """
        if self.pass_strategy() is not None:
            return loss()
        inf = tf.constant(np.inf, dtype=gpflow.config.default_float())
        return tf.cond(ok, loss, lambda: inf)

    def where_factorisable(self, loss: Callable[[], tf.Tensor]) -> tf.Tensor:
        """
        ``loss()`` where Kmm can be factorised; else +inf with nothing stored
        (:meth:`loss_or_inf`). A line search's extreme trial point (a lengthscale of 10⁻¹⁵) then
        makes L-BFGS-B shorten its step, and an Adam step there has a zero gradient.
        """
        return self.loss_or_inf(self.Kmm_is_factorisable(), loss)

    # ----------------------------------------------------------------------------------------------
    # q(u) read where it was set.

    def stored_q_at_frame(self) -> Tuple[tf.Tensor, ...]:
        """
        The stored q(u) where its sites are read
        (:class:`QFrame`): whether to read it at the frame's
        hyperparameters (the frame belongs to it, and they differ from the current ones),
        chol(Kmm) there (else at the current ones), and q(v) whitened by that factor, as its two
        tensors m and R (:class:`~gpflow_fastvi.gaussian.WhitenedQ`). Held fixed: no gradient.
        """
        frame = self._q_frame
        q_mu, q_sqrt = tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt)
        # At the frame's own hyperparameters (repeated steps at fixed θ) the current projection
        # is the frame's: read with it rather than compute the same one twice.
        at_frame = frame.belongs_to(q_mu, q_sqrt) & tf.logical_not(frame.is_at(self))
        L_frame = tf.cond(
            at_frame,
            lambda: kmm_cholesky(frame.kernel, frame.inducing_variable),
            lambda: self.Kmm_cholesky(),
        )
        q = self.whitened(q_mu, q_sqrt, L_frame)
        return (at_frame, tf.stop_gradient(L_frame), *(tf.stop_gradient(t) for t in q))

    def stored_marginals(
        self, X: tf.Tensor, stored: Tuple[tf.Tensor, ...], projection: Any
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        q(fᵢ) = N(Fmu, Fvar) [N, L] at the points X for the stored q(u) (``stored`` from
        :meth:`stored_q_at_frame`), at the hyperparameters it was set at, or at the current ones (whose
        ``projection`` of X is given) when they are the same or q(u) was changed from outside.
        """
        frame = self._q_frame
        read_at_frame, L_frame, *flat = stored
        q = WhitenedQ(*flat)

        def at_frame() -> Tuple[tf.Tensor, tf.Tensor]:
            A, Ktilde_diag, *_ = whitened_projection(
                frame.kernel, frame.inducing_variable, X, L_frame
            )
            Gmu, Fvar = marginals(A, Ktilde_diag, q)
            return Gmu + frame.mean_function(X), Fvar

        def at_current() -> Tuple[tf.Tensor, tf.Tensor]:
            Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, q)
            return Gmu + self.mean_function(X), Fvar

        Fmu, Fvar = tf.cond(read_at_frame, at_frame, at_current)
        return tf.stop_gradient(Fmu), tf.stop_gradient(Fvar)
