"""The documentation holds together: the README is a front door that links the index, the index lists every
page, every relative link resolves, and docs/configuration.md lists exactly the environment variables the
service reads (each variable the settings read while they are imported, recorded in a subprocess, plus each
one any module of the service reads by name, found in its source, which also catches the ones read only
under some condition or only at run time)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from testing.daphne import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
INDEX = DOCS / "index.md"
CONFIGURATION = DOCS / "configuration.md"
MAX_README_LINES = 250

# Variables of the operating system and of Python that the service passes on to the processes it starts
# (speech workers, the embedding export), not settings of its own.
SYSTEM_VARIABLES = frozenset({"PATH", "PYTHONPATH", "HOME", "DJANGO_SETTINGS_MODULE"})
# Folders whose code is not the service: tests, their kit, benches, examples, the virtualenv.
NOT_THE_SERVICE = frozenset({".venv", "tests", "testing", "bench", "docs", "migrations", "var", "node_modules"})
OTHER_PROGRAMS_HEADING = "## Read by other programs"

NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def markdown_files() -> list[Path]:
    top = [REPO / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    return [path for path in top if path.exists()] + sorted(DOCS.rglob("*.md"))


def without_code(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", without_code(text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes for the headings of a markdown file."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        match = re.match(r"^#{1,6} (.*)", line)
        if in_code or not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES, f"README.md has {len(text.splitlines())} lines"
    assert "docs/index.md" in links(text)


def test_the_index_lists_every_page() -> None:
    listed = {(INDEX.parent / link.split("#")[0]).resolve() for link in links(INDEX.read_text())}
    pages = {path.resolve() for path in DOCS.rglob("*.md")} - {INDEX.resolve()}
    missing = sorted(str(path.relative_to(REPO)) for path in pages - listed)
    assert not missing, f"docs/index.md does not list: {missing}"


def test_every_relative_link_resolves() -> None:
    broken = []
    for path in markdown_files():
        for target in links(path.read_text()):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                continue  # a URL, or a path on the running service
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            where = f"{path.relative_to(REPO)}: {target}"
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def documented_variables() -> tuple[set[str], set[str]]:
    """The variables docs/configuration.md lists in its tables' first column: the service's, and those of
    the section of variables read by other programs."""
    own: set[str] = set()
    others: set[str] = set()
    current = own
    for line in CONFIGURATION.read_text().splitlines():
        if line.startswith("## "):
            current = others if line.strip() == OTHER_PROGRAMS_HEADING else own
        elif line.startswith("| `"):
            current.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split("|")[1]))
    return own, others


RECORDER = """
import json, os, sys
root = os.getcwd()
sys.path.insert(0, root)
seen = set()
skip = (os.__file__, os.path.join(os.path.dirname(os.__file__), "_collections_abc.py"))

def note(name):
    # The code that asked: past os.environ's own methods and django-environ, which reads for the settings.
    frame = sys._getframe(2)
    while frame and (frame.f_code.co_filename in skip or os.sep + "environ" + os.sep in frame.f_code.co_filename):
        frame = frame.f_back
    file = frame.f_code.co_filename if frame else ""
    if file.startswith(root + os.sep) and os.sep + ".venv" + os.sep not in file:
        seen.add(name)

class Recording(type(os.environ)):
    def __getitem__(self, name):
        note(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        note(name)
        return super().__contains__(name)

os.environ.__class__ = Recording
os.environ["DJANGO_SETTINGS_MODULE"] = "voiceagent.settings"
import django

django.setup()
print(json.dumps(sorted(seen)))
"""


def variables_read_at_import() -> set[str]:
    """Each variable the service's own code reads while the settings are imported and the apps set up."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", RECORDER], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def service_modules() -> list[Path]:
    """The service's Python modules (top-level folders walked one by one: the virtualenv is never read)."""
    folders = [
        path
        for path in sorted(REPO.iterdir())
        if path.is_dir() and not path.name.startswith(".") and path.name not in NOT_THE_SERVICE
    ]
    candidates = sorted(REPO.glob("*.py")) + [module for folder in folders for module in sorted(folder.rglob("*.py"))]
    return [
        path
        for path in candidates
        if not NOT_THE_SERVICE & set(path.relative_to(REPO).parts[:-1])
        and not path.name.startswith("test_")
        and path.name != "conftest.py"
    ]


def is_environ(node: ast.expr) -> bool:
    """`os.environ`, or a name called `environ` (a parameter that defaults to it)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def variables_named_in_source(path: Path) -> set[str]:
    """The names a module reads: env(...) and env.<cast>(...) of django-environ, os.environ.get,
    os.environ[...], os.getenv, and a call of one of the module's own helpers that reads the variable named by
    its first argument (settings' _choice, _base_url). A name may be a module constant."""
    tree = ast.parse(path.read_text(), filename=str(path))
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def reads_env(call: ast.Call) -> bool:
        func = call.func
        return (
            (isinstance(func, ast.Name) and func.id in {"env", "getenv"})
            or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "env")
            or (isinstance(func, ast.Attribute) and func.attr == "get" and is_environ(func.value))
            or (isinstance(func, ast.Attribute) and func.attr == "getenv")
        )

    def passes_its_name_on(function: ast.FunctionDef) -> bool:
        """A helper whose first parameter is the name of the variable it reads."""
        if not function.args.args:
            return False
        parameter = function.args.args[0].arg
        return any(
            isinstance(call, ast.Call)
            and reads_env(call)
            and call.args
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id == parameter
            for call in ast.walk(function)
        )

    helpers = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and passes_its_name_on(node)}

    def name_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value: str | None = node.value
        elif isinstance(node, ast.Name):
            value = constants.get(node.id)
        else:
            value = None
        return value if value and NAME.match(value) else None

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            found.add(name_of(node.slice) or "")
        if not isinstance(node, ast.Call) or not node.args:
            continue
        if reads_env(node) or (isinstance(node.func, ast.Name) and node.func.id in helpers):
            found.add(name_of(node.args[0]) or "")
    return found - {""}


def variables_the_service_reads() -> set[str]:
    named = set().union(*(variables_named_in_source(path) for path in service_modules()))
    return (variables_read_at_import() | named) - SYSTEM_VARIABLES


def test_the_source_scan_sees_the_ways_settings_are_read() -> None:
    """The scan finds a variable read under a condition, one read through a helper, and one named by a
    constant (a guard against the scan quietly finding nothing)."""
    settings = variables_named_in_source(REPO / "voiceagent" / "settings.py")
    assert {"CELERY_TASK_ALWAYS_EAGER", "DATABASE_POOL_TIMEOUT", "VOICE_ENGINE", "SECRET_KEY"} <= settings
    assert "WEBSOCKET_CLOSE_TIMEOUT_SECONDS" in variables_named_in_source(REPO / "voiceagent" / "server.py")


def test_configuration_documents_every_variable_the_service_reads() -> None:
    own, others = documented_variables()
    read = variables_the_service_reads()
    problems = []
    undocumented = sorted(read - own)
    if undocumented:
        problems.append(f"docs/configuration.md does not document: {', '.join(undocumented)}")
    stale = sorted(own - read)
    if stale:
        problems.append(
            f"docs/configuration.md documents variables nothing reads: {', '.join(stale)} "
            f'(a variable read by another program belongs under "{OTHER_PROGRAMS_HEADING[3:]}")'
        )
    assert not problems, "\n".join(problems)
    assert not own & others, f"listed twice: {sorted(own & others)}"


def test_every_variable_of_the_production_example_is_documented() -> None:
    text = (REPO / "deploy" / "env.example").read_text()
    example = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, re.M))
    own, others = documented_variables()
    assert not example - own - others, f"deploy/env.example sets undocumented: {sorted(example - own - others)}"
