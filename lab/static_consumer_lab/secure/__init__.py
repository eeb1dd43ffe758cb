"""The secure listeners of the test broker and what they need.

- ``listeners``: the TLS, mutual-TLS, SASL_SSL and OAUTHBEARER listeners of the secure test broker
- ``sasl``: the SASL listener and its users
- ``authorizer``: a broker with KRaft's ``StandardAuthorizer``: super users for the harness, an
  unprivileged principal and the ACLs a test gives it
- ``certs``: a throwaway CA and broker/client certificates (also expired and wrong-host ones)
- ``tokens``: unsigned OAUTHBEARER test tokens for Kafka's unsecured validator
"""
