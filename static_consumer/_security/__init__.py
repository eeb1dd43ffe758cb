"""What keeps secrets secret and credentials usable. These modules do not import the settings: each
reads the few fields it needs through a small Protocol of its own, so the settings can build on them.

- ``secrets``: what is secret, and masking it in configs, texts and log records
- ``tls``: the TLS files checked locally before any client uses them
- ``oauth``: OAUTHBEARER tokens from the settings' provider, for librdkafka and kafka-python
"""
