"""Instance-id resolution: Kafka's naming rules, StatefulSet pod names, refusing ids that change."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from static_consumer._base.errors import ConfigurationError, InvalidInstanceIdError
from static_consumer._core.identity import (
    Identity,
    ordinal_of,
    parse_pod_name,
    resolve_identity,
    validate_instance_id,
)

LEGAL = string.ascii_letters + string.digits + "._-"
K8S_RAND = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of pod-template-hash and pod name suffixes


def kafka_accepts(value: str) -> bool:
    """Kafka's rule for group.instance.id, written independently of the implementation."""
    return 0 < len(value) <= 249 and value not in (".", "..") and all(c in LEGAL for c in value)


def accepted(value: str) -> bool:
    try:
        return validate_instance_id(value) == value
    except InvalidInstanceIdError:
        return False


ids = st.one_of(
    st.text(),  # arbitrary unicode, newlines, surrogates' neighbours
    st.text(alphabet=LEGAL + " /:é\n\t", max_size=20),
    st.text(alphabet=LEGAL, min_size=245, max_size=255),  # around the length limit
    st.sampled_from(["", ".", "..", "...", "a\n", "é", "ａ", "٣"]),
)


@given(ids)
def test_validation_is_exactly_kafkas_rule(value: str) -> None:
    assert accepted(value) == kafka_accepts(value)


@pytest.mark.parametrize(
    ("value", "says"),
    [("", "empty"), (".", "reserves"), ("a" * 250, "at most 249"), ("orders/0 x", "contains ' ', '/';")],
)
def test_rejections_say_which_rule(value: str, says: str) -> None:
    with pytest.raises(InvalidInstanceIdError, match=says):
        validate_instance_id(value)


statefulset_names = st.from_regex(r"[a-z]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True)
ordinals = st.integers(min_value=0, max_value=9999)


@given(statefulset_names, ordinals)
def test_statefulset_pod_names_round_trip_the_ordinal(statefulset: str, ordinal: int) -> None:
    pod = f"{statefulset}-{ordinal}"
    identity = resolve_identity({"POD_NAME": pod}, group_id="g")
    assert identity == Identity(pod, "pod", pod, statefulset, ordinal)
    assert ordinal_of(identity) == ordinal
    templated = resolve_identity({"POD_NAME": pod}, group_id="g", template="{statefulset}-{ordinal}")
    assert templated.instance_id == pod


deployment_pods = st.builds(
    lambda name, pod_hash, suffix: f"{name}-{pod_hash}-{suffix}",
    statefulset_names,
    st.text(alphabet=K8S_RAND, min_size=9, max_size=10),
    st.text(alphabet=K8S_RAND, min_size=5, max_size=5),
)


@given(deployment_pods)
def test_deployment_pod_names_are_rejected_unless_allowed(pod: str) -> None:
    with pytest.raises(InvalidInstanceIdError, match="rollout defeats static membership"):
        resolve_identity({"POD_NAME": pod}, group_id="g")
    allowed = resolve_identity({"POD_NAME": pod}, group_id="g", allow_unstable=True)
    assert (allowed.instance_id, allowed.ordinal, allowed.statefulset) == (pod, None, None)


def test_deployment_pod_with_an_all_digit_suffix_is_not_taken_for_an_ordinal() -> None:
    assert parse_pod_name("web-7d4b9c8f6d-24567") is None
    with pytest.raises(InvalidInstanceIdError, match="Deployment/ReplicaSet"):
        resolve_identity({"POD_NAME": "web-7d4b9c8f6d-24567"}, group_id="g")


# Kubernetes' random suffixes (DaemonSet, Job, bare ReplicaSet pods: "<owner>-<5 characters>") come from
# K8S_RAND, whose digits are 2 and 4-9: a suffix of five such digits is random far more likely than the
# ordinal of a StatefulSet with over 22,222 replicas.
random_digit_suffixes = st.text(alphabet="2456789", min_size=5, max_size=5)


@given(statefulset_names, random_digit_suffixes)
def test_a_random_all_digit_pod_suffix_is_not_taken_for_an_ordinal(name: str, suffix: str) -> None:
    pod = f"{name}-{suffix}"
    assert parse_pod_name(pod) is None
    with pytest.raises(InvalidInstanceIdError, match="rollout defeats static membership"):
        resolve_identity({"POD_NAME": pod}, group_id="g")  # "a-2-22222" may also read as a Deployment pod
    allowed = resolve_identity({"POD_NAME": pod}, group_id="g", allow_unstable=True)
    assert (allowed.instance_id, allowed.ordinal) == (pod, None)


def test_the_issue_example_fluentd_24567() -> None:
    with pytest.raises(InvalidInstanceIdError, match="DaemonSet, Job or ReplicaSet pod: its suffix is"):
        resolve_identity({"POD_NAME": "fluentd-24567"}, group_id="g")


@pytest.mark.parametrize(
    ("pod", "ordinal"),
    # Digits Kubernetes never puts in a random suffix (0, 1, 3), or not five of them: an ordinal.
    [("orders-10234", 10234), ("orders-30000", 30000), ("orders-2456", 2456), ("orders-245678", 245678)],
)
def test_ordinals_that_cannot_be_random_suffixes_are_kept(pod: str, ordinal: int) -> None:
    assert parse_pod_name(pod) == ("orders", ordinal)


@pytest.mark.parametrize("pod", ["worker", "web-01", "web-", "web-1a", "-3"])
def test_names_without_an_ordinal_suffix_are_rejected(pod: str) -> None:
    with pytest.raises(InvalidInstanceIdError, match="not a StatefulSet pod"):
        resolve_identity({"HOSTNAME": pod}, group_id="g")


def test_precedence_explicit_then_env_then_pod() -> None:
    env = {"STATIC_CONSUMER_INSTANCE_ID": "from-env", "POD_NAME": "orders-2", "HOSTNAME": "host-7"}
    explicit = resolve_identity(env, group_id="g", explicit="from-settings")
    assert (explicit.instance_id, explicit.source) == ("from-settings", "explicit")
    # the pod's ordinal is kept whatever the source, for ordinal assignment
    assert (explicit.statefulset, explicit.ordinal) == ("orders", 2)
    assert resolve_identity(env, group_id="g").source == "env"
    del env["STATIC_CONSUMER_INSTANCE_ID"]
    assert resolve_identity(env, group_id="g").instance_id == "orders-2"
    del env["POD_NAME"]
    assert resolve_identity(env, group_id="g").instance_id == "host-7"


def test_empty_environment_values_count_as_unset() -> None:
    env = {"STATIC_CONSUMER_INSTANCE_ID": " ", "POD_NAME": "", "HOSTNAME": "orders-0"}
    assert resolve_identity(env, group_id="g") == Identity("orders-0", "pod", "orders-0", "orders", 0)


def test_no_source_explains_the_three_options() -> None:
    with pytest.raises(InvalidInstanceIdError) as info:
        resolve_identity({}, group_id="g")
    message = str(info.value)
    assert "instance_id" in message and "STATIC_CONSUMER_INSTANCE_ID" in message and "POD_NAME" in message


def test_environment_is_injected_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "orders-1")
    with pytest.raises(InvalidInstanceIdError):
        resolve_identity({}, group_id="g")


def test_template_placeholders_render() -> None:
    env = {"POD_NAME": "orders-3"}
    identity = resolve_identity(env, group_id="billing", template="{group}.{statefulset}.{ordinal}")
    assert identity.instance_id == "billing.orders.3"


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{pod}-{zone}", "only {group}, {ordinal}, {pod}, {statefulset}"),
        ("{pod.upper}", "only"),
        ("{ordinal:03d}", "without format specs"),
        ("{pod!r}", "without format specs"),
        ("{pod", "malformed"),
        ("{group}-{statefulset}", "same id"),
        ("fixed", "same id"),
    ],
)
def test_bad_templates_are_configuration_errors(template: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says.replace("{", r"\{").replace("}", r"\}")):
        resolve_identity({"POD_NAME": "orders-0"}, group_id="g", template=template)


def test_rendered_id_is_validated() -> None:
    with pytest.raises(InvalidInstanceIdError, match="':'"):
        resolve_identity({"POD_NAME": "orders-0"}, group_id="team:orders", template="{group}-{pod}")


def test_explicit_and_env_ids_are_validated() -> None:
    with pytest.raises(InvalidInstanceIdError):
        resolve_identity({}, group_id="g", explicit="has space")
    with pytest.raises(InvalidInstanceIdError):
        resolve_identity({"STATIC_CONSUMER_INSTANCE_ID": "a/b"}, group_id="g")


def test_ordinal_placeholders_need_a_statefulset_pod_even_when_unstable_is_allowed() -> None:
    with pytest.raises(ConfigurationError, match="needs a StatefulSet pod name"):
        resolve_identity({"POD_NAME": "worker"}, group_id="g", template="w-{ordinal}", allow_unstable=True)


def test_ordinal_of_without_a_statefulset_pod_is_a_configuration_error() -> None:
    identity = resolve_identity({}, group_id="g", explicit="manual")
    with pytest.raises(ConfigurationError, match="assignment_mode='ordinal'"):
        ordinal_of(identity)
