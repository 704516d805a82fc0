"""
Sites of the expected log-likelihood (:cite:t:`khan2012fast`): the Gaussian site that touches
fᵦ(yᵢ, mᵢ, vᵢ) = E_{N(fᵢ | mᵢ, vᵢ)}[log p(yᵢ | fᵢ)] to first order in the marginal (mᵢ, vᵢ).

The paper's concave bound is the standard variational bound with V = (K⁻¹ + diag λ)⁻¹; at its
optimum λᵢ = −2 ∂fᵦ/∂vᵢ. In the language of sites that is the site precision, and the whole site
is

    w = −2 ∂fᵦ/∂v,     b = ∂fᵦ/∂m + w m,     a = fᵦ − b m + w (m² + v)/2,

so that E_q[a + b f − w f²/2] = a + b m − w (m² + v)/2 equals fᵦ at (m, v) with the same first
derivatives in m and v. The optimal q for these sites is the conjugate-computation step of
Khan & Lin (a natural-gradient step of size one on the standard ELBO); at its fixed point q is the
optimum of the ELBO itself. By Bonnet's and Price's theorems w = −E_q[∂² log p] and
∂fᵦ/∂m = E_q[∂ log p]: the Taylor site of :mod:`~gpflow_fastvi.sites.taylor`, averaged over q(f)
instead of taken at its mean.

fᵦ is the likelihood's own ``variational_expectations`` (closed form for Poisson with the
exponential link and for the Gaussian, Gauss–Hermite quadrature otherwise), differentiated
automatically. For a log-concave likelihood fᵦ is jointly concave in (m, v) and w ≥ 0; where
quadrature rounding makes w slightly negative it is set to 0, as for Taylor sites.

**C classes.** For a point with C latent values, q(fᵢ) = Π_c N(m_ic, v_ic) (the factorised q of
GPflow's multi-class SVGP), the same rule gives one site per class, w_c = −2 ∂fᵦ/∂v_c and
b_c = ∂fᵦ/∂m_c + w_c m_c, each carrying fᵦ/C: their sum touches fᵦ in every m_c and v_c. For
GPflow's softmax fᵦ = E[f_y − log Σ_c exp f_c] has no closed form; :func:`expected_log_softmax`
computes it with fixed quasi-random draws, a deterministic rule.
"""

import functools
from typing import Callable, Optional, Tuple

import numpy as np
import scipy.stats
import tensorflow as tf
from check_shapes import check_shapes

from ..likelihoods import one_hot_classes, one_hot_of_checked_classes
from ..numerical_checks import checked_finite
from ..types import Sites

ExpectedLogDensity = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
"""(m [N, L], v [N, L]) ↦ fᵦ(yᵢ, mᵢ, vᵢ) = E_{N(mᵢ, vᵢ)}[log p(yᵢ | fᵢ)] [N], at fixed targets,
for L latent values per point (L = 1 but for a likelihood of L classes)."""

ExpectedLogDensityGradient = Callable[
    [tf.Tensor, tf.Tensor], Tuple[tf.Tensor, tf.Tensor, tf.Tensor]
]
"""(m [N, L], v [N, L]) ↦ (fᵦ [N, 1], ∂fᵦ/∂m [N, L], ∂fᵦ/∂v [N, L]), as
:func:`expected_log_density_gradient` returns them."""


@check_shapes(
    "m: [N, L]",
    "v: [N, L]",
    "return[0]: [N, 1]",
    "return[1]: [N, L]",
    "return[2]: [N, L]",
)
def expected_log_density_gradient(
    expected: ExpectedLogDensity, m: tf.Tensor, v: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """
    fᵦ at (m, v) and its derivatives in mᵢ and vᵢ. fᵦ factorises over points, so one gradient of
    the sum gives every point's own derivatives.
    """
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([m, v])
        f_b = expected(m, v)  # [N]
        total = tf.reduce_sum(f_b)
    dm, dv = tape.gradient(total, [m, v])
    return f_b[:, None], dm, dv


@check_shapes(
    "m: [N, L]",
    "v: [N, L]",
    "return.a: [N, L]",
    "return.b: [N, L]",
    "return.w: [N, L]",
)
def expectation_sites(
    expected: ExpectedLogDensity,
    m: tf.Tensor,
    v: tf.Tensor,
    *,
    name: str = "likelihood",
    gradient: Optional[ExpectedLogDensityGradient] = None,
) -> Sites:
    """
    The sites (a, b, w) of the module docstring at the marginals q(fᵢ) = N(mᵢ, vᵢ); for L latent
    values per point one site per latent function, each carrying fᵦ/L.

    :param name: the likelihood's name, for the error raised where fᵦ or its gradient is not
        finite.
    :param gradient: fᵦ with its derivatives in (m, v) by a rule of the likelihood's own (for the
        softmax :func:`expected_log_softmax_gradient`, one forward pass); by default
        :func:`expected_log_density_gradient` of ``expected``.
    """
    if gradient is None:
        f_b, dm, dv = expected_log_density_gradient(expected, m, v)
    else:
        f_b, dm, dv = gradient(m, v)
    coefficients = checked_finite(
        tf.concat([f_b, dm, dv], axis=1),
        f"The expected log-density of {name} or its gradient is not finite at some marginal "
        "q(f) of the current posterior (the likelihood underflows there); check the data or the "
        "kernel variance.",
    )
    latent = m.shape[-1]
    f_b, dm, dv = tf.split(coefficients, [1, latent, latent], axis=1)
    w = tf.maximum(-2.0 * dv, 0.0)
    b = dm + w * m
    a = f_b / latent - b * m + 0.5 * w * (tf.square(m) + v)
    return Sites(a=a, b=b, w=w)


SOFTMAX_DRAWS = 128
"""The fixed draws of :func:`expected_log_softmax` (a power of two, as a Sobol sequence is
balanced in blocks of 2ᵏ). Against 10⁶ plain draws per point at fitted posteriors, the mean of
its error over the points was below 3·10⁻⁴ nats on letter and satimage, and +0.0027 on
scikit-learn's digits, whose fit has large marginal variances (512 draws: −1·10⁻⁴, at four
times the cost; :ref:`defaults-softmax-draws`)."""


SOFTMAX_SEED = 20
"""The seed of :func:`softmax_draws`' scrambling: every model and call uses the same draws."""


@functools.lru_cache(maxsize=32)
def softmax_draws(num_classes: int, draws: int = SOFTMAX_DRAWS) -> np.ndarray:
    """
    ``draws`` fixed points of N(0, I_C) [draws, C]: a scrambled Sobol sequence of a fixed seed
    mapped through the normal quantile, then each column centred and scaled to unit variance, so
    that the draws' first two moments are exactly those of N(0, I). Centring also keeps the
    reparameterised derivative in the variance finite as the variance goes to zero.
    """
    sequence = scipy.stats.qmc.Sobol(num_classes, scramble=True, seed=SOFTMAX_SEED)
    eps = scipy.stats.norm.ppf(sequence.random(draws))
    eps = eps - eps.mean(axis=0)
    eps = eps / eps.std(axis=0)
    eps.setflags(write=False)  # cached: one array for every caller
    return eps


SOFTMAX_BLOCK = 2**18
"""The draws f = m + √v ε of :func:`expected_log_softmax` are formed for blocks of points of
about this many numbers ([points, draws, C]) at a time, not for all N at once: a block stays in
the processor's cache through the log-sum-exp and its reductions, where a tensor of N · draws · C
numbers (425 MB on letter) goes through memory at every op. On letter (16,000 points, 26 classes,
two cores) the value and derivatives of one pass took 0.35 s against 0.50 s for the whole data at
once; on the small sets the two are the same (:ref:`defaults-softmax-draws`)."""


def _over_blocks(
    per_block: Callable[[tf.Tensor, tf.Tensor], Tuple[tf.Tensor, ...]],
    num_outputs: int,
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    draws: int,
) -> Tuple[tf.Tensor, ...]:
    """
    ``per_block(Fmu, Fvar)``, ``num_outputs`` tensors [n, ...] of Fmu's dtype for a block of n
    points, over blocks of the points (:data:`SOFTMAX_BLOCK`) and put together again [N, ...];
    the last block is padded with points of mean 0 and variance 1, whose results are dropped.
    """
    C = int(Fmu.shape[-1])
    rows = max(1, SOFTMAX_BLOCK // (draws * C))
    N = tf.shape(Fmu)[0]
    blocks = (N + rows - 1) // rows
    padding = [[0, blocks * rows - N], [0, 0]]
    Fmu_blocks = tf.reshape(tf.pad(Fmu, padding), [blocks, rows, C])
    Fvar_blocks = tf.reshape(tf.pad(Fvar, padding, constant_values=1.0), [blocks, rows, C])
    outputs = tf.map_fn(
        lambda block: per_block(*block),
        (Fmu_blocks, Fvar_blocks),
        fn_output_signature=(Fmu.dtype,) * num_outputs,
    )
    return tuple(
        tf.reshape(t, tf.concat([[blocks * rows], tf.shape(t)[2:]], axis=0))[:N] for t in outputs
    )


def _draws(Fmu: tf.Tensor, Fvar: tf.Tensor, eps: tf.Tensor) -> tf.Tensor:
    """The draws f = Fmu + √Fvar ε [N, S, C] of N points (Fmu, Fvar [N, C]; ε [S, C])."""
    return Fmu[:, None, :] + tf.sqrt(Fvar)[:, None, :] * eps


def _draws_and_classes(
    Fmu: tf.Tensor, Y: tf.Tensor, draws: int, labels_checked: bool
) -> Tuple[tf.Tensor, tf.Tensor]:
    """The fixed draws ε [S, C] in Fmu's dtype and the classes Y as one-hot rows [N, C], checked
    in the graph unless ``labels_checked``."""
    C = int(Fmu.shape[-1])  # static: the model's number of latent functions
    eps = tf.constant(softmax_draws(C, draws), Fmu.dtype)
    if labels_checked:
        return eps, one_hot_of_checked_classes(Y, C, Fmu.dtype)
    return eps, one_hot_classes(Y, C, "Softmax", Fmu.dtype)


@check_shapes("Fmu: [N, C]", "Fvar: [N, C]", "Y: [N, 1]", "return: [N]")
def expected_log_softmax(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y: tf.Tensor,
    draws: int = SOFTMAX_DRAWS,
    labels_checked: bool = False,
) -> tf.Tensor:
    r"""
    fᵦ = E[f_y − log Σ_c exp f_c] [N] for independent f_c ~ N(Fmu_c, Fvar_c) [N, C] and the class
    y of each point (Y [N, 1], integer classes checked in the graph): GPflow's ``Softmax``
    expectation, the one SVGP's ELBO holds.

    E[f_y] = m_y is exact; E[log Σ_c exp f_c] is the mean over fixed quasi-random draws
    (:func:`softmax_draws`, shared by the points) of the log-sum-exp at f = m + √v ε. So fᵦ is one
    smooth, deterministic function of (Fmu, Fvar): the ELBO test of a site step and L-BFGS-B's
    line search compare states, not draws, and the sites' derivatives in (m, v) are those of
    that function (reparameterised, exact for it). Like each draw's −log Σ exp, it is concave in
    (m, √v), and invariant to a shift common to every class.

    Jensen's inequality over the other classes given f_y, a closed-form lower bound, lay 0.0155,
    0.0074 and 0.0276 nats per point below fᵦ on digits, satimage and letter at a fit of that
    bound, where these draws' mean error was below 3·10⁻⁴ (:ref:`defaults-softmax-draws`).

    :param labels_checked: Y was checked where it entered (the models' data passes do it once per
        call): no check in the graph, which inside a loop of the caller's makes TensorFlow log
        that it skips optimising the loop.
    """
    eps, own = _draws_and_classes(Fmu, Y, draws, labels_checked)
    (log_normaliser,) = _over_blocks(
        lambda m, v: (tf.reduce_mean(tf.reduce_logsumexp(_draws(m, v, eps), axis=-1), axis=-1),),
        1,
        Fmu,
        Fvar,
        draws,
    )
    return tf.reduce_sum(own * Fmu, axis=-1) - log_normaliser


@check_shapes(
    "Fmu: [N, C]",
    "Fvar: [N, C]",
    "Y: [N, 1]",
    "return[0]: [N, 1]",
    "return[1]: [N, C]",
    "return[2]: [N, C]",
)
def expected_log_softmax_gradient(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y: tf.Tensor,
    draws: int = SOFTMAX_DRAWS,
    labels_checked: bool = False,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    r"""
    :func:`expected_log_softmax` with its derivatives in (Fmu, Fvar), the sites' inputs
    (:func:`expectation_sites`), from one forward pass over the same draws. With p(f) the
    softmax at a draw f = m + √v ε,

        ∂fᵦ/∂m_c = [c = y] − E_ε[p_c(f)],     ∂fᵦ/∂v_c = −E_ε[p_c(f) ε_c] / (2 √v_c),

    the derivatives of the draws' mean itself (what differentiating :func:`expected_log_softmax`
    gives, to rounding), with no backward pass through the [N, draws, C] draws.
    ``labels_checked`` as there.
    """
    eps, own = _draws_and_classes(Fmu, Y, draws, labels_checked)

    def per_block(m: tf.Tensor, v: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        F = _draws(m, v, eps)  # [n, S, C]
        largest = tf.reduce_max(F, axis=-1, keepdims=True)
        exp_F = tf.exp(F - largest)
        normaliser = tf.reduce_sum(exp_F, axis=-1, keepdims=True)
        p = exp_F / normaliser  # the softmax at each draw
        return (
            tf.reduce_mean(largest[..., 0] + tf.math.log(normaliser[..., 0]), axis=-1),
            tf.reduce_mean(p, axis=1),
            tf.reduce_mean(p * eps, axis=1),
        )

    log_normaliser, p_mean, p_eps = _over_blocks(per_block, 3, Fmu, Fvar, draws)
    f_b = tf.reduce_sum(own * Fmu, axis=-1) - log_normaliser
    return f_b[:, None], own - p_mean, -p_eps / (2.0 * tf.sqrt(Fvar))
