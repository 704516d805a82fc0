"""
Taylor sites: the log-likelihood expanded to second order at ξᵢ (:cite:t:`izmailov2017faster`,
eqs. 16–19), for any GPflow likelihood that factorises over points.

With gᵢ and hᵢ the first and second derivatives of log p(yᵢ | f) at f = ξᵢ,

    log p(yᵢ | fᵢ) ≈ log p(yᵢ | ξᵢ) + gᵢ (fᵢ − ξᵢ) + ½ hᵢ (fᵢ − ξᵢ)²,

a Gaussian site a + b f − w f²/2 with

    w = −h,     b = g + w ξ,     a = log p(y | ξ) − g ξ − w ξ²/2.

The paper writes the curvature as ψ(ξ) = −h/2 and B = Kmm + 2 Kmn Ψ Knm, so its 2Ψ is our W, and its
v(ξ) = φ(ξ) + 2 Ψ ξ is our b (φ = g). g and h come from automatic differentiation of
``likelihood.log_prob``; ξᵢ is set to the current mean of q(fᵢ). This is an approximation, not a
bound: the expansion is exact only for a Gaussian likelihood.

For a likelihood of C classes (GPflow's ``Softmax``) fᵢ has C entries; the Hessian is replaced by
its diagonal, which gives one site per class, each carrying log p(yᵢ | ξᵢ)/C: the sum of a
point's sites has the expansion's value and gradient at ξᵢ and the diagonal curvature. For the
softmax the derivatives have a closed form (:func:`softmax_derivatives`); autodiff would need
one Hessian-vector product per class for the diagonal.

For outputs mixed from L latent functions, f = W g with W [P, L] (GPflow's
``LinearCoregionalization``), the expansion is of Σₚ log p(yᵢₚ | fᵢₚ) in gᵢ at ξᵢ: by the chain
rule its gradient is Wᵀ gᵢ and its Hessian −Wᵀ Λᵢ W, Λᵢ = diag(−hᵢₚ) over the outputs
(:func:`mixed_derivatives`). q(u) is independent across the latent functions, so E_q of the
expansion sees only that Hessian's diagonal in the variances, Σₚ Wₚₗ² λᵢₚ: sites with that
curvature give the optimal factorised q(u) at the fixed point ξ = E_q[g]. A step through them
moves the means as a Jacobi iteration on the full Hessian, which diverges where W's columns are
correlated enough (three equal columns: each step doubles the error with the sign flipped); a step
through sites whose curvature is the Hessian's absolute row sums (a separable quadratic below the
expansion, with its value and slope at ξ) cannot, and has the same fixed point, as b = g + w ξ
makes any curvature's. :class:`~gpflow_fastvi.VITaylor` takes its steps through the latter and its
last one, which gives q(u) and the objective, through the former.

Curvature safeguards. The collapsed algebra needs w ≥ 0, i.e. a log-concave likelihood at ξ
(:class:`~gpflow_fastvi.VITaylor` refuses Student-t and Beta, which are not). Where h > 0 all the
same (GPflow's probit link 10⁻³ + (1 − 2·10⁻³) Φ(f), whose offset bends log p upwards for
y f ≲ −2.44), w is set to 0: the site keeps the slope g but no curvature.

Given a ceiling c on log p(yᵢ | f) over all f (0 for a likelihood of a discrete variable,
:func:`~gpflow_fastvi.likelihoods.log_density_ceiling`), the curvature is also raised to

    w ≥ g² / (2 (c − log p(y | ξ))),

the least curvature at which the quadratic, whose peak is log p(y | ξ) + g²/(2w), stays at or
below c. Without it, a point far on the wrong side of a logit boundary (y ξ → −∞) has a slope
g → 1, a curvature w = σ(ξ)σ(−ξ) → 0, and a quadratic that promises a log-likelihood of about
e^|yξ|/2 > 0 as its f is moved towards its label: summed into the collapsed objective, such
promises grow with the kernel variance without limit, and the objective is no longer
bounded by log p(y) ≤ 0 (on a nearly separable set it ran to +10¹³² while the hyperparameters
ran to 10¹²²). With every site at or below c, the collapsed objective is at most N c, the
ceiling of log p(y) itself. The floor matches the expansion's value and slope at ξ and changes
only points the current q(f) puts on the wrong side: the logit expansion peaks at
log σ(yξ) + σ(−yξ)/(2σ(yξ)), which is below 0 for y ξ > −0.92; only below that does the floor
bend the quadratic down, trading the expansion's curvature at ξ for a peak no higher than the
likelihood's own.

Non-finite values of log p, g or h (a log-density computed as log(1 − p) with p rounding to 1 far
from the data, for example) raise ``tf.errors.InvalidArgumentError`` naming the likelihood;
:class:`~gpflow_fastvi.VITaylor` passes the logit Bernoulli in the stable form log σ(y f), which
is finite everywhere.
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf
from check_shapes import check_shapes

from ..numerical_checks import checked_finite
from ..types import Sites

LogDensity = Callable[[tf.Tensor], tf.Tensor]
"""f [N, L] ↦ log p(yᵢ | fᵢ): a log-likelihood that factorises over points, at fixed targets, of
the L latent values of each point: [N] where they are coupled (a likelihood of L classes), or
[N, L] where each is an output of its own (L independent outputs, or L = 1)."""


@check_shapes("xi: [N, L]", "return[0]: [N, K]", "return[1]: [N, L]", "return[2]: [N, L]")
def log_density_derivatives(
    log_density: LogDensity, xi: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """
    log p(yᵢ | ξᵢ), its gradient in ξᵢ and the diagonal of its Hessian, by nested automatic
    differentiation. As the log-likelihood factorises over points, ∂/∂ξᵢ Σⱼ log p(yⱼ | ξⱼ) is the
    i-th gradient, and the second derivatives of a point are those of its own gradient: for one
    latent function one more gradient of Σᵢ gᵢ gives them all; for L, each point's L × L Hessian
    is one vectorised Jacobian of g (``batch_jacobian``, whose graph does not grow with L), and
    its diagonal is kept. Where ``log_density`` gives one value per latent value ([N, L],
    independent outputs) the Hessian is diagonal, and one more gradient gives it, as for L = 1;
    log p is then returned per latent value, [N, L], else [N, 1].
    """
    latent = xi.shape[-1]
    with tf.GradientTape(watch_accessed_variables=False) as outer:
        outer.watch(xi)
        with tf.GradientTape(watch_accessed_variables=False) as inner:
            inner.watch(xi)
            log_p = log_density(xi)  # [N], or [N, L] for independent latent values
            total = tf.reduce_sum(log_p)  # summed on the tape, or the tape would not see it
        g = inner.gradient(total, xi)  # [N, L]
        diagonal = latent == 1 or log_p.shape.rank == 2
        g_total = tf.reduce_sum(g) if diagonal else None
    if diagonal:
        h = outer.gradient(g_total, xi)  # [N, L]: each g depends on its own ξ only
    else:
        h = tf.linalg.diag_part(outer.batch_jacobian(g, xi))  # [N, L, L] → [N, L]
    return (log_p if log_p.shape.rank == 2 else log_p[:, None]), g, h


@check_shapes(
    "xi: [N, L]",
    "W: [P, L]",
    "return[0]: [N, 1]",
    "return[1]: [N, L]",
    "return[2]: [N, L]",
)
def mixed_derivatives(
    log_density: LogDensity, xi: tf.Tensor, W: tf.Tensor, *, majorized: bool = False
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """
    log p(yᵢ | W ξᵢ) summed over the P outputs, its gradient Wᵀ gᵢ in ξᵢ, and a diagonal stand-in
    for its Hessian −Wᵀ Λᵢ W, for outputs f = W g (module docstring). ``log_density`` gives one
    value per point and output, F [N, P] ↦ [N, P]; each output's curvature λ = −h is clipped at 0
    before it is mixed, as :func:`taylor_sites` clips an unmixed one.

    :param majorized: the Hessian's absolute row sums, −Σₖ abs((Wᵀ Λᵢ W)ₗₖ) (a diagonal below it in
        the order of matrices: a step through them converges), instead of its diagonal
        −Σₚ Wₚₗ² λᵢₚ (exact for q(u) independent across the latent functions).
    """
    F = tf.matmul(xi, W, transpose_b=True)  # [N, P]
    log_p, g, h = log_density_derivatives(log_density, F)  # [N, P] each: independent outputs
    lam = tf.maximum(-h, 0.0)
    if majorized:
        curvature = tf.reduce_sum(tf.abs(tf.einsum("np,pl,pk->nlk", lam, W, W)), axis=-1)
    else:
        curvature = tf.matmul(lam, tf.square(W))
    return tf.reduce_sum(log_p, axis=-1, keepdims=True), tf.matmul(g, W), -curvature


Derivatives = Tuple[tf.Tensor, tf.Tensor, tf.Tensor]
"""log p(yᵢ | ξᵢ) [N, 1] (or [N, L], one per latent value of independent outputs), its gradient
[N, L] and the diagonal of its Hessian [N, L] at ξ."""


@check_shapes(
    "own: [N, L]",
    "xi: [N, L]",
    "return[0]: [N, 1]",
    "return[1]: [N, L]",
    "return[2]: [N, L]",
)
def softmax_derivatives(own: tf.Tensor, xi: tf.Tensor) -> Derivatives:
    """
    log p(yᵢ | ξᵢ) = ξ_iyᵢ − log Σ_c exp ξ_ic of the softmax, with the one-hot labels ``own``, its
    gradient own − p and the diagonal of its Hessian −p (1 − p), p = softmax(ξᵢ): what
    :func:`log_density_derivatives` computes by autodiff, in closed form and in one pass.
    """
    log_p = tf.nn.log_softmax(xi, axis=-1)
    p = tf.exp(log_p)
    return tf.reduce_sum(own * log_p, axis=-1, keepdims=True), own - p, -p * (1.0 - p)


@check_shapes("xi: [N, L]", "return[0]: [N, L]", "return[1]: [N, L]", "return[2]: [N, L]")
def taylor_sites(
    log_density: Optional[LogDensity],
    xi: tf.Tensor,
    *,
    ceiling: Optional[float] = None,
    name: str = "likelihood",
    derivatives: Optional[Derivatives] = None,
) -> Sites:
    """
    Taylor sites (a, b, w) of ``log_density`` expanded at ``xi``, with the curvature safeguards of
    the module docstring. For L latent functions (a likelihood of L classes) the Hessian is
    replaced by its diagonal, one site per latent function, each carrying log p(y | ξ)/L and,
    under a ceiling, at most c/L; for L independent outputs (``log_density`` per latent value)
    each site carries its own output's log p and, under a ceiling, at most c.

    :param ceiling: an upper bound c on ``log_density`` over all f, if one is known: the
        curvature is then raised where needed so that no site's peak exceeds c.
    :param name: the likelihood's name, for the error raised on non-finite derivatives.
    :param derivatives: log p, g and h at ``xi`` where the caller has them in closed form
        (:func:`softmax_derivatives`; ``log_density`` may then be ``None``); else
        :func:`log_density_derivatives` of ``log_density``.
    """
    if derivatives is None:
        if log_density is None:
            raise ValueError("taylor_sites needs the log-density or its derivatives at xi.")
        derivatives = log_density_derivatives(log_density, xi)
    log_p, g, h = derivatives
    latent = xi.shape[-1]
    coefficients = checked_finite(
        tf.concat([log_p, g, h], axis=1),
        f"The log-density of {name} or its first two derivatives is not finite at some expansion "
        "point ξ (the current posterior mean of f). The likelihood underflows there (for example "
        "log(1 - p) with p rounding to 1); check the data or the kernel variance.",
    )
    # Split by columns, which works where N is unknown at trace time.
    columns = log_p.shape[-1]  # 1, or L for log p per latent value (independent outputs)
    log_p, g, h = tf.split(coefficients, [columns, latent, latent], axis=1)
    # Each latent function's site carries its own log p(y | ξ), or its share of a joint one.
    share = log_p / latent if columns == 1 else log_p
    w = tf.maximum(-h, 0.0)  # w ≥ 0
    if ceiling is not None:  # each peak share + g²/(2w) ≤ its limit; no floor where g = 0
        limit = tf.cast(ceiling, log_p.dtype) / (latent if columns == 1 else 1)
        headroom = tf.maximum(limit - share, 0.0)
        w = tf.maximum(w, tf.math.divide_no_nan(tf.square(g), 2.0 * headroom))
    b = g + w * xi
    a = share - g * xi - 0.5 * w * tf.square(xi)
    return Sites(a=a, b=b, w=w)
