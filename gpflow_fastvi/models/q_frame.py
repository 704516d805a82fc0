"""
:class:`QFrame`: where q(u) was set, and what a step may store, one part of every model
(``model._q_frame``): the stored q(u) is read at the hyperparameters it was set at, and a line
search's wild trial point does not become the state its next trial starts from.
"""

from typing import Any, Callable, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from ..gaussian import WhitenedQ, kmm_cholesky, marginals, whitened_projection
from .host import PartsHost


class QFrame:
    """
    Where q(u) was last set: copies of the model's kernel, inducing variable and mean function at
    that moment, of the ``q_mu`` and ``q_sqrt`` it was set to, and the full-data training loss of
    the evaluation that set it.

    Two uses. A closed-form model (:class:`~gpflow_fastvi.models.closed_form.ClosedFormSiteModel`) reads the sites' local
    parameters off the marginals q(fᵢ) of the stored q(u) *at these hyperparameters*, whatever
    hyperparameters it then forms statistics at, so the sites an optimiser's trial point starts
    from are those of the last state, fixed in f-space, as if they were stored per point. Read at
    the trial hyperparameters instead, they move with them: a larger kernel variance inflates
    whitened means, a longer lengthscale makes Kmm⁻¹ amplify u-space means, and on ijcnn1
    VITaylor's L-BFGS-B followed such readings to expansion points of 10⁵ and an objective of 10¹⁰
    (its Taylor objective is not a bound, so it can be inflated). And every model's full-data
    ``training_loss`` keeps the q(u) of an evaluation only if its loss is no higher than
    :attr:`loss` (:meth:`adopt_unless_worse`).

    When ``q_mu`` or ``q_sqrt`` has been changed from outside since (a restored checkpoint, an
    assignment, an optimiser), the frame no longer belongs to it (:meth:`belongs_to`): q(u) is
    then read at the current hyperparameters, as SVGP reads it, and any evaluation may set it.

    A plain object, not a :class:`tf.Module`: its variables are scratch state of the training
    step, not part of the model, so they are neither trainable nor written to checkpoints, which
    therefore hold exactly SVGP's variables.
    """

    def __init__(self, model: PartsHost):
        self.model = model
        """The model whose q(u) this is the frame of."""
        self.kernel = gpflow.utilities.deepcopy(model.kernel)
        self.inducing_variable = gpflow.utilities.deepcopy(model.inducing_variable)
        self.mean_function = gpflow.utilities.deepcopy(model.mean_function)
        dtype = gpflow.config.default_float()
        M, latent = model.q_mu.shape  # [M, L]: L latent functions
        not_yet = np.full((M, latent), np.nan)  # equal to no q_mu: no frame yet
        self.q_mu = tf.Variable(not_yet, dtype=dtype, trainable=False)
        # q_sqrt's layout: [L, M, M], or the standard deviations [M, L] of q_diag=True.
        self.q_sqrt = tf.Variable(np.ones(model.q_sqrt.shape), dtype=dtype, trainable=False)
        self.loss = tf.Variable(np.inf, dtype=dtype, trainable=False)
        """The full-data training loss of the evaluation that set q(u); +inf if none did."""

    def _pairs(self) -> Sequence[Tuple[tf.Variable, tf.Variable]]:
        model = self.model
        pairs = []
        for copy, original in (
            (self.kernel, model.kernel),
            (self.inducing_variable, model.inducing_variable),
            (self.mean_function, model.mean_function),
        ):
            pairs += list(zip(copy.variables, original.variables))
        return pairs

    def belongs_to(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> tf.Tensor:
        """Whether the stored q(u) is still the one the frame was recorded with."""
        return tf.reduce_all(tf.equal(self.q_mu, q_mu)) & tf.reduce_all(
            tf.equal(self.q_sqrt, q_sqrt)
        )

    def is_at_model(self) -> tf.Tensor:
        """Whether the model's hyperparameters are still the frame's (no optimiser moved them)."""
        return tf.reduce_all([tf.reduce_all(tf.equal(c, o)) for c, o in self._pairs()])

    # ----------------------------------------------------------------------------------------------
    # Storing q(u).

    def store(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor, loss: Optional[tf.Tensor] = None) -> None:
        """
        Assign the model's ``q_mu`` and ``q_sqrt`` (in its stored frame), set at the current
        hyperparameters, and record them here as the parameters read them back: ``q_sqrt`` of
        ``q_diag=True`` is held through its positive transform, whose round trip can move the
        last bit, and a record of the values given would then never belong to the model's q(u).
        ``loss``: the full-data training loss of the evaluation that reached them, when one did
        (:attr:`loss`).
        """
        model = self.model
        model.q_mu.assign(q_mu)
        model.q_sqrt.assign(q_sqrt)
        for copy, original in self._pairs():
            copy.assign(original)
        self.q_mu.assign(tf.convert_to_tensor(model.q_mu))
        self.q_sqrt.assign(tf.convert_to_tensor(model.q_sqrt))
        self.loss.assign(np.inf if loss is None else tf.stop_gradient(loss))

    def start_here(self) -> None:
        """
        Record the current hyperparameters as those the stored q(u) was set at: until q(u) is
        next stored, its sites are read here, whatever trial hyperparameters an optimiser tries
        (the persistent route's start).
        """
        model = self.model
        self.store(tf.convert_to_tensor(model.q_mu), tf.convert_to_tensor(model.q_sqrt))

    def adopt_unless_worse(self, loss: tf.Tensor, adopt: Callable[[], Any]) -> tf.Tensor:
        """
        ``loss``, after calling ``adopt`` (which stores the q(u) the full-data evaluation reached)
        unless that loss is higher than the one of the evaluation that set the stored q(u), or not
        finite: a line search's wild trial point must not become the state that its next trial
        starts from. Any finite evaluation adopts when q(u) was set otherwise since
        (:meth:`belongs_to`).
        """
        fresh = ~self.belongs_to(self.model.q_mu, self.model.q_sqrt)
        keep = tf.math.is_finite(loss) & (fresh | (loss <= self.loss))

        def adopted() -> tf.Tensor:
            adopt()
            self.loss.assign(tf.stop_gradient(loss))
            return tf.constant(True)

        with tf.control_dependencies([tf.cond(keep, adopted, lambda: tf.constant(False))]):
            return tf.identity(loss)

    # ----------------------------------------------------------------------------------------------
    # q(u) read where it was set.

    def stored_q(self) -> Tuple[tf.Tensor, ...]:
        """
        The stored q(u) where its sites are read
        (:class:`QFrame`): whether to read it at the frame's
        hyperparameters (the frame belongs to it, and they differ from the current ones),
        chol(Kmm) there (else at the current ones), and q(v) whitened by that factor, as its two
        tensors m and R (:class:`~gpflow_fastvi.gaussian.WhitenedQ`). Held fixed: no gradient.
        """
        model = self.model
        q_mu, q_sqrt = tf.convert_to_tensor(model.q_mu), tf.convert_to_tensor(model.q_sqrt)
        # At the frame's own hyperparameters (repeated steps at fixed θ) the current projection
        # is the frame's: read with it rather than compute the same one twice.
        at_frame = self.belongs_to(q_mu, q_sqrt) & tf.logical_not(self.is_at_model())
        L_frame = tf.cond(
            at_frame,
            lambda: kmm_cholesky(self.kernel, self.inducing_variable),
            lambda: kmm_cholesky(model.kernel, model.inducing_variable),
        )
        q = model._whitened(q_mu, q_sqrt, L_frame)
        return (at_frame, tf.stop_gradient(L_frame), *(tf.stop_gradient(t) for t in q))

    def stored_marginals(
        self, X: tf.Tensor, stored: Tuple[tf.Tensor, ...], projection: Any
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        q(fᵢ) = N(Fmu, Fvar) [N, L] at the points X for the stored q(u) (``stored`` from
        :meth:`stored_q`), at the hyperparameters it was set at, or at the current ones (whose
        ``projection`` of X is given) when they are the same or q(u) was changed from outside.
        """
        read_at_frame, L_frame, *flat = stored
        q = WhitenedQ(*flat)

        def at_frame() -> Tuple[tf.Tensor, tf.Tensor]:
            A, Ktilde_diag, *_ = whitened_projection(
                self.kernel, self.inducing_variable, X, L_frame
            )
            Gmu, Fvar = marginals(A, Ktilde_diag, q)
            return Gmu + self.mean_function(X), Fvar

        def at_current() -> Tuple[tf.Tensor, tf.Tensor]:
            Gmu, Fvar = marginals(projection.A, projection.Ktilde_diag, q)
            return Gmu + self.model.mean_function(X), Fvar

        Fmu, Fvar = tf.cond(read_at_frame, at_frame, at_current)
        return tf.stop_gradient(Fmu), tf.stop_gradient(Fvar)
