"""
Plain, slow references that the tests compare the package against: Gauss–Hermite quadrature of
small GP integrals (:mod:`.quadrature`), the paper's coordinate-wise algorithm for the full GP
(:mod:`.coordinate`) and expectation propagation (:mod:`.ep`), all in NumPy and SciPy.

They are not part of the installed package; the experiments in ``experiments/`` and the tutorial
on :class:`~gpflow_fastvi.VIConcave` import them too, with the repository root on the path.
"""
