"""The embedded broker's file-system transport (leaseboard.sweeps.fs_transport) on its
own, on a temporary folder: a message is in place only whole (renamed from a name the
consumer ignores, no partial file left), every message comes back once, and declaring the
same binding twice keeps one row in the exchange table. The race itself, producer against
consumer in two processes, is tests/sweeps/test_fs_broker.py."""

from __future__ import annotations

import json

from kombu import Connection, Exchange, Queue

from leaseboard.sweeps.fs_transport import Channel, Transport


def _connection(tmp_path) -> Connection:  # type: ignore[no-untyped-def]
    folder = tmp_path / "messages"
    folder.mkdir()
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "control_folder": str(tmp_path / "control"),
    }
    return Connection(transport=Transport, transport_options=options)


def test_messages_are_written_whole_and_each_read_back_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with _connection(tmp_path) as conn:
        assert isinstance(conn.default_channel, Channel)
        queue = conn.SimpleQueue("notices")
        for n in range(3):
            queue.put({"n": n})
        files = sorted(p.name for p in (tmp_path / "messages").iterdir())
        assert len(files) == 3 and all(name.endswith(".notices.msg") for name in files)
        got = []
        for _ in range(3):
            message = queue.get(timeout=5)
            got.append(message.payload["n"])
            message.ack()
        queue.close()
    assert sorted(got) == [0, 1, 2]  # names order by millisecond, then at random
    assert not list((tmp_path / "messages").glob("*.part"))


def test_declaring_a_binding_twice_keeps_one_row(tmp_path) -> None:  # type: ignore[no-untyped-def]
    exchange = Exchange("sweeps", type="direct")
    with _connection(tmp_path) as conn:
        for _ in range(2):
            Queue("sweeps", exchange, routing_key="sweeps")(conn.default_channel).declare()
    table = tmp_path / "control" / "sweeps.exchange"
    rows = json.loads(table.read_text())
    assert rows == [["sweeps", "", "sweeps"]]
    assert not list((tmp_path / "control").glob("*.part"))
