"""What the user asked for: one frozen, validated :class:`ConsumerSettings` (``_model``), and what is
derived from it.

- ``_model``: the settings model, its fields and validators;
- ``_rules``: owned passthrough keys, cross-field rules, validation messages, misspelled variables (pure);
- ``_defaults``: the librdkafka properties the library sets for its consumers, and their memory bound (data);
- ``_passthrough``: the ``librdkafka`` passthrough checked by librdkafka's own parser, without connecting;
- ``_config``: settings -> librdkafka, AdminClient and kafka-python configurations (pure);
- ``_docgen``: docs/configuration.md generated from the model.
"""

from static_consumer._security.oauth import OAuthBearerToken
from static_consumer._security.secrets import REDACTED, is_secret_key
from static_consumer.settings._model import ConsumerSettings, LibrdkafkaValue
from static_consumer.settings._rules import CLASSIC_ONLY_KEYS, ENV_PREFIX, OWNED_KEYS, env_var

__all__ = [
    "CLASSIC_ONLY_KEYS",
    "ENV_PREFIX",
    "OWNED_KEYS",
    "REDACTED",
    "ConsumerSettings",
    "LibrdkafkaValue",
    "OAuthBearerToken",
    "env_var",
    "is_secret_key",
]
