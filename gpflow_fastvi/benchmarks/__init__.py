"""
The benchmark and experiment jobs behind the ``gpflow-fastvi`` commands.

* ``compare``: the fast methods against GPflow's SVGP on one data set (:mod:`.compare`, which runs
  the methods of :mod:`.methods` and the baselines of :mod:`.baselines` on the shared set-up of
  :mod:`.harness`, into a :class:`~.result.ComparisonResult`; figures in :mod:`.figures`);
* ``bench``: every model against the baselines on the benchmark sets (:mod:`.runs`), and ``plot``:
  the figures and tables drawn from their results (:mod:`.report`);
* ``scaling``: the cost of one update of the shared Gaussian core against n and m (:mod:`.scaling`);
* ``kl-correction``: King & Lawrence's experiments with the KL-corrected bound
  (:mod:`.kl_correction`).

The names and defaults of all of them are in :mod:`.choices` and their command-line arguments in
:mod:`.cli_args`; those two import only the standard library, and this package imports nothing,
so that ``gpflow-fastvi --help`` does not load TensorFlow. The job modules import TensorFlow, GPflow
and (for figures) matplotlib; keep them out of ``gpflow_fastvi/__init__.py``.
"""
