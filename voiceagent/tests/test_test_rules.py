"""Rules the test modules keep, checked on their source.

No test module sleeps on the wall clock to wait for something: it awaits the event (testing/waiting.py:
a scripted server's `arrived` signal, `VoiceClient.wait_for`, `polled` for what another process writes).
A `sleep(0)` that only yields to the loop is fine; a sleep of a test double simulating a slow peer, or a
real-time pacing of media, lives in testing/."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED = {".venv", "node_modules", ".git", "var"}

# (module, function): a nonzero sleep allowed there, and why. Real-time pacing only (the media of an
# end-to-end test), never a wait for something to happen.
PACING = {
    # The caller presses keys at a human pace (each after its pause): the keypad's timeout is what is
    # under test, so the pauses are the scenario's real-time media, like audio frames.
    ("telephony/tests/test_keypad_e2e.py", "keys_call"): "keys pressed at the caller's pace",
    ("telephony/tests/test_keypad_e2e.py", "test_the_terminator_ends_the_turn_early"): "keys at the caller's pace",
}


def _is_sleep(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "sleep"
        and isinstance(func.value, ast.Name)
        and func.value.id in ("asyncio", "time")
    )


def _zero(call: ast.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value in (0, 0.0)


def _sleeps(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of each nonzero asyncio.sleep / time.sleep in the module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and not function:
                name = child.name
            if isinstance(child, ast.Call) and _is_sleep(child) and not _zero(child):
                found.append((function or "<module>", child.lineno))
            visit(child, name)

    visit(tree, "")
    return found


def _test_modules() -> list[Path]:
    return sorted(
        path
        for path in REPO.rglob("test_*.py")
        if not SKIPPED.intersection(path.relative_to(REPO).parts) and path.relative_to(REPO).parts[0] != "testing"
    )


def test_no_test_module_sleeps_on_the_wall_clock_to_wait():
    offenders = []
    used = set()
    for path in _test_modules():
        module = path.relative_to(REPO).as_posix()
        for function, line in _sleeps(path):
            key = (module, function)
            if key in PACING:
                used.add(key)
                continue
            offenders.append(f"{module}:{line} in {function}")
    assert not offenders, (
        "sleeps on the wall clock in test modules (await the event: testing/waiting.py):\n" + "\n".join(offenders)
    )
    assert used == set(PACING), f"allow-list entries with no sleep left: {set(PACING) - used}"


def test_the_check_finds_a_sleep(tmp_path):
    module = tmp_path / "test_example.py"
    module.write_text(
        "import asyncio, time\n"
        "async def test_a():\n"
        "    await asyncio.sleep(0)  # a yield: fine\n"
        "    await asyncio.sleep(0.5)\n"
        "def helper():\n"
        "    time.sleep(delay)\n"
    )
    assert _sleeps(module) == [("test_a", 4), ("helper", 6)]
