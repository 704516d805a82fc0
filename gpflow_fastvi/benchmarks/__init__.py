"""
The benchmark jobs behind ``gpflow-fastvi bench``, ``gpflow-fastvi plot`` and
``gpflow-fastvi scaling``: every model against GPflow's SVGP baselines on the benchmark sets
(:mod:`.runs`), the figures and tables drawn from their results (:mod:`.report`), and the cost of
one update of the shared Gaussian core against n and m (:mod:`.scaling`).

TensorFlow, GPflow and (for figures) matplotlib are imported with these modules; keep them out of
``gpflow_fastvi/__init__.py``.
"""
