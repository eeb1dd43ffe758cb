"""An opt-in SASL_PLAINTEXT listener for the JVM harness: SCRAM (SHA-256, SHA-512) and PLAIN users.

SCRAM credentials live in the KRaft metadata log, so they are written when the storage is formatted
(``kafka-storage format --add-scram``); PLAIN users live in the listener's JAAS config. The PLAINTEXT
listener stays, so the harness itself (readiness, topic creation) needs no credentials. The same users
serve the SASL_SSL listener of :mod:`static_consumer_lab.secure.listeners` (``broker_config(listener=...)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

LISTENER = "SASL_PLAINTEXT"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
DEFAULT_MECHANISMS = ("SCRAM-SHA-256", "PLAIN")
# Both the --add-scram argument ([name=..,password=..]) and the JAAS config (user_x="..") are parsed
# by Kafka without escapes, so names and passwords are limited to characters neither syntax treats
# specially.
_SAFE = re.compile(r"[A-Za-z0-9._@+-]+")


@dataclass(frozen=True)
class SaslUsers:
    """Users (name -> password) the SASL listener accepts through every mechanism in ``mechanisms``.

    The repr names the users only: the passwords are test secrets, but tests assert they never leak.
    """

    users: Mapping[str, str]
    mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS

    def __post_init__(self) -> None:
        if not self.users:
            raise ValueError("a SASL listener needs at least one user")
        unknown = [m for m in self.mechanisms if m not in MECHANISMS]
        if unknown or not self.mechanisms:
            raise ValueError(f"mechanisms must be a non-empty subset of {MECHANISMS}, got {self.mechanisms}")
        for name, password in self.users.items():
            if not (_SAFE.fullmatch(name) and _SAFE.fullmatch(password)):
                raise ValueError(f"user {name!r}: names and passwords must match {_SAFE.pattern}")
        object.__setattr__(self, "users", MappingProxyType(dict(self.users)))  # read-only, like the rest

    def __repr__(self) -> str:
        return f"SaslUsers(users={sorted(self.users)}, mechanisms={self.mechanisms})"

    def password(self, user: str) -> str:
        return self.users[user]

    @property
    def default_user(self) -> str:
        return next(iter(self.users))

    def listeners(self) -> dict[str, str]:
        """Listener name -> security protocol (what the harness adds for ``sasl=``)."""
        return {LISTENER: LISTENER}

    def broker_config(self, listener: str = LISTENER) -> dict[str, str]:
        """server.properties entries for a SASL listener (listeners and the protocol map excepted)."""
        prefix = f"listener.name.{listener.lower()}"
        config = {f"{prefix}.sasl.enabled.mechanisms": ",".join(self.mechanisms)}
        for scram in (m for m in self.mechanisms if m.startswith("SCRAM")):
            # Credentials come from the metadata log; the login module only has to be named.
            config[f"{prefix}.{scram.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        if "PLAIN" in self.mechanisms:
            users = " ".join(f'user_{name}="{password}"' for name, password in self.users.items())
            config[f"{prefix}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            )
        return config

    def format_args(self) -> list[str]:
        """``kafka-storage format`` arguments that create the SCRAM credentials."""
        args: list[str] = []
        for scram in (m for m in self.mechanisms if m.startswith("SCRAM")):
            for name, password in self.users.items():
                args += ["--add-scram", f"{scram}=[name={name},password={password}]"]
        return args

    def client_config(
        self,
        bootstrap: str,
        user: str | None = None,
        mechanism: str = "SCRAM-SHA-256",
        security_protocol: str = LISTENER,
    ) -> dict[str, Any]:
        """librdkafka properties (e.g. the ``extra`` of :mod:`static_consumer_lab.brokers.kafka_ops`)."""
        user = user or self.default_user
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": security_protocol,
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": self.users[user],
        }

    def settings_fields(
        self,
        bootstrap: str,
        user: str | None = None,
        mechanism: str = "SCRAM-SHA-256",
        security_protocol: str = LISTENER,
    ) -> dict[str, Any]:
        """ConsumerSettings fields that connect as ``user`` (the password as a plain string)."""
        user = user or self.default_user
        return {
            "bootstrap_servers": bootstrap,
            "security_protocol": security_protocol,
            "sasl_mechanism": mechanism,
            "sasl_username": user,
            "sasl_password": self.users[user],
        }


__all__ = ["DEFAULT_MECHANISMS", "LISTENER", "MECHANISMS", "SaslUsers"]
