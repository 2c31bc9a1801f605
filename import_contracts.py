"""A contract type of our own for import-linter (`.importlinter`, `make lint`): no import circle between the
project's top-level packages. import-linter's `acyclic_siblings` needs a common parent package; the apps
have none. Test modules (any `tests` package) are left out: tests may import each other's helpers."""

from __future__ import annotations

from collections import defaultdict

import grimp
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

MAX_IMPORTS_SHOWN = 3


def _is_test(module: str) -> bool:
    return "tests" in module.split(".")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


class AcyclicPackagesContract(Contract):
    """The listed top-level packages import one another without a circle (their tests excepted)."""

    type_name = "acyclic_packages"

    packages = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(AlertLevel, default=AlertLevel.ERROR)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph,
            ignore_imports=self.ignore_imports,  # type: ignore[arg-type]  # a field, read as its parsed value
            unmatched_alerting=self.unmatched_ignore_imports_alerting,  # type: ignore[arg-type]  # the same
        )
        packages = set(self.packages)  # type: ignore[call-overload]  # the same
        edges: dict[str, set[str]] = defaultdict(set)
        examples: dict[tuple[str, str], list[str]] = defaultdict(list)
        for importer in sorted(graph.modules):
            source = importer.split(".")[0]
            if source not in packages or _is_test(importer):
                continue
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                target = imported.split(".")[0]
                if target != source and target in packages and not _is_test(imported):
                    edges[source].add(target)
                    examples[(source, target)].append(f"{importer} -> {imported}")
        cycles = [
            {
                "packages": component,
                "imports": {
                    f"{a} -> {b}": examples[(a, b)] for a in component for b in component if b in edges.get(a, set())
                },
            }
            for component in _cycles(edges)
        ]
        return ContractCheck(
            kept=not cycles,
            warnings=list(removal.warnings),
            ignored_import_count=removal.ignored_import_count,
            metadata={"cycles": cycles},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(f"Import circle between {', '.join(cycle['packages'])}:")
            output.new_line()
            for pair, imports in cycle["imports"].items():
                more = f" (and {len(imports) - MAX_IMPORTS_SHOWN} more)" if len(imports) > MAX_IMPORTS_SHOWN else ""
                output.print_error(f"- {pair}: {'; '.join(imports[:MAX_IMPORTS_SHOWN])}{more}")
            output.new_line()
