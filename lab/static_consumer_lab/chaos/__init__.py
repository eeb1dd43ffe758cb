"""Chaos runs: a seeded fault schedule against pods running the README's pod main (and pool pods), on a
3-node cluster with an authorizer, and invariants checked from the raw per-record evidence.

- ``schedule``: the seeded, pure fault schedule; ``windows``: how long a fault's effects may last
- ``evidence``: what a run records, and its files; ``invariants``: the checks over it (pure)
- ``members``: the pods, restarted like pods; ``faults``: carrying a fault out; ``sampler``: the
  committed offsets, read by a process of its own
- ``run``: one run; ``report``: its figures (``python -m static_consumer_lab.chaos.report RUN_DIR``)

docs/chaos.md says what a run does and what the figures were; ``bench/chaos.py`` (``make chaos``) is
the long run, ``integration/test_chaos.py`` the short one.
"""
