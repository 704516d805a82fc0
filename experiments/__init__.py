"""
The measurements behind the benchmark page that are not ``gpflow-fastvi`` commands: one script
per question, run from the repository root as ``python -m experiments.<name>`` (see
``experiments/README.md``).

They are research code, kept beside the package rather than in it: the wheel does not install
them, nothing in :mod:`gpflow_fastvi` imports them, and they may import the test references of
:mod:`tests.references`. What they share with the ``gpflow-fastvi`` commands (the start of every
run, the baselines, the command-line arguments) comes from :mod:`gpflow_fastvi.benchmarks`.
"""
