"""The secure listeners of the test broker and what they need (the brokers start with them: ``brokers``).

- ``listeners``: the TLS, mutual-TLS, SASL_SSL and OAUTHBEARER listeners of the secure test broker
- ``sasl``: the SASL listener and its users
- ``certs``: a throwaway CA and broker/client certificates (also expired and wrong-host ones)
- ``tokens``: unsigned OAUTHBEARER test tokens for Kafka's unsecured validator
"""
