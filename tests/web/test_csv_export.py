"""Streaming CSV downloads (leaseboard/web/csv_export.py): rows as read, quoted as CSV,
and no cell that a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io

import pytest

from leaseboard.web.csv_export import csv_download, safe_cell


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("a=b", "a=b"),
        (None, ""),
        (42, "42"),
    ],
)
def test_safe_cell(value: object, cell: str) -> None:
    assert safe_cell(value) == cell


def test_the_download_streams_a_header_and_safe_rows_as_an_attachment() -> None:
    read: list[int] = []

    def rows():  # type: ignore[no-untyped-def]
        for n in range(3):
            read.append(n)
            yield [n, "=1+1" if n == 1 else "plain, with a comma"]

    response = csv_download("out.csv", ["n", "text"], rows())
    assert read == []  # nothing read before the body is sent
    assert response["Content-Type"] == "text/csv"
    assert response["Content-Disposition"] == 'attachment; filename="out.csv"'
    body = b"".join(response.streaming_content).decode()
    assert list(csv.reader(io.StringIO(body))) == [
        ["n", "text"],
        ["0", "plain, with a comma"],
        ["1", "'=1+1"],
        ["2", "plain, with a comma"],
    ]
