"""
Inducing inputs: accept what a GPflow user would pass, or place them as the papers do: by k-means
(Izmailov & Kropotov; Hensman et al.) or greedily, to shrink the bound's trace term (Titsias).
"""

import warnings
from typing import Any, Optional, Union

import gpflow
import numpy as np
from scipy.cluster.vq import kmeans2

from .distribution import set_trainable
from .exceptions import InvalidDataError
from .validation import as_float_array, inducing_inputs, one_of, positive_int

InducingSpec = Union[int, np.ndarray, gpflow.inducing_variables.InducingVariables]


def kmeans_inducing_points(X: np.ndarray, num_inducing: int, *, seed: int = 0) -> np.ndarray:
    """
    ``num_inducing`` k-means centres of the rows of ``X`` (k-means++ start, SciPy's ``kmeans2``),
    the placement used by :cite:t:`izmailov2017faster`. Deterministic for a given ``seed``.
    """
    X = np.asarray(X, dtype=np.float64)
    _check_num_inducing(num_inducing, X.shape[0])
    if num_inducing == X.shape[0]:
        return X.copy()
    with warnings.catch_warnings():
        # An empty cluster keeps its k-means++ seed, which is a data point: harmless here.
        warnings.filterwarnings("ignore", message="One of the clusters is empty")
        # Fewer distinct rows than centres (binary features, repeated rows): k-means++ runs out of
        # new points and divides 0 by 0 for its next draw's weights; its centres are still rows.
        warnings.filterwarnings("ignore", message="invalid value encountered in divide")
        centres, _ = kmeans2(X, num_inducing, minit="++", seed=np.random.default_rng(seed))
    return centres


def make_inducing_variable(
    inducing_variable: InducingSpec, X: Optional[np.ndarray] = None, *, seed: int = 0
) -> gpflow.inducing_variables.InducingVariables:
    """
    A GPflow inducing variable from an inducing variable (used as is), an array Z [M, D] (copied,
    checked: M ≥ 1, finite, and as many columns as ``X`` when ``X`` is given), or an int M (k-means
    centres of ``X``, which it then needs).
    """
    if isinstance(inducing_variable, gpflow.inducing_variables.InducingVariables):
        return inducing_variable
    if isinstance(inducing_variable, (int, np.integer)) and not isinstance(inducing_variable, bool):
        if X is None:
            raise ValueError(
                "An int M of inducing points (k-means centres) needs the data X; pass the "
                "inducing inputs as an array Z [M, D] or a GPflow inducing variable instead."
            )
        return gpflow.inducing_variables.InducingPoints(
            kmeans_inducing_points(X, int(inducing_variable), seed=seed)
        )
    Z = inducing_inputs(inducing_variable)
    if X is not None and Z.shape[1] != X.shape[1]:
        raise InvalidDataError(
            f"Inducing inputs Z must have shape [M, D] with D = {X.shape[1]} (the columns of X); "
            f"got shape {list(Z.shape)}."
        )
    return gpflow.inducing_variables.InducingPoints(Z)


def set_inducing_trainable(
    inducing_variable: gpflow.inducing_variables.InducingVariables,
    train_inducing: Optional[bool],
    *,
    given_as_variable: bool,
    full: bool = False,
) -> None:
    """
    Whether a model's optimiser moves its inducing inputs, as a constructor's ``train_inducing``
    says: ``True`` or ``False`` as given; ``None`` as :class:`gpflow.models.SVGP` does, which
    trains them, except that an inducing variable the user built (``given_as_variable``) keeps
    the flags it has, and the full GP (``full``: Z = X, u = f(X)) keeps them fixed.
    """
    if train_inducing is None:
        if given_as_variable:
            return
        train_inducing = not full
    elif not isinstance(train_inducing, (bool, np.bool_)):
        raise TypeError(f"train_inducing must be True, False or None; got {train_inducing!r}.")
    set_trainable(inducing_variable, bool(train_inducing))


GREEDY_CRITERIA = ("trace", "variance")

# Entries of one block of kernel evaluations: the full working set's trace criterion passes over
# the N × N kernel matrix in blocks of rows of about this size, never forming it.
_KERNEL_BLOCK_ENTRIES = 2**22


def greedy_inducing_points(
    X: np.ndarray,
    kernel: gpflow.kernels.Kernel,
    num_inducing: int,
    *,
    working_set_size: Optional[int] = None,
    weights: Optional[np.ndarray] = None,
    seed: int = 0,
    criterion: str = "trace",
) -> np.ndarray:
    """
    ``num_inducing`` rows of ``X`` chosen one at a time to shrink the variational bound's trace
    term, Σᵢ wᵢ (Knn − Qnn)ᵢᵢ (Qnn = Knm Kmm⁻¹ Kmn), as in Titsias's greedy selection
    (:cite:t:`titsias2009variational`; "Algorithm 2" of the notes in the references).

    Start from no inducing inputs. At each step draw a working set of the rows not yet chosen
    (all of them when ``working_set_size`` is None) and add the one that scores highest:

    - ``criterion="trace"``: its exact reduction of the trace, Σᵢ wᵢ rᵢⱼ² / (rⱼⱼ + ε), where
      r = Knn − Qnn is the covariance of f given the inputs chosen so far. Each step costs
      O(N·J·(D + m)) for a working set of J rows, so O(N·J·M²) in all; the full working set keeps
      Σᵢ wᵢ rᵢⱼ² for every row up to date instead, one pass over the N × N kernel matrix per step
      (O(N²·M) in all), in blocks.
    - ``criterion="variance"``: the weighted conditional variance wⱼ rⱼⱼ, the reduction at the
      chosen row alone. With the full working set and unit weights this is the pivoted Cholesky
      factorisation of Knn, stopped after M pivots: O(N·M²) in all.

    The trace criterion is the one that follows the bound; at small M it places inputs several
    times better (on the banana set with M = 8, a trace of 463 against pivoted Cholesky's 2053 and
    k-means's 472), while the variance criterion is the cheap one for large N.

    Both keep the rows of L⁻¹Kmn (L = chol(Kmm + εI)) and the diagonal of r, updated by one row
    per step (the incremental Cholesky factorisation): memory O(N·M) plus one block of kernel
    evaluations, never an N × N matrix. ε is GPflow's jitter (:func:`gpflow.config.default_jitter`),
    which the models add to Kmm too: Qnn is theirs, a pivot's variance rⱼⱼ + ε never vanishes, and
    once the inputs chosen explain Knn to within ε (a smooth kernel in few dimensions: on banana
    after about 125 inputs) the next choices are still made, so that Z has M rows, and add
    little.

    :param X: training inputs [N, D].
    :param kernel: the GPflow kernel whose Knn the inputs should summarise (its current
        hyperparameters).
    :param num_inducing: M, between 1 and N.
    :param working_set_size: J, the candidates drawn (without replacement) at each step; None for
        every row not yet chosen.
    :param weights: wᵢ ≥ 0, one per row ([N] or [N, 1]), not all zero; default ones. A
        classification model's site precisions (``model._site_precisions(X, Y)``) weight the rows by
        how much the likelihood pins f there.
    :param seed: seeds the working sets (unused when ``working_set_size`` is None).
    :param criterion: ``"trace"`` or ``"variance"``, as above.
    :returns: Z [M, D], a copy of the chosen rows in the order they were chosen.
    :raises InvalidDataError: for bad inputs (M outside 1 … N among them).
    """
    X = as_float_array(X, "X")
    N = X.shape[0]
    if not isinstance(kernel, gpflow.kernels.Kernel) or isinstance(
        kernel, gpflow.kernels.MultioutputKernel
    ):
        raise TypeError(
            f"kernel must be a single-output GPflow kernel; got {type(kernel).__name__}."
        )
    if isinstance(num_inducing, bool) or not isinstance(num_inducing, (int, np.integer)):
        raise TypeError(f"num_inducing must be an int; got {num_inducing!r}.")
    _check_num_inducing(num_inducing, N)
    working_set_size = positive_int(working_set_size, "working_set_size", optional=True)
    criterion = one_of(criterion, GREEDY_CRITERIA, "criterion")
    w = _row_weights(weights, N)
    rng = np.random.default_rng(seed)

    def columns_of_knn(columns: Any) -> np.ndarray:
        return kernel(X, X[columns]).numpy()

    d = kernel(X, full_cov=False).numpy().copy()  # rⱼⱼ, the diagonal of Knn − Qnn
    jitter = gpflow.config.default_jitter()
    V = np.zeros((num_inducing, N))  # rows of L⁻¹ Kmn, one per chosen input
    chosen = np.zeros(N, dtype=bool)
    keeps_all_scores = criterion == "trace" and working_set_size is None
    if keeps_all_scores:
        s = _knn_product(X, kernel, w, squared=True)  # Σᵢ wᵢ rᵢⱼ² with m = 0
    order = []
    for m in range(num_inducing):
        candidates = np.flatnonzero(~chosen)
        if working_set_size is not None and candidates.size > working_set_size:
            candidates = rng.choice(candidates, working_set_size, replace=False)
        if criterion == "variance":
            scores = w[candidates] * d[candidates]
        elif keeps_all_scores:
            scores = s[candidates] / (d[candidates] + jitter)
        else:
            r = columns_of_knn(candidates) - V[:m].T @ V[:m, candidates]  # [N, J]
            scores = (w @ r**2) / (d[candidates] + jitter)
        j = int(candidates[np.argmax(scores)])
        # The new row of L⁻¹Kmn: r[:, j] / √(rⱼⱼ + ε), ε on the pivot alone (it is on Kmm's diagonal).
        u = (columns_of_knn([j])[:, 0] - V[:m].T @ V[:m, j]) / np.sqrt(d[j] + jitter)
        if keeps_all_scores:
            # r ← r − u uᵀ, so Σᵢ wᵢ rᵢⱼ² ← Σᵢ wᵢ rᵢⱼ² − 2 uⱼ (r W u)ⱼ + uⱼ² Σᵢ wᵢ uᵢ².
            wu = w * u
            rwu = _knn_product(X, kernel, wu) - V[:m].T @ (V[:m] @ wu)
            s = s - 2.0 * u * rwu + u**2 * (wu @ u)
        V[m] = u
        d = d - u**2
        chosen[j] = True
        order.append(j)
    return X[order].copy()


def _check_num_inducing(num_inducing: int, N: int) -> None:
    """An :class:`InvalidDataError` unless 1 ≤ M ≤ N: inducing inputs among (or as many as) N points."""
    if not 1 <= num_inducing <= N:
        raise InvalidDataError(
            f"The number of inducing points must be between 1 and the number of data points "
            f"N = {N}; got M = {num_inducing}."
        )


def _row_weights(weights: Optional[np.ndarray], N: int) -> np.ndarray:
    """The greedy criterion's row weights [N]: ones by default, else checked (finite, ≥ 0, not all 0)."""
    if weights is None:
        return np.ones(N)
    w = np.array(weights, dtype=np.float64)
    if w.shape not in ((N,), (N, 1)):
        raise InvalidDataError(
            f"weights must have shape [N] or [N, 1] with N = {N}; got {list(w.shape)}."
        )
    w = w.reshape(N)
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise InvalidDataError("weights must be finite, non-negative and not all zero.")
    return w


def _knn_product(
    X: np.ndarray, kernel: gpflow.kernels.Kernel, v: np.ndarray, *, squared: bool = False
) -> np.ndarray:
    """
    Knn v (or (Knn ∘ Knn) v, ``squared``) in blocks of rows, never holding more than one block of
    Knn.
    """
    N = X.shape[0]
    step = max(1, _KERNEL_BLOCK_ENTRIES // N)
    products = []
    for start in range(0, N, step):
        block = kernel(X[start : start + step], X).numpy()
        products.append((block**2 if squared else block) @ v)
    return np.concatenate(products)
