"""Binary labels: GPflow's Bernoulli uses {0, 1}, the site formulas use {−1, +1}. Convert here, once."""

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from ..exceptions import InvalidDataError


def binary_labels_to_01(Y: np.ndarray, name: str = "Y") -> np.ndarray:
    """
    Check that ``Y`` holds binary labels in {0, 1} or {−1, +1} and return a new array in {0, 1}, of
    ``Y``'s float type (float64 for integer labels).

    A single class present (all 0, or all +1) is accepted; any other value raises
    :class:`~gpflow_fastvi.exceptions.InvalidDataError` naming the offending values.
    """
    Y = np.asarray(Y)
    dtype = Y.dtype if np.issubdtype(Y.dtype, np.floating) else np.float64
    values = np.unique(Y)
    if values.size and not np.all(np.isfinite(values.astype(np.float64))):
        raise InvalidDataError(f"{name} contains NaN or infinite labels.")
    if set(values.tolist()) <= {0.0, 1.0}:
        return Y.astype(dtype, copy=True)
    if set(values.tolist()) <= {-1.0, 1.0}:
        return (Y > 0).astype(dtype)
    shown = ", ".join(str(v) for v in values[:6].tolist()) + (", ..." if values.size > 6 else "")
    raise InvalidDataError(
        f"{name} must hold binary labels, either {{0, 1}} (GPflow's Bernoulli convention) or "
        f"{{-1, +1}}; found the values {{{shown}}}."
    )


@check_shapes("Y: [N, L]", "return: [N, L]")
def signed_labels(Y: tf.Tensor) -> tf.Tensor:
    """Map labels in {0, 1} to y = 2Y − 1 in {−1, +1}, the convention of the site formulas."""
    return 2.0 * Y - 1.0
