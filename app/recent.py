"""Recently opened models, kept in QSettings (spec + optional weights)."""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings

KEY = "recent/models"
MAX_RECENT = 10


class RecentModels:
    """A most-recent-first list of ``(spec, weights)`` pairs, persisted in QSettings."""

    def __init__(self, settings: QSettings | None = None) -> None:
        self.settings = settings or QSettings("Hookscope", "Hookscope")

    def items(self) -> list[tuple[str, str | None]]:
        raw = self.settings.value(KEY, "[]")
        try:
            data = json.loads(raw if isinstance(raw, str) else "[]")
        except ValueError:
            return []
        out = []
        for entry in data:
            if isinstance(entry, list) and entry and isinstance(entry[0], str):
                out.append((entry[0], entry[1] if len(entry) > 1 and entry[1] else None))
        return out

    def add(self, spec: str, weights: str | None = None) -> None:
        items = [(s, w) for s, w in self.items() if (s, w) != (spec, weights)]
        items.insert(0, (spec, weights))
        self.settings.setValue(KEY, json.dumps([list(i) for i in items[:MAX_RECENT]]))

    def clear(self) -> None:
        self.settings.setValue(KEY, "[]")
