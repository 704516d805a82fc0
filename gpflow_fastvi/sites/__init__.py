"""
Site rules: one module per rule, each a few pure functions from (labels, site parameters) to
:class:`~gpflow_fastvi.types.Sites`.

=====================  ==========  ===============================  ========
rule                   bᵢ          wᵢ                               bound?
=====================  ==========  ===============================  ========
Jaakkola–Jordan        yᵢ / 2      2 λ(ξᵢ), λ(ξ) = tanh(ξ/2)/(4ξ)   yes
=====================  ==========  ===============================  ========
"""

from .jaakkola_jordan import jj_lambda, jj_log_sigmoid_bound, jj_optimal_xi, jj_sites

__all__ = ["jj_lambda", "jj_log_sigmoid_bound", "jj_optimal_xi", "jj_sites"]
