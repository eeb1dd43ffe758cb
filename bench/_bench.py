"""What the benchmarks share: producing test records, timing a pass, and summarising interleaved passes.

Load on the machine drifts while a benchmark runs, so every comparison is made pass by pass: the loops
of one round run back to back (in alternating order from round to round), each wrapper pass is divided
by the baseline pass of its own round, and the median of those per-round ratios is reported with its
spread. Load drift between rounds then cancels instead of landing on whichever loop ran during the busy
minute.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from static_consumer_lab.brokers.kafka_ops import QUIET_LOGGER

HEADERS = [("trace-id", b"0af7651916cd43dd8448eb211c80319c"), ("source", b"bench")]


def raw_consumer(bootstrap: str, topic: str) -> Any:
    """The raw confluent-kafka consumer of the benchmarks' baseline loops: a new group subscribed to
    ``topic`` from its start, offsets committed by the loop only, given the librdkafka defaults that
    StaticConsumer changes (``CLIENT_DEFAULTS``, docs/configuration.md): the same settings, so the
    comparison is of the loops, not of the fetch settings."""
    from confluent_kafka import Consumer

    from static_consumer.settings._config import CLIENT_DEFAULTS

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": QUIET_LOGGER,
            **{key: default.value for key, default in CLIENT_DEFAULTS.items()},
        }
    )
    consumer.subscribe([topic])
    return consumer


def compile_like_pip() -> str:
    """Compile the library's modules to bytecode, as ``pip install`` of the wheel does, before timing
    fresh processes. The benchmarks run from an editable install; with ``PYTHONDONTWRITEBYTECODE=1`` (set
    on this machine, as in many container images) such an install never gets bytecode, and every restart
    compiled the whole package first (about 0.1 s here) where an installed wheel only loads it. Returns a
    line for the report."""
    import compileall

    import assignors
    import static_consumer

    packages = [Path(module.__file__ or "").parent for module in (static_consumer, assignors)]
    for package in packages:  # the wheel's two packages (pyproject.toml)
        compileall.compile_dir(str(package), quiet=1)
    return f"bytecode of {', '.join(map(str, packages))} compiled first, as a wheel install has it"


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    value_bytes: int,
    *,
    headers: bool = False,
    compression: str = "lz4",
) -> float:
    """Produce ``count`` records of ``value_bytes`` (keys "0", "1", ...); returns the seconds it took."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": compression,
            "logger": QUIET_LOGGER,
        }
    )
    value = b"x" * value_bytes
    extra = {"headers": HEADERS} if headers else {}
    started = time.monotonic()
    for i in range(count):
        for _ in range(10_000):
            try:
                producer.produce(topic, key=str(i).encode(), value=value, **extra)
                break
            except BufferError:
                producer.poll(0.05)
        else:
            raise RuntimeError("producer queue stayed full")
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("producer did not flush")
    return time.monotonic() - started


@dataclass
class Pass:
    """One loop's read of the whole topic: records/s (wall, first to last record), CPU per record of this
    process (the Python loop plus librdkafka's threads) and of the consuming thread alone (the Python
    loop and the client calls it makes: the part a wrapper adds to), and the garbage collections it ran."""

    rate: float
    cpu_us: float
    thread_us: float
    collections: int


class PassTimer:
    """Times a pass from its first record; counts the garbage collections in between."""

    def __init__(self) -> None:
        self.seen = 0
        self._start: tuple[float, float, float] | None = None
        self._gcs = 0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start" and self._start is not None:
            self._gcs += 1

    def add(self, count: int) -> None:
        if self._start is None:
            self._start = (time.monotonic(), time.process_time(), time.thread_time())
        self.seen += count

    def result(self) -> Pass:
        gc.callbacks.remove(self._on_gc)
        if self._start is None or not self.seen:
            raise RuntimeError("no record arrived")
        wall, cpu = time.monotonic() - self._start[0], time.process_time() - self._start[1]
        thread = time.thread_time() - self._start[2]
        return Pass(self.seen / wall, cpu / self.seen * 1e6, thread / self.seen * 1e6, self._gcs)


@dataclass
class Rounds:
    """Passes of several loops, run round by round; ratios are taken within a round."""

    baseline: str
    passes: dict[str, list[Pass]] = field(default_factory=dict)

    def run(self, loops: dict[str, Callable[[], Pass]], rounds: int, *, log: Callable[[str], None]) -> None:
        names = list(loops)
        for number in range(rounds + 1):  # round 0 warms up (JIT-free, but caches, the broker, ...)
            order = names if number % 2 else names[::-1]
            got = {name: loops[name]() for name in order}
            label = "warm-up" if number == 0 else f"round {number}"
            log(f"  {label}: " + ", ".join(f"{n} {p.rate:,.0f}/s" for n, p in got.items()))
            if number:
                for name, result in got.items():
                    self.passes.setdefault(name, []).append(result)

    def ratios(self, name: str) -> list[float]:
        return [p.rate / b.rate for p, b in zip(self.passes[name], self.passes[self.baseline], strict=True)]

    def table(self) -> list[str]:
        lines = [
            f"    {'loop':<44} {'median rec/s':>12} {'CPU us/rec':>10} {'thread us/rec':>13} {'GCs/pass':>8} "
            f"{'ratio to baseline: median [min-max] of rounds':>46}"
        ]
        for name, got in self.passes.items():
            rate = statistics.median(p.rate for p in got)
            cpu = statistics.median(p.cpu_us for p in got)
            thread = statistics.median(p.thread_us for p in got)
            gcs = statistics.median(p.collections for p in got)
            if name == self.baseline:
                ratio = "baseline"
            else:
                rs = self.ratios(name)
                ratio = f"{statistics.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}]"
            numbers = f"{rate:>12,.0f} {cpu:>10.2f} {thread:>13.2f} {gcs:>8.0f}"
            lines.append(f"    {name:<44} {numbers} {ratio:>46}")
        return lines


def median_ratio(rounds: Rounds, name: str) -> float:
    return statistics.median(rounds.ratios(name))


def process_cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far, from Linux's /proc/PID/stat (utime and
    stime, fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine() -> str:
    import confluent_kafka

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"confluent-kafka {_version(confluent_kafka.version())}, "
        f"librdkafka {_version(confluent_kafka.libversion())}; {_record_kind()}; "
        f"1-minute load average at start {load:.1f}"
    )


def _version(got: object) -> str:
    """confluent_kafka.version() is a string in 2.16 (it was a (string, number) pair before)."""
    return got if isinstance(got, str) else str(got[0])  # type: ignore[index]


def _record_kind() -> str:
    from static_consumer._base.records.impl import NATIVE

    return "native Record" if NATIVE else "pure-Python Record"


def spread(values: Sequence[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"
