"""Cholesky factorisation with jitter that escalates, and a clear error when jitter cannot help."""

import re
from typing import Any, Callable, Optional, Tuple, Union

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

from ..numerical_checks import checked_finite

JITTER_ESCALATION = tuple(10.0**k for k in range(-8, -1))
"""Extra jitter tried in turn, relative to the matrix's mean diagonal, when the first factorisation fails."""


@check_shapes("K: [batch..., M, M]", "return: [batch..., M, M]")
def robust_cholesky(
    K: tf.Tensor, *, jitter: Optional[Union[float, tf.Tensor]] = None, what: str = "matrix"
) -> tf.Tensor:
    """
    Return L with L Lᵀ = K + jitter·I, adding more jitter only if that factorisation fails (for a
    batch of matrices, the same jitter for all of them).

    The first attempt uses ``jitter`` (default :func:`gpflow.config.default_jitter`, the jitter GPflow
    itself adds to Kuu), so results match GPflow's models exactly whenever K is well conditioned.
    If it fails, jitter of 10⁻⁸ … 10⁻² times the mean diagonal is tried in turn; if even the largest
    fails the call raises ``tf.errors.InvalidArgumentError`` naming ``what`` and the usual causes.
    Gradients flow through the factorisation that succeeded.

    :param jitter: diagonal added on the first attempt.
    :param what: the matrix's name in the error message, e.g. ``"Kmm"``.
    """
    return checked_finite(
        escalating_cholesky(K, jitter=jitter),
        f"Cholesky factorisation of {what} failed even with jitter of 1e-2 times its mean "
        "diagonal: the matrix is far from positive definite. Usual causes: duplicate inducing "
        "inputs, a kernel variance or lengthscale that collapsed to 0 or ran to infinity, or NaN "
        "in the data.",
    )


@check_shapes("K: [batch..., M, M]", "return: [batch..., M, M]")
def escalating_cholesky(
    K: tf.Tensor, *, jitter: Optional[Union[float, tf.Tensor]] = None
) -> tf.Tensor:
    """
    The factor :func:`robust_cholesky` returns, without its check: where no jitter can save the
    factorisation, a factor with non-finite entries, for a caller that answers that case itself
    (:func:`is_factorisable`). The jitter is a constant: no gradient reaches it.
    """
    if jitter is None:
        jitter = gpflow.config.default_jitter()
    return _jittered_cholesky(K, tf.stop_gradient(tf.cast(jitter, K.dtype)))


@tf.custom_gradient
def _jittered_cholesky(K: tf.Tensor, jitter: tf.Tensor) -> Tuple[tf.Tensor, Callable[..., Any]]:
    """
    L = chol(K + (jitter + extra) I), extra = 0 unless that fails, with the gradient of the
    factorisation itself (:func:`cholesky_gradient`) at whichever jitter succeeded.

    Differentiating through the ``tf.cond`` that picks the jitter would cost twice: TensorFlow
    builds the gradient of both branches (a third of the backward graph of a model's objective,
    traced on every first call, for a branch that almost never runs), and where the first attempt
    failed its NaN factor receives a zero gradient, 0 · NaN, so the gradient was NaN exactly when
    the escalation had saved the factorisation. Second derivatives (through L inside the
    gradient) are exact on the first attempt and not finite after an escalation.
    """
    M = tf.shape(K)[-1]
    eye = tf.eye(M, dtype=K.dtype)
    first = tf.linalg.cholesky(K + jitter * eye)

    def escalate() -> tf.Tensor:
        scale = tf.reduce_mean(tf.abs(tf.linalg.diag_part(K)))
        extra = tf.constant(JITTER_ESCALATION, dtype=K.dtype) * scale + jitter
        # All candidate jitters in one batched factorisation: no loop to trace, and this branch
        # only runs when the first attempt has failed.
        trials = tf.linalg.cholesky(K[None] + tf.reshape(extra, [-1] + [1] * K.shape.rank) * eye)
        finite = tf.math.is_finite(tf.linalg.diag_part(trials))
        succeeded = tf.reduce_all(tf.reshape(finite, [len(JITTER_ESCALATION), -1]), axis=1)
        # The first success; 0 if none succeeded, which leaves a non-finite factor.
        return tf.gather(trials, tf.argmax(tf.cast(succeeded, tf.int32)))

    L = tf.cond(is_finite_factor(first), lambda: first, escalate)

    def gradient(dL: tf.Tensor) -> Tuple[tf.Tensor, None]:
        return cholesky_gradient(L, dL), None

    return L, gradient


@check_shapes("L: [batch..., M, M]", "dL: [batch..., M, M]", "return: [batch..., M, M]")
def cholesky_gradient(L: tf.Tensor, dL: tf.Tensor) -> tf.Tensor:
    """
    The gradient in a symmetric A of a function of L = chol(A), given its gradient ``dL`` in L
    (Murray, 2016, "Differentiation of the Cholesky decomposition"): with Φ the lower triangle
    with its diagonal halved, Ā = ½ (S + Sᵀ), S = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹, by two triangular solves.
    Symmetric, as TensorFlow's own gradient of ``tf.linalg.cholesky``.
    """
    P = tf.linalg.band_part(tf.matmul(L, dL, transpose_a=True), -1, 0)  # dL's upper part drops out
    P = tf.linalg.set_diag(P, 0.5 * tf.linalg.diag_part(P))
    Y = tf.linalg.triangular_solve(L, P, lower=True, adjoint=True)  # L⁻ᵀ P
    St = tf.linalg.triangular_solve(L, tf.linalg.matrix_transpose(Y), lower=True, adjoint=True)
    return 0.5 * (St + tf.linalg.matrix_transpose(St))  # St = Sᵀ


def is_finite_factor(L: tf.Tensor) -> tf.Tensor:
    """Whether a Cholesky factor succeeded: TensorFlow fills a failed one with NaN."""
    return tf.reduce_all(tf.math.is_finite(tf.linalg.diag_part(L)))


@check_shapes("K: [batch..., M, M]", "return: []")
def is_factorisable(K: tf.Tensor) -> tf.Tensor:
    """Whether :func:`robust_cholesky` succeeds on K (a boolean scalar tensor; no gradient)."""
    return is_finite_factor(escalating_cholesky(tf.stop_gradient(K)))


@check_shapes("B: [batch..., M, M]", "return: [batch..., M, M]")
def checked_cholesky(B: tf.Tensor, *, what: str) -> tf.Tensor:
    """
    chol(B) for a matrix (or a batch of them) that is positive definite by construction (such as B = I + A W Aᵀ with
    w > 0), raising ``tf.errors.InvalidArgumentError`` naming ``what`` if it is not: no jitter is
    added, because needing it means the inputs are wrong, not that rounding bit.
    """
    return checked_finite(
        tf.linalg.cholesky(B),
        f"Cholesky factorisation of {what} failed: it should be positive definite by construction, "
        "so some site precisions w are negative or not finite, or the data contain NaN.",
    )


def cholesky_hint(message: str) -> str:
    """
    The sentence of a failed factorisation's message that says what failed and why (the checks of
    this module write it), without the graph trace TensorFlow puts around it.
    """
    found = re.search(r"Cholesky factorisation of[^\n]*?(?=: Tensor had|\n|$)", message)
    if found:
        return found.group(0).rstrip(".") + "."
    return (
        "A Cholesky factorisation failed: a matrix that should be positive definite is not. "
        "Usual causes: duplicate inducing inputs, a kernel variance or lengthscale that collapsed "
        "to 0, or extreme values in the data."
    )
