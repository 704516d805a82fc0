"""
Sufficient statistics of Gaussian sites: the only place where the data enter the shared algebra.

With L = chol(Kmm) and A = L⁻¹ Kmn, a set of sites (a, b, w) on the zero-mean process g is summarised by

    A W Aᵀ [M, M],   A b [M, 1],   Σ aᵢ,   Σ wᵢ (Knn,ᵢᵢ − Qnn,ᵢᵢ),    Qnn,ᵢᵢ = ‖A[:, i]‖²,

all sums over data points. For L latent functions the sites are [N, L], one column each, and
the statistics are held as GPflow holds q(u): A W_l Aᵀ stacked [L, M, M], A b_l as the columns
of [M, L], the two scalars summed over l. Every function here and in the rest of the package
works on that layout with batched linear algebra, so a model of C classes runs the same graph as
a binary one, with a batch dimension of C instead of 1. They are the statistics Kmn W Knm and Kmn b of the design notes written in
the frame whitened by L, where Kmm becomes I: the collapsed bound and the optimal q(u) then need only
one more Cholesky factor, LB = chol(I + A W Aᵀ), and never the ill-conditioned Kmm + Kmn W Knm.
"""

from typing import NamedTuple, Optional, Tuple

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

from ..types import Sites, SiteStatistics
from .cholesky import robust_cholesky

_KERNEL_PER_LATENT = (gpflow.kernels.SeparateIndependent, gpflow.kernels.LinearCoregionalization)
"""GPflow's multi-output kernels with a kernel of each latent function's own."""


def separate_outputs(
    kernel: gpflow.kernels.Kernel,
    inducing_variable: gpflow.inducing_variables.InducingVariables,
) -> bool:
    """
    Whether each latent function has a prior of its own: a
    :class:`~gpflow.kernels.SeparateIndependent` kernel (a kernel per output), a
    :class:`~gpflow.kernels.LinearCoregionalization` (a kernel per latent function, mixed into
    the outputs afterwards, :func:`output_marginals`), or
    :class:`~gpflow.inducing_variables.SeparateIndependentInducingVariables` (a Z per output). Then
    Kmm, its factor L and the projection A carry a leading axis of the L latent functions
    ([L, M, M], [L, M, N]) where a shared prior has none; every function of the shared algebra
    takes both layouts.
    """
    return isinstance(kernel, _KERNEL_PER_LATENT) or isinstance(
        inducing_variable, gpflow.inducing_variables.SeparateIndependentInducingVariables
    )


def single_output_parts(
    kernel: gpflow.kernels.Kernel,
    inducing_variable: gpflow.inducing_variables.InducingVariables,
) -> Tuple[gpflow.kernels.Kernel, gpflow.inducing_variables.InducingVariables]:
    """
    The single-output kernel and inducing variable that every latent function shares: the ones
    given, or the ones inside GPflow's multi-output spelling of the same prior, a
    :class:`~gpflow.kernels.SharedIndependent` kernel with
    :class:`~gpflow.inducing_variables.SharedIndependentInducingVariables` (one kernel and one Z
    for all the outputs). Parts of each output's own (:func:`separate_outputs`) are returned as
    given, for GPflow's multi-output covariances.
    """
    if separate_outputs(kernel, inducing_variable):
        return kernel, inducing_variable
    if isinstance(kernel, gpflow.kernels.SharedIndependent):
        kernel = kernel.kernel
    if isinstance(inducing_variable, gpflow.inducing_variables.SharedIndependentInducingVariables):
        inducing_variable = inducing_variable.inducing_variable
    return kernel, inducing_variable


@check_shapes("return: [outputs..., M, M]")
def kmm_cholesky(
    kernel: gpflow.kernels.Kernel,
    inducing_variable: gpflow.inducing_variables.InducingVariables,
) -> tf.Tensor:
    """
    L = chol(Kmm + jitter), with GPflow's jitter first and more only if that fails: [M, M] for a
    prior the latent functions share, [L, M, M] for priors of their own (:func:`separate_outputs`).
    """
    kernel, inducing_variable = single_output_parts(kernel, inducing_variable)
    Kmm = gpflow.covariances.Kuu(inducing_variable, kernel)
    return robust_cholesky(Kmm, what="Kmm")


def _latent_kernel(kernel: gpflow.kernels.Kernel) -> gpflow.kernels.Kernel:
    """The kernel of the latent functions: for a :class:`~gpflow.kernels.LinearCoregionalization`
    the independent GPs it mixes, each with its kernel (a
    :class:`~gpflow.kernels.SeparateIndependent` of the same kernel objects); else the kernel."""
    if isinstance(kernel, gpflow.kernels.LinearCoregionalization):
        return gpflow.kernels.SeparateIndependent(kernel.kernels)
    return kernel


@check_shapes("X: [N, D]", "return: [N, outputs...]")
def prior_variances(kernel: gpflow.kernels.Kernel, X: tf.Tensor) -> tf.Tensor:
    """The prior variances Knn,ᵢᵢ: [N] for a single-output kernel, [N, L] for GPflow's
    multi-output one (what :func:`single_output_parts` leaves of separate priors): those of the
    latent functions, before a :class:`~gpflow.kernels.LinearCoregionalization` mixes them."""
    kernel = _latent_kernel(kernel)
    if isinstance(kernel, gpflow.kernels.MultioutputKernel):
        return kernel(X, full_cov=False, full_output_cov=False)
    return kernel(X, full_cov=False)


@check_shapes("X: [N, D]", "return: [outputs..., N, N]")
def prior_covariance(kernel: gpflow.kernels.Kernel, X: tf.Tensor) -> tf.Tensor:
    """The prior covariance Knn: [N, N] for a single-output kernel, [L, N, N] for GPflow's
    multi-output one (:func:`prior_variances`)."""
    kernel = _latent_kernel(kernel)
    if isinstance(kernel, gpflow.kernels.MultioutputKernel):
        return kernel(X, full_cov=True, full_output_cov=False)
    return kernel(X, full_cov=True)


def mixing(kernel: gpflow.kernels.Kernel) -> Optional[tf.Tensor]:
    """W [P, L], which mixes the L latent functions g into the P outputs f = W g, for a
    :class:`~gpflow.kernels.LinearCoregionalization`; ``None`` where each output is a latent
    function."""
    if isinstance(kernel, gpflow.kernels.LinearCoregionalization):
        return tf.convert_to_tensor(kernel.W)
    return None


@check_shapes("Gmu: [N, L]", "Gvar: [N, L]", "return[0]: [N, P]", "return[1]: [N, P]")
def output_marginals(
    kernel: gpflow.kernels.Kernel, Gmu: tf.Tensor, Gvar: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    The marginals q(fₙₚ) of the outputs from those of the latent functions, q(gₙₗ) = N(Gmu,
    Gvar): the same where each output is a latent function; for f = W g (:func:`mixing`) with
    q(u) independent across the latent functions, as SVGP's is, mean W g and variance
    Σₗ Wₚₗ² Gvarₙₗ. A site model's likelihood term is a function of these, and so of the latent
    marginals: its sites on each latent function are its derivatives there (chain rule).
    """
    W = mixing(kernel)
    if W is None:
        return Gmu, Gvar
    return tf.matmul(Gmu, W, transpose_b=True), tf.matmul(Gvar, tf.square(W), transpose_b=True)


@check_shapes(
    "Gvar: [N, L]",
    "cov: [L, N, N]",
    "W: [P, L]",
)
def mixed_covariance(
    Gvar: tf.Tensor, cov: Optional[tf.Tensor], W: tf.Tensor, full_cov: bool, full_output_cov: bool
) -> tf.Tensor:
    """
    The covariance of the outputs f = W g in GPflow's layouts, from the latent functions'
    variances Gvar [N, L] or (``full_cov``) covariances ``cov`` [L, N, N], independent across l:
    [N, P], [N, P, P], [P, N, N] or [N, P, N, P], as GPflow's conditional for
    :class:`~gpflow.kernels.LinearCoregionalization` gives them.
    """
    if not full_cov:
        if full_output_cov:
            return tf.einsum("nl,pl,ql->npq", Gvar, W, W)
        return tf.matmul(Gvar, tf.square(W), transpose_b=True)
    assert cov is not None
    if full_output_cov:
        return tf.einsum("lnm,pl,ql->npmq", cov, W, W)
    return tf.einsum("lnm,pl->pnm", cov, tf.square(W))


@check_shapes("Ktilde_diag: [N, outputs...]", "return: [N, broadcast L]")
def per_latent(Ktilde_diag: tf.Tensor) -> tf.Tensor:
    """A per-point quantity of the prior ([N], shared; [N, L], a prior per output) as a column
    [N, 1] or columns [N, L] that broadcast against the sites [N, L]."""
    return Ktilde_diag[:, None] if Ktilde_diag.shape.rank == 1 else Ktilde_diag


@check_shapes("L: [batch..., M, M]", "return: [batch..., M, M]")
def triangular_inverse(L: tf.Tensor) -> tf.Tensor:
    """
    L⁻¹ of a lower-triangular factor L (or of each of a batch of them), by one triangular solve
    against the identity (it is lower triangular, with exact zeros above the diagonal).

    It is there to be *applied* to the N columns of a batch as a matrix product, L⁻¹ Kmn, instead
    of solving L A = Kmn with N right-hand sides. On CPU TensorFlow's triangular solve with many
    right-hand sides runs far below the dense matrix-multiply rate (:ref:`defaults-triangular`),
    and its gradient costs a second solve where a product's costs two products. The inverse of a triangular factor does not square the condition number, as an
    inverse of Kmm would: at cond(Kmm) > 10⁹ the collapsed bound agrees with the solve's to 10⁻¹¹
    (relative), its θ-gradient to 10⁻⁷, which the tests check (2·10⁻¹³ for the bound, measured at
    cond(Kmm) = 5·10¹⁰). The O(M³) solve is cheap beside the O(N M²) product.
    """
    M = tf.shape(L)[-1]
    return tf.linalg.triangular_solve(L, tf.eye(M, dtype=L.dtype), lower=True)


class Projection(NamedTuple):
    """
    One batch of points seen through the inducing variables: all the shared algebra needs from the
    kernel at the data (:func:`whitened_projection`).

    ``A`` and ``Ktilde_diag`` are what the algebra reads; ``Kmn``, ``L`` and ``Knn_diag`` are what
    they were computed from, kept so that :func:`statistics_from_projection` can send its gradient
    to them directly.
    """

    A: tf.Tensor
    """A = L⁻¹ Kmn, shape [M, N] ([L, M, N] for a prior per latent function)."""
    Ktilde_diag: tf.Tensor
    """diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ, shape [N] ([N, L]) (:func:`unexplained_variance`)."""
    Kmn: tf.Tensor
    """K(Z, X), shape [M, N] ([L, M, N])."""
    L: tf.Tensor
    """chol(Kmm), shape [M, M] ([L, M, M])."""
    Knn_diag: tf.Tensor
    """The prior variances Knn,ᵢᵢ, shape [N] ([N, L])."""


@check_shapes(
    "X: [N, D]",
    "L: [outputs..., M, M]",
    "return.A: [outputs..., M, N]",
    "return.Ktilde_diag: [N, outputs...]",
)
def whitened_projection(
    kernel: gpflow.kernels.Kernel,
    inducing_variable: gpflow.inducing_variables.InducingVariables,
    X: tf.Tensor,
    L: tf.Tensor,
) -> Projection:
    """
    A = L⁻¹ Kmn and diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ of the points ``X``, with what they are made of.
    K̃'s diagonal is formed here once, so that the site steps and the objective of one evaluation
    do not each recompute ‖aᵢ‖² over the whole of A. For priors of the latent functions' own
    (:func:`separate_outputs`) every part has their axis: L⁻¹ Kmn is then one per latent function.
    """
    separate = separate_outputs(kernel, inducing_variable)
    kernel, inducing_variable = single_output_parts(kernel, inducing_variable)
    # The ranks are the layout every function below reads (an A per latent function or one):
    # fixed here, as a graph traced for inputs of unknown shape would not know them.
    outputs = [None] if separate else []
    Kmn = tf.ensure_shape(
        gpflow.covariances.Kuf(inducing_variable, kernel, X), outputs + [None] * 2
    )
    A = tf.linalg.matmul(triangular_inverse(L), Kmn)  # A = L⁻¹ Kmn, as a product (see there)
    Knn_diag = tf.ensure_shape(prior_variances(kernel, X), [None] + outputs)
    return Projection(
        A=A, Ktilde_diag=unexplained_variance(A, Knn_diag), Kmn=Kmn, L=L, Knn_diag=Knn_diag
    )


@check_shapes("A: [outputs..., M, N]", "Knn_diag: [N, outputs...]", "return: [N, outputs...]")
def unexplained_variance(A: tf.Tensor, Knn_diag: tf.Tensor) -> tf.Tensor:
    """
    diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ with Qnn,ᵢᵢ = ‖aᵢ‖²: the prior variance of fᵢ that u does not explain.

    It is ≥ 0 exactly. A negative value is rounding error (a kernel evaluated at a lengthscale
    near 0 is the usual cause), and is set to 0: left in, an optimiser would climb it to an
    arbitrarily large "bound".
    """
    explained = tf.reduce_sum(tf.square(A), axis=-2)  # ‖aᵢ‖²            [N] or [L, N]
    if A.shape.rank == 3:
        explained = tf.transpose(explained)  # [N, L], as the sites
    return tf.maximum(Knn_diag - explained, 0.0)


@check_shapes("batch: [L, K, M]", "A: [outputs..., M, N]", "return: [L, K, N]")
def times_shared(batch: tf.Tensor, A: tf.Tensor) -> tf.Tensor:
    """
    batch_l A for each of the L matrices of ``batch``, as one product of the L stacked
    [L·K, M] with the shared A: on CPU one large product runs well above the rate of a
    broadcast batch of them (on letter's [26, 100, 100] by [100, 16000] about 1.3 times). With
    an A per latent function, [L, M, N], the batched product batch_l A_l.
    """
    if A.shape.rank == 3:
        return tf.linalg.matmul(batch, A)
    L, K = tf.shape(batch)[0], tf.shape(batch)[1]
    stacked = tf.reshape(batch, [L * K, tf.shape(batch)[2]])
    return tf.reshape(tf.linalg.matmul(stacked, A), [L, K, tf.shape(A)[1]])


@check_shapes("v: [M, L]", "return: [L, M, 1]")
def latent_batch(v: tf.Tensor) -> tf.Tensor:
    """The columns of ``v`` [M, L], one per latent function (GPflow's layout of ``q_mu``), as a
    batch of L column vectors [L, M, 1], the layout of batched solves and products."""
    return tf.transpose(v)[:, :, None]


@check_shapes("v: [L, M, 1]", "return: [M, L]")
def latent_columns(v: tf.Tensor) -> tf.Tensor:
    """The inverse of :func:`latent_batch`: a batch of L column vectors as the columns of [M, L]."""
    return tf.transpose(v[:, :, 0])


@check_shapes(
    "A: [outputs..., M, N]",
    "Ktilde_diag: [N, outputs...]",
    "mean: [M, L]",
    "root_A: [L, M, N]",
    "return[0]: [N, L]",
    "return[1]: [N, L]",
)
def projected_marginals(
    A: tf.Tensor, Ktilde_diag: tf.Tensor, mean: tf.Tensor, root_A: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """
    Mean and variance of g_il = aᵢᵀ v_l + (the part of g_il that u does not explain), for L
    independent q(v_l) = N(mean_l, S_lᵀ S_l), given the projection A = L⁻¹ Kmn, diag K̃ and
    ``root_A`` = S_l A, stacked:

        E[g_il] = aᵢᵀ mean_l,      Var[g_il] = K̃ᵢᵢ + ‖S_l aᵢ‖²,      K̃ᵢᵢ = Knn,ᵢᵢ − ‖aᵢ‖².

    The one formula for marginals; callers differ only in the square root S they have at hand
    (Rᵀ for a stored q(v) = N(m, R Rᵀ), LB⁻¹ for the optimal q(v) with precision LB LBᵀ).
    """
    if A.shape.rank == 3:  # E[g_il] = a_liᵀ mean_l with an A of each latent function
        Gmu = tf.transpose(tf.linalg.matmul(A, latent_batch(mean), transpose_a=True)[..., 0])
    else:
        Gmu = tf.linalg.matmul(A, mean, transpose_a=True)  # Aᵀ mean                        [N, L]
    Gvar = per_latent(Ktilde_diag) + tf.transpose(tf.reduce_sum(tf.square(root_A), axis=-2))
    return Gmu, Gvar


@check_shapes(
    "sites.a: [N, L]",
    "sites.b: [N, L]",
    "sites.w: [N, L]",
    "prior_mean: [broadcast N, broadcast L]",
    "return.a: [N, L]",
)
def shift_sites(sites: Sites, prior_mean: tf.Tensor) -> Sites:
    """
    Re-express sites on f = μ(x) + g as sites on the zero-mean process g.

    a + b(μ + g) − w(μ + g)²/2 = (a + bμ − wμ²/2) + (b − wμ) g − w g²/2.
    """
    a = sites.a + sites.b * prior_mean - 0.5 * sites.w * tf.square(prior_mean)
    b = sites.b - sites.w * prior_mean
    return Sites(a=a, b=b, w=sites.w)


@check_shapes(
    "projection.A: [outputs..., M, N]",
    "projection.Ktilde_diag: [N, outputs...]",
    "sites.a: [N, L]",
    "sites.b: [N, L]",
    "sites.w: [N, L]",
    "return.AWAt: [L, M, M]",
    "return.Ab: [M, L]",
    "return.sum_a: []",
    "return.trace: []",
)
def statistics_from_projection(projection: Projection, sites: Sites) -> SiteStatistics:
    r"""
    The site statistics of one batch (module docstring), given its projection, for the L latent
    functions of the sites' columns at once: A W_l Aᵀ for each (a batched product, N·M² each),
    A b_l as one product, and Σ a and the trace summed over all of them. A is shared.

    The gradient is written by hand and goes to Kmn, L and diag Knn directly, not through A. For
    upstream gradients P̄_l, ḡ_l and t̄ of A W_l Aᵀ, A b_l and the trace (S_l = (P̄_l + P̄_lᵀ)/2),
    A receives

        Ā = Σ_l 2 (S_l − t̄ I) A W_l + Σ_l ḡ_l b_lᵀ

    (W_l restricted to the points with K̃ᵢᵢ > 0 in the t̄ term), and since Kmn = L A, the two
    products that autodiff would take with this N-column matrix fold into M × M algebra:
    L̄ = −tril(L⁻ᵀ Ā Aᵀ) with, Ḡ holding the ḡ_l as its columns,
    Ā Aᵀ = Σ_l 2 (S_l − t̄ I) A W_l Aᵀ + Ḡ (A b)ᵀ, and K̄mn = L⁻ᵀ Ā = Σ_l (H_l A) W_l + (L⁻ᵀ Ḡ) bᵀ
    with H_l = 2 L⁻ᵀ (S_l − t̄ I). The backward pass then costs one N·M² product per latent
    function where autodiff through A W Aᵀ and A = L⁻¹ Kmn took three. The site gradients are
    w̄_il = aᵢᵀ S_l aᵢ + t̄ K̃ᵢᵢ (one more such product, pruned from a graph that does not use it),
    b̄ = Aᵀ Ḡ and ā_il = the upstream of Σ a. A and diag K̃ themselves receive no gradient: theirs
    has been passed on to what they are made of.

    With an A of each latent function ([L, M, N], :func:`separate_outputs`) nothing is shared to
    fold the backward pass into: the same statistics are formed by batched products and
    differentiated through A as TensorFlow differentiates them.
    """
    A, Ktilde_diag, Kmn, L, Knn_diag = projection
    if A.shape.rank == 3:
        return SiteStatistics(
            AWAt=tf.linalg.matmul(A * tf.transpose(sites.w)[:, None, :], A, transpose_b=True),
            Ab=latent_columns(tf.linalg.matmul(A, latent_batch(sites.b))),
            sum_a=tf.reduce_sum(sites.a),
            trace=tf.reduce_sum(sites.w * Ktilde_diag),
        )

    @tf.custom_gradient
    def statistics(
        Kmn: tf.Tensor, L: tf.Tensor, Knn_diag: tf.Tensor, a: tf.Tensor, b: tf.Tensor, w: tf.Tensor
    ):
        wT = tf.transpose(w)[:, None, :]  # the site precisions of latent l in row l      [L, 1, N]
        AWAt = times_shared(A * wT, tf.transpose(A))  # A W_l Aᵀ                         [L, M, M]
        Ab = tf.linalg.matmul(A, b)  # A b                                                 [M, L]
        trace = tf.reduce_sum(w * Ktilde_diag[:, None])  # Σᵢ Σ_l w_il (Knn,ᵢᵢ − Qnn,ᵢᵢ)

        def gradient(AWAt_bar, Ab_bar, sum_a_bar, trace_bar):
            M = tf.shape(A)[0]
            eye = tf.eye(M, dtype=A.dtype)
            S = 0.5 * (AWAt_bar + tf.linalg.matrix_transpose(AWAt_bar))  #              [L, M, M]
            # K̃ᵢᵢ was clamped at 0 where rounding made it negative: no gradient flows there.
            unclamped = Ktilde_diag > 0.0
            explained = tf.cast(unclamped, A.dtype)
            all_unclamped = tf.reduce_all(unclamped)
            w_total = tf.reduce_sum(w, axis=1)  # Σ_l w_il                                    [N]
            # Σ_l A W'_l Aᵀ, W' = W on the unclamped points: Σ_l A W_l Aᵀ unless some are clamped.
            AWAt_unclamped = tf.cond(
                all_unclamped,
                lambda: tf.reduce_sum(AWAt, axis=0),
                lambda: tf.linalg.matmul(A * (w_total * explained), A, transpose_b=True),
            )
            A_bar_At = (
                2.0 * tf.reduce_sum(tf.linalg.matmul(S, AWAt), axis=0)
                - 2.0 * trace_bar * AWAt_unclamped
                + tf.linalg.matmul(Ab_bar, Ab, transpose_b=True)
            )  # Ā Aᵀ                                                                   [M, M]
            L_inv_T = tf.transpose(triangular_inverse(L))
            L_bar = -tf.linalg.band_part(tf.linalg.matmul(L_inv_T, A_bar_At), -1, 0)
            H = 2.0 * tf.linalg.matmul(L_inv_T, S - trace_bar * eye)  #                  [L, M, M]
            HA_W = tf.reduce_sum(times_shared(H, A) * wT, axis=0)  # Σ_l H_l A W_l
            Kmn_bar = HA_W + tf.linalg.matmul(
                tf.linalg.matmul(L_inv_T, Ab_bar), b, transpose_b=True
            )
            Kmn_bar = tf.cond(
                all_unclamped,
                lambda: Kmn_bar,
                # The t̄ term without the clamped points: add back 2 t̄ L⁻ᵀ A W on them.
                lambda: Kmn_bar
                + 2.0 * trace_bar * tf.linalg.matmul(L_inv_T, A) * (w_total * (1.0 - explained)),
            )
            Knn_diag_bar = trace_bar * w_total * explained
            SA = times_shared(S, A)  #                                                   [L, M, N]
            w_bar = tf.transpose(tf.reduce_sum(A * SA, axis=1)) + trace_bar * Ktilde_diag[:, None]
            b_bar = tf.linalg.matmul(A, Ab_bar, transpose_a=True)
            a_bar = sum_a_bar * tf.ones_like(a)
            return Kmn_bar, L_bar, Knn_diag_bar, a_bar, b_bar, w_bar

        return (AWAt, Ab, tf.reduce_sum(a), trace), gradient

    AWAt, Ab, sum_a, trace = statistics(Kmn, L, Knn_diag, sites.a, sites.b, sites.w)
    return SiteStatistics(AWAt=AWAt, Ab=Ab, sum_a=sum_a, trace=trace)
