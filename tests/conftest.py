"""The unit, lab, architecture and docs checks: no broker. The shared helpers beside this file
(``fakes``, ``messages``, ``import_graph``, ``demo_events``) are importable from every folder below it,
since pytest puts the folder of this conftest on ``sys.path``."""
