"""The lab of static-consumer: a real Apache Kafka broker for tests, benchmarks and demos, and the pytest
plugin that serves it. Its parts, one package each:

- ``brokers``: where a broker comes from (an existing cluster, the container, KRaft nodes on the JVM from
  Maven Central jars), and small bounded operations against it (topics, producing, group reads)
- ``secure``: the secure listeners of the test broker (TLS, mutual TLS, SASL, OAUTHBEARER), its
  authorizer, certificates and tokens
- ``children``: consumers in child processes (plain confluent-kafka, StaticConsumer, Spark, pods running
  ``static-consumer run``), their workload and events, whole groups of them, freezing them
- ``producer``: the one background producer of the tests, benchmarks and the demo
- ``spark_servers``: a Spark Connect server and a standalone Spark cluster for tests
- ``plugin``: the opt-in pytest plugin (``-p static_consumer_lab.plugin``)
- ``demo``: the rolling-deploy experiment behind ``static-consumer demo``

Importing this package imports nothing else, so the plugin costs pytest and the standard library only.
"""
