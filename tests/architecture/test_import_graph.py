"""The runtime import graph stays small: what a pod imports to consume is the consumer path, not the
operator tools, a second Kafka client or the test harness."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import static_consumer

PACKAGE = Path(static_consumer.__file__).parent

# Run in a fresh interpreter: this test session has imported everything already.
CONSUME_ON_A_FAKE = """
import json, sys
sys.path.insert(0, {tests!r})
from fakes import MODERN, Assign, FakeFactory, rec, tp
from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer._core.seams import Seams

settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",))
factory = FakeFactory([Assign((tp(0),)), rec(0, 0)])
env = {{"POD_NAME": "app-0"}}
seams = Seams(adapter_factory=factory, probe=lambda s, **_: MODERN)
with StaticConsumer(settings, env=env, seams=seams) as c:
    while not c.consume(10, 0.0):
        pass
    c.commit()
print(json.dumps(sorted(sys.modules)))
"""

# The real librdkafka adapter (no broker needed to create and close it), the probe replaced.
CONSUME_ON_LIBRDKAFKA = """
import json, sys
sys.path.insert(0, {tests!r})
from fakes import MODERN
from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer._core.seams import Seams

settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9", group_id="g", topics=("t",))
with StaticConsumer(settings, env={{"POD_NAME": "app-0"}}, seams=Seams(probe=lambda s, **_: MODERN)) as c:
    c.consume(10, 0.1)
print(json.dumps(sorted(sys.modules)))
"""

# The asyncio consumer on the fake: the same consumer path, plus static_consumer.aio.
CONSUME_ASYNC_ON_A_FAKE = """
import asyncio, json, sys
sys.path.insert(0, {tests!r})
from fakes import MODERN, Assign, FakeFactory, rec, tp
from static_consumer import ConsumerSettings
from static_consumer._core.seams import Seams
from static_consumer.aio import AsyncStaticConsumer

async def main():
    settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",))
    factory = FakeFactory([Assign((tp(0),)), rec(0, 0)])
    consumer = AsyncStaticConsumer(settings, env={{"POD_NAME": "app-0"}},
                                   seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN))
    async with consumer:
        while not len(await consumer.consume_batch(10, 0.0)):
            pass
        await consumer.commit()

asyncio.run(main())
print(json.dumps(sorted(sys.modules)))
"""

# A pool worker on the fake, in the process `static-consumer run` is: the script's module loaded first.
CONSUME_IN_A_POOL = """
import json, os, signal, sys, tempfile
sys.path.insert(0, {tests!r})
from fakes import MODERN, Assign, FakeFactory, rec, tp
import static_consumer.command  # the static-consumer script's module
from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer._core.seams import Seams
from static_consumer.pool import ProcessPool

out = tempfile.NamedTemporaryFile(delete=False).name

def make(settings, listeners):
    return StaticConsumer(settings, listeners=listeners, env={{"POD_NAME": "app-0"}},
                          seams=Seams(adapter_factory=FakeFactory([Assign((tp(0),)), rec(0, 0)]),
                                      probe=lambda s, **_: MODERN))

def handle(batch):  # in the worker: what it has loaded, then the pod's SIGTERM
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
    os.kill(os.getppid(), signal.SIGTERM)

settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",))
pool = ProcessPool(settings, handle, processes=1, env={{"POD_NAME": "app-0"}}, consumer_factory=make)
assert pool.run() == 0
print(open(out).read())
"""

NOT_ON_THE_CONSUMER_PATH = (
    "kafka",  # kafka-python: the capability probe and the broker calls only
    "confluent_kafka.admin",
    "static_consumer.admin",
    "static_consumer_lab",
    "static_consumer_lab.demo",
    "static_consumer.spark",
    # Kafka I/O outside the consume loop: only its error table and group data are on the path
    "static_consumer._kafka.admin_client",
    "static_consumer._kafka.login",
    "static_consumer._kafka.kafka_python",
    "static_consumer._kafka.probe",
    "static_consumer._kafka.describe",
    "static_consumer._kafka.members",
    "static_consumer._kafka.watch",  # the wait for a held instance id only
    "static_consumer.settings._docgen",
)


def _modules_after(script: str) -> set[str]:
    code = script.format(tests=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _loaded(modules: set[str], name: str) -> list[str]:
    return sorted(m for m in modules if m == name or m.startswith(name + "."))


def test_consuming_on_a_fake_client_loads_no_kafka_client_no_operator_tools_and_no_harness() -> None:
    modules = _modules_after(CONSUME_ON_A_FAKE)
    assert "static_consumer._core.ownership" in modules  # it did consume and commit
    for name in (*NOT_ON_THE_CONSUMER_PATH, "confluent_kafka"):
        assert _loaded(modules, name) == [], name


def test_the_asyncio_consumer_loads_nothing_more_than_the_sync_one_does() -> None:
    modules = _modules_after(CONSUME_ASYNC_ON_A_FAKE)
    assert "static_consumer.aio.consumer" in modules and "static_consumer._core.ownership" in modules
    for name in (*NOT_ON_THE_CONSUMER_PATH, "confluent_kafka"):
        assert _loaded(modules, name) == [], name


def test_a_pool_worker_of_the_run_command_loads_nothing_more_than_a_single_consumer() -> None:
    modules = _modules_after(CONSUME_IN_A_POOL)
    assert "static_consumer.pool._worker" in modules and "static_consumer._core.ownership" in modules
    for name in (*NOT_ON_THE_CONSUMER_PATH, "confluent_kafka"):
        assert _loaded(modules, name) == [], name


def test_consuming_through_librdkafka_without_the_probe_does_not_load_kafka_python() -> None:
    modules = _modules_after(CONSUME_ON_LIBRDKAFKA)
    assert "static_consumer._core.confluent" in modules
    for name in NOT_ON_THE_CONSUMER_PATH:
        assert _loaded(modules, name) == [], name


def _top_level_imports(path: Path) -> set[str]:
    """Modules imported at module level (not inside functions) by the file at ``path``."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_the_adapter_imports_confluent_kafka_at_module_level_in_the_core_and_the_library_root() -> None:
    folders = ("_core", "aio", "settings", "_security", "_records", "_kafka")
    files = [*PACKAGE.glob("*.py"), *(p for folder in folders for p in (PACKAGE / folder).glob("*.py"))]
    importers = sorted(
        str(p.relative_to(PACKAGE))
        for p in files
        if any(m.split(".")[0] == "confluent_kafka" for m in _top_level_imports(p))
    )
    assert importers == ["_core/confluent.py"]


def test_the_core_never_imports_operator_tools_the_harness_or_the_demo() -> None:
    forbidden = ("static_consumer.admin", "static_consumer_lab", "static_consumer_lab.demo", "kafka")
    for path in (PACKAGE / "_core").glob("*.py"):
        imported = _top_level_imports(path)
        bad = sorted(m for m in imported for f in forbidden if m == f or m.startswith(f + "."))
        assert bad == [], f"{path.name} imports {bad}"
