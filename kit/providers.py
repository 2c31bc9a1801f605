"""One registry style for every kind of provider (voice engines, brains, tool kinds, phone providers).

A registry maps a configured name to a dotted path ("package.module:ClassName") that is imported only
when the name is first used, so that choosing one provider never imports the others' libraries. Every
provider raises `ProviderError` for a failure of its own; `permanent` says whether retrying can help
(a bad configuration or a refused request is permanent; a timeout or a dropped connection is not).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any


class ProviderError(Exception):
    """A provider failed. `message` is safe to show to an operator (no credentials, no URL paths)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


class Registry:
    """Names mapped to lazily imported classes: `registry.get(name)` returns the class."""

    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        self.kind = kind
        self._entries = dict(entries)
        self._loaded: dict[str, Any] = {}

    @property
    def names(self) -> Iterable[str]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> Any:
        if name not in self._entries:
            known = ", ".join(sorted(self._entries))
            raise ProviderError(f"Unknown {self.kind} {name!r} (known: {known})", permanent=True)
        if name not in self._loaded:
            module_path, _, attribute = self._entries[name].partition(":")
            self._loaded[name] = getattr(importlib.import_module(module_path), attribute)
        return self._loaded[name]
