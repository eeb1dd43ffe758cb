"""Consumers in child processes, as the tests, benchmarks and the demo run them.

- ``child``: the child process (``python -m static_consumer_lab.children.child SPEC``): a plain
  confluent-kafka consumer, or the StaticConsumer of ``static_member``, or the Spark pod of
  ``spark_member``; its events on stdout
- ``specs``: child specs with test defaults; ``processes``: one child, its events collected;
  ``group``: a whole consumer group of children
- ``workload``: the modelled per-record work, state rebuilds and liveness ticks; ``otel_totals``: the
  child's OpenTelemetry totals as events; ``loop_lag``: how long an asyncio loop could not run
- ``pauses``: freezing a member (SIGSTOP) and judging what it handed out
- ``pods``: a pod running ``static-consumer run --processes N`` in a child; ``pool_app``: its handler
"""
