"""The embedded broker (kombu's file-system transport, atomic-write subclass) under a
producer and a consumer racing: every message arrives, none is read half-written."""

from __future__ import annotations

import multiprocessing
import time

import pytest

ATOMIC = "leaseboard.sweeps.fs_transport:Transport"


def _options(folder: str) -> dict:
    return {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "control_folder": folder,
        "store_processed": False,
    }


def _produce(transport: str, folder: str, n: int) -> None:
    from kombu import Connection

    with Connection(transport=transport, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("race")
        for i in range(n):
            queue.put({"i": i, "pad": "x" * 200_000})
        queue.close()


def consume_while_producing(transport: str, folder: str, n: int) -> list[int]:
    from kombu import Connection

    with Connection(transport=transport, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("race")
        producer = multiprocessing.get_context("fork").Process(
            target=_produce, args=(transport, folder, n)
        )
        producer.start()
        got: list[int] = []
        deadline = time.monotonic() + 60
        try:
            while len(got) < n and time.monotonic() < deadline:
                try:
                    message = queue.get(block=True, timeout=0.05)
                except queue.Empty:
                    continue
                got.append(message.payload["i"])
                message.ack()
        finally:
            producer.join(10)
            queue.close()
        return got


@pytest.mark.slow
def test_a_consumer_racing_a_producer_never_reads_a_half_written_message(tmp_path):
    n = 1000
    got = consume_while_producing(ATOMIC, str(tmp_path), n)
    assert sorted(got) == list(range(n))


def _shared(name: str):  # type: ignore[no-untyped-def]
    from kombu import Exchange, Queue

    # Every queue on one exchange, as Celery binds them: one exchange table to contend on.
    return Queue(name, Exchange("shared", type="direct"), routing_key=name)


def _bind(transport: str, folder: str, name: str, start: float) -> None:
    from kombu import Connection

    while time.time() < start:  # all processes declare at the same moment
        time.sleep(0.001)
    with Connection(transport=transport, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue(_shared(name))
        queue.put({"from": name})
        queue.close()


@pytest.mark.slow
def test_processes_declaring_at_once_keep_every_binding(tmp_path):
    ctx = multiprocessing.get_context("fork")
    start = time.time() + 0.5
    names = [f"q{i}" for i in range(12)]
    procs = [ctx.Process(target=_bind, args=(ATOMIC, str(tmp_path), n, start)) for n in names]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    from kombu import Connection

    with Connection(transport=ATOMIC, transport_options=_options(str(tmp_path))) as conn:
        for n in names:
            queue = conn.SimpleQueue(_shared(n))
            assert queue.get(timeout=5).payload == {"from": n}
            queue.close()
