"""No test waits a fixed time for something to happen: it polls for the condition
(tests/waiting.py), so it goes on as soon as the condition holds and does not fail when a
busy machine makes the thing take longer than the guess. A sleep is allowed inside a
polling loop (`while`/`for`), as `sleep(0)` (yield to the event loop), as a hang of an
hour or more (a stuck peer a test cancels), and at the places below, where the time
itself is what the test is about."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HANG_S = 3600

# (file under tests/, function) -> why its sleep is not a wait for a condition.
ALLOWED = {
    ("sweeps/test_hostile_delivery.py", "slowly"): (
        "a webhook receiver that is slow on purpose: the overlap it causes is the race tested"
    ),
    ("client/test_async_unit.py", "slow_release"): (
        "a recipient that answers late, so the release is in flight when the test cancels"
    ),
    (
        "faults/test_broker.py",
        "test_with_redis_down_an_acquire_answers_201_and_its_notice_is_delivered_after",
    ): ("a window with Redis down in which nothing may be delivered: the time is the assertion"),
    (
        "ha_generation/test_commit_deadline.py",
        "test_the_sdk_never_acts_on_an_unknown_commit_and_resolves_it_by_asking_again",
    ): (
        "the web process's breaker stays open for Retry-After after a cut connection; the test "
        "waits that told time out, as an agent does, before its next ask"
    ),
    ("ha_generation/test_commit_deadline.py", "run"): (
        "the same breaker, waited out by the asyncio SDK test"
    ),
    ("locking.py", "race_on_a_lock"): (
        "settle_s lets the database clock move past the waiter's first reading (0 by default)"
    ),
}


def _sleeps(tree: ast.AST) -> list[tuple[str, int, bool, object]]:
    """(enclosing function, line, inside a loop, the first argument's constant or None)."""
    found: list[tuple[str, int, bool, object]] = []

    def visit(node: ast.AST, function: str, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name, False)
                continue
            loop = in_loop or isinstance(child, ast.While | ast.For | ast.AsyncFor)
            if isinstance(child, ast.Call):
                fn = child.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if name == "sleep":
                    arg = child.args[0] if child.args else None
                    value = arg.value if isinstance(arg, ast.Constant) else None
                    found.append((function, child.lineno, in_loop, value))
            visit(child, function, loop)

    visit(tree, "<module>", False)
    return found


def test_no_test_waits_a_fixed_time_for_a_condition() -> None:
    fixed = []
    used = set()
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" in path.parts or path == Path(__file__).resolve():
            continue
        rel = path.relative_to(TESTS).as_posix()
        for function, line, in_loop, value in _sleeps(ast.parse(path.read_text())):
            if in_loop or value == 0 or (isinstance(value, int | float) and value >= HANG_S):
                continue
            if (rel, function) in ALLOWED:
                used.add((rel, function))
                continue
            fixed.append(f"tests/{rel}:{line} in {function}()")
    assert not fixed, "poll for the condition (tests/waiting.py) instead of sleeping:\n" + (
        "\n".join(fixed)
    )
    assert used == set(ALLOWED), f"allowed but gone, remove: {set(ALLOWED) - used}"


def test_the_scan_sees_a_fixed_sleep_and_lets_a_polling_one_pass() -> None:
    source = (
        "import time\n"
        "def waits():\n"
        "    time.sleep(0.5)\n"
        "def polls():\n"
        "    while not ready():\n"
        "        time.sleep(0.1)\n"
        "async def hangs():\n"
        "    await asyncio.sleep(3600)\n"
    )
    got = _sleeps(ast.parse(source))
    assert [(f, loop, v) for f, _, loop, v in got] == [
        ("waits", False, 0.5),
        ("polls", True, 0.1),
        ("hangs", False, 3600),
    ]
