"""
GPflow's own SVGP tests with a model of :mod:`gpflow_fastvi` in SVGP's place.

GPflow's tests are not kept here: :mod:`gpflow_suite.run` fetches the source distribution of the
installed GPflow and runs its tests under the pytest plugin :mod:`gpflow_suite.plugin`, which puts
the chosen model wherever GPflow's tests can reach ``SVGP``. See the contributing notes in the
documentation (the guarantees page) for the table it prints and what each refusal means.
"""
