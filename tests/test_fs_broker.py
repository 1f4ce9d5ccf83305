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
