"""
Site rules: one module per rule, each a few pure functions from (labels, site parameters) to
:class:`~gpflow_fastvi.types.Sites`.

====================  ===============  ==============================  ==========
rule                  bᵢ               wᵢ                              bound?
====================  ===============  ==============================  ==========
Jaakkola–Jordan       yᵢ / 2           2 λ(ξᵢ), λ(ξ) = tanh(ξ/2)/(4ξ)  yes
Taylor at ξᵢ          gᵢ + wᵢ ξᵢ       −hᵢ (derivatives of log p)      no (local)
Pólya-Gamma           yᵢ / 2           E[ωᵢ] = tanh(cᵢ/2)/(2cᵢ)        yes
expectation at q(fᵢ)  ∂fᵦ/∂m + wᵢ mᵢ   −2 ∂fᵦ/∂v, fᵦ = E_q[log p]      the ELBO
logistic-softmax      (y_ic − γ_ic)/2  (y_ic + γ_ic) E[PG(1, c_ic)]    yes
====================  ===============  ==============================  ==========

The last rule gives C sites per point, one per class (labels one-hot, y_ic), for the multi-class
likelihood :class:`~gpflow_fastvi.likelihoods.LogisticSoftmax`. Taylor and expectation sites give
one per point, or one per point and class for GPflow's ``Softmax`` (Taylor with the Hessian's
diagonal; the expectation by fixed draws, :func:`expected_log_softmax`).
"""

from .expectation import (
    expectation_sites,
    expected_log_density_gradient,
    expected_log_softmax,
    expected_log_softmax_gradient,
)
from .jaakkola_jordan import jj_lambda, jj_log_sigmoid_bound, jj_optimal_xi, jj_sites
from .logistic_softmax import (
    LogisticSoftmaxLocals,
    ls_alpha,
    ls_optimal_locals,
    ls_sites,
)
from .polya_gamma import pg_kl, pg_mean, pg_optimal_c, pg_sites
from .taylor import (
    log_density_derivatives,
    mixed_derivatives,
    softmax_derivatives,
    taylor_sites,
)

__all__ = [
    "LogisticSoftmaxLocals",
    "expectation_sites",
    "expected_log_density_gradient",
    "expected_log_softmax",
    "expected_log_softmax_gradient",
    "jj_lambda",
    "jj_log_sigmoid_bound",
    "jj_optimal_xi",
    "jj_sites",
    "log_density_derivatives",
    "ls_alpha",
    "ls_optimal_locals",
    "ls_sites",
    "mixed_derivatives",
    "pg_kl",
    "pg_mean",
    "pg_optimal_c",
    "pg_sites",
    "softmax_derivatives",
    "taylor_sites",
]
