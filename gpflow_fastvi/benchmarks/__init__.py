"""
The jobs behind the ``gpflow-fastvi`` commands (:mod:`gpflow_fastvi.cli`), one module or a few per
command:

* ``compare``: the fast methods against GPflow's SVGP on one data set (:mod:`.compare`, which runs
  the methods of :mod:`.methods` and the baselines of :mod:`.baselines` on the shared set-up of
  :mod:`.harness`, into a :class:`~.result.ComparisonResult`; figures in :mod:`.figures`);
* ``bench``: every model against the baselines on the benchmark sets (:mod:`.runs`), and ``plot``:
  the figures and tables drawn from their results (:mod:`.report`);
* ``scaling``: the cost of one update of the shared Gaussian core against n and m (:mod:`.scaling`);
* ``kl-correction``: King & Lawrence's experiments with the KL-corrected bound
  (:mod:`.kl_correction`);
* ``inducing``: random, k-means and greedy inducing inputs against M (:mod:`.inducing`).

The names and defaults of all of them are in :mod:`.choices` and their command-line arguments in
:mod:`.cli_args`. Those two load no TensorFlow (:mod:`.choices` takes the benchmark sets' names
from :mod:`gpflow_fastvi.datasets`, which needs NumPy only), and this package's ``__init__``
imports nothing, so that ``gpflow-fastvi --help`` answers at once. The job modules import
TensorFlow, GPflow and (for figures) matplotlib; keep them out of ``gpflow_fastvi/__init__.py``.

The measurement scripts of the benchmark page that are not commands live outside the installed
package, in the repository's ``experiments/``; they build on the set-up and baselines here.
"""
