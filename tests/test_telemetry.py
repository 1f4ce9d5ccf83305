"""The server's OpenTelemetry set-up (leaseboard.telemetry): off unless the standard OTEL_*
variables configure it, a configuration that cannot work fails the start naming the
variable, and configured (in a process of its own, as a server start is: the
instrumentation is process-wide) it installs the SDK's tracer provider, once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from leaseboard.telemetry import SERVICE_NAME, telemetry_setup

OTEL = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
)


@pytest.fixture
def no_otel(monkeypatch):  # type: ignore[no-untyped-def]
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_without_otel_variables_nothing_is_installed(no_otel) -> None:  # type: ignore[no-untyped-def]
    assert telemetry_setup() is False
    no_otel.setenv("OTEL_TRACES_EXPORTER", "console")
    no_otel.setenv("OTEL_SDK_DISABLED", "true")
    assert telemetry_setup() is False


def test_an_unknown_exporter_fails_the_start_naming_the_variable(no_otel) -> None:  # type: ignore[no-untyped-def]
    no_otel.setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
    with pytest.raises(ImproperlyConfigured, match="OTEL_TRACES_EXPORTER.*carrier-pigeon"):
        telemetry_setup()


PROBE = """
import json
from leaseboard.telemetry import telemetry_setup
first, again = telemetry_setup(), telemetry_setup()
from opentelemetry import trace
provider = trace.get_tracer_provider()
print(json.dumps({"on": [first, again], "provider": type(provider).__module__,
                  "service": provider.resource.attributes.get("service.name")}))
"""


def test_configured_it_installs_the_sdk_provider_once_in_its_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k not in OTEL}
    env.update({"OTEL_TRACES_EXPORTER": "console", "LEASEBOARD_DATA_DIR": str(tmp_path)})
    env.setdefault("DJANGO_SETTINGS_MODULE", "leaseboard.settings")
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["on"] == [True, True]
    assert seen["provider"].startswith("opentelemetry.sdk.trace")
    assert seen["service"] == SERVICE_NAME
