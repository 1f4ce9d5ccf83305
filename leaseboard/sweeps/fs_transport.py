"""kombu's file-system broker with atomic writes, for the embedded default.

kombu writes a message file in place (create, then write) while a consumer may already
have listed, moved and read it: the consumer then reads an empty file, fails to parse it
and the worker stops with an unrecoverable error. Here a message is written under a name
the consumer ignores and renamed into place, which is atomic on one file system. The
exchange table (which queue is bound where) had the same window plus a lost-update race
between processes declaring at once; binds are serialized on a lock file and the table
is replaced atomically. `leaseboard.celery` registers this class for `filesystem://`.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):  # type: ignore[no-untyped-def]
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # "<name>.part" does not end in "<queue>.msg", so consumers skip it until renamed.
        partial = final + ".part"
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange, routing_key, pattern, queue):  # type: ignore[no-untyped-def]
        table = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        try:
            with open(table.with_name(table.name + ".lock"), "a+b") as guard:
                filesystem.lock(guard, filesystem.LOCK_EX)
                try:
                    bindings = self.get_table(exchange)  # whole file or none: see below
                    if binding not in bindings:
                        bindings.insert(0, binding)
                        partial = table.with_name(table.name + ".part")
                        partial.write_bytes(str_to_bytes(dumps(bindings)))
                        os.replace(partial, table)
                finally:
                    filesystem.unlock(guard)
        except OSError as exc:
            raise ChannelError(f"Cannot bind {queue!r} in {table}") from exc


class Transport(filesystem.Transport):
    Channel = Channel
