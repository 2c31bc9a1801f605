"""Rules the test modules keep, checked on their source.

No test module sleeps on the wall clock to wait for something: it awaits the event (testing/waiting.py:
a scripted server's `arrived` signal, `VoiceClient.wait_for`, `polled` for what another process writes).
A `sleep(0)` that only yields to the loop is fine; a sleep of a test double simulating a slow peer, or a
real-time pacing of media (a caller's audio, keys pressed at the caller's pace), lives in testing/.
At most ten modules start real server processes, each listed with its reason; no test is marked to run
apart from the others."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED = {".venv", "node_modules", ".git", "var"}

# The test modules that start real server processes (testing/daphne.py), each for what the in-process
# application (testing/inprocess.py) cannot stand in for. At most ten.
REAL_SERVERS = {
    "voiceagent/tests/test_restarts.py": "servers killed (SIGKILL) and started again on the same database",
    "realtime/tests/test_socket_exits.py": "a server stopped under a live call, a Redis outage, a slow reader",
    "voiceagent/tests/test_limits.py": "two processes sharing one Redis; the server's own upload bound",
    "telephony/tests/test_media_stream_e2e.py": "a stream token and call control shared by two processes",
    "voiceagent/tests/test_behind_nginx.py": "Debian's nginx with deploy/nginx.conf in front of the server",
    "voiceagent/tests/test_browser_pages.py": "Chromium loading the dashboard's pages from a real port",
    "agents/tests/test_dashboard_browser.py": "Chromium building and calling an agent in the dashboard",
    "realtime/tests/test_browser_e2e.py": "Chromium's microphone talking to the browser client",
    "realtime/tests/test_widget_browser.py": "Chromium on a site of its own, talking through the widget (WebRTC)",
    "telephony/tests/test_sip_servers.py": "SIP served by the web server (SIP_BIND), or by sipserver via Redis",
}
REAL_SERVER_NAMES = {"start_test_server", "shared_test_server", "DaphneServer", "fork_server"}


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
    offenders = [
        f"{path.relative_to(REPO).as_posix()}:{line} in {function}"
        for path in _test_modules()
        for function, line in _sleeps(path)
    ]
    assert not offenders, (
        "sleeps on the wall clock in test modules (await the event: testing/waiting.py):\n" + "\n".join(offenders)
    )


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


def _names(path: Path) -> set[str]:
    """Every name the module uses or imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    return names


def test_at_most_ten_test_modules_start_a_real_server():
    starting = {path.relative_to(REPO).as_posix() for path in _test_modules() if REAL_SERVER_NAMES & _names(path)}
    assert starting == set(REAL_SERVERS), (
        f"modules that start a real server but are not listed: {sorted(starting - set(REAL_SERVERS))}; "
        f"listed but start none: {sorted(set(REAL_SERVERS) - starting)} (the in-process application, "
        "testing/inprocess.py, serves every end-to-end test that needs no process of its own)"
    )
    assert len(REAL_SERVERS) <= 10


def test_no_test_is_marked_to_run_apart():
    """Every test passes beside the others: no `serial` mark (and pytest.ini declares none)."""
    marked = [
        path.relative_to(REPO).as_posix()
        for path in _test_modules()
        if "serial" in {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}
    ]
    assert not marked
    assert "serial" not in (REPO / "pytest.ini").read_text()
