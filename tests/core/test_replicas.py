"""The replica router and the lag it reads (leaseboard.core.replicas), without a replica:
tests/ha/test_replica_reads.py reads pages from a real one."""

from __future__ import annotations

import pytest
from django.test import override_settings

from leaseboard.core.replicas import (
    PRIMARY,
    REPLICA,
    ReplicaRouter,
    ReplicaStatus,
    lag_from,
    reads_from_replica,
    replica_reads,
    replica_status,
)


@pytest.mark.parametrize(
    ("row", "lag"),
    [
        ((False, None, None, True, None), 0.0),  # a primary: never behind itself
        ((True, "streaming", 0.4, True, 30.0), 0.4),  # replayed all it got 0.4 s ago
        ((True, "streaming", 0.2, False, 3.5), 3.5),  # behind: the last replayed commit's age
        ((True, "streaming", -0.01, True, None), 0.0),  # clocks a hair apart
        ((True, "stopping", 0.1, True, 0.1), None),  # not streaming: unknown
        ((True, None, None, True, 5.0), None),  # no WAL receiver at all
    ],
)
def test_the_lag_reads_the_receipt_when_caught_up_and_the_replay_when_behind(row, lag):
    assert lag_from(*row) == lag


def test_writes_go_to_the_primary_and_reads_only_inside_replica_reads_to_the_replica():
    router = ReplicaRouter()
    assert router.db_for_read(None) == "default"
    with replica_reads(ReplicaStatus(REPLICA, 0.3, "fresh")):
        assert router.db_for_read(None) == REPLICA
        assert router.db_for_write(None) == "default"
        with replica_reads(ReplicaStatus("default", 9.0, "lagging")):
            assert router.db_for_read(None) == "default"
        assert router.db_for_read(None) == REPLICA
    assert router.db_for_read(None) == "default"
    assert router.allow_migrate("default", "core") and not router.allow_migrate(REPLICA, "core")


def test_without_a_replica_pages_read_the_primary_and_say_nothing(rf):
    assert replica_status() is PRIMARY

    @reads_from_replica
    def view(request):
        from django.http import HttpResponse

        return HttpResponse(ReplicaRouter().db_for_read(None))

    request = rf.get("/")
    assert view(request).content == b"default" and request.replica is PRIMARY


@override_settings(LEASEBOARD_REPLICA_MAX_LAG_S=5)
def test_the_words_say_why_a_page_read_the_primary():
    assert ReplicaStatus("default", 7.25, "lagging").words == (
        "is 7.2 s behind (more than the 5 s allowed)"
    )
    assert ReplicaStatus("default", None, "unreachable").words == "does not answer"
    assert ReplicaStatus("default", None, "not_streaming").words == "is not streaming"
