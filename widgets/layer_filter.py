"""The tree's filter: which rows a typed name, type or layer pattern keeps.

:class:`LayerFilterProxy` keeps rows whose path or type contains the text, or,
for a wildcard (``h.*.mlp``), rows whose path fits it as a layer pattern, the
same patterns as ``--capture``. A pattern that matches nothing from the root
but does from deeper down (``h.*.mlp`` on a Hugging Face GPT-2, whose blocks are
``transformer.h.N``) is matched at any depth, and says so (:attr:`anywhere`).
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel

from hookscope.core.plan import is_pattern, matches, rooted_suggestion

from .layer_tree_model import COL_LAYER, COL_TYPE, PATH_ROLE, LayerTreeModel


class LayerFilterProxy(QSortFilterProxyModel):
    """Keeps rows whose path or type contains the filter text (any case), or, when the
    text has a wildcard (``h.*.mlp``), rows whose path fits it as a layer pattern."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._needle = ""
        #: a pattern that matched nothing from the root but does one level down or
        #: deeper (``h.*.mlp`` on GPT-2's ``transformer.h.0.mlp``): matched as ``**.PATTERN``
        self.anywhere = False
        self.setRecursiveFilteringEnabled(True)
        # A matching parent keeps its whole subtree: "encoder" shows every layer inside.
        self.setAutoAcceptChildRows(True)

    def set_needle(self, text: str) -> None:
        needle = text.strip().lower()
        paths = self.paths()
        self.anywhere = (is_pattern(needle) and not any(matches(needle, p.lower()) for p in paths)
                         and rooted_suggestion(needle, [p.lower() for p in paths]) is not None)
        # Qt >= 6.10 replaces invalidateFilter() with begin/endFilterChange().
        if hasattr(self, "beginFilterChange"):
            self.beginFilterChange()
            self._needle = needle
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._needle = needle
            self.invalidateFilter()

    def paths(self) -> list[str]:
        """Every layer path of the tree, in model order."""
        src = self.sourceModel()
        root = src.tree() if isinstance(src, LayerTreeModel) else None
        return [n.path for n in root.walk() if n.path] if root is not None else []

    def accepts(self, path: str, type_name: str) -> bool:
        """Whether a row itself (not for a match inside it) fits the filter text."""
        path, type_name = path.lower(), type_name.lower()
        if not self._needle:
            return True
        if is_pattern(self._needle):  # h.*.mlp, layer*.0.conv1: the same patterns as --capture
            return matches(("**." if self.anywhere else "") + self._needle, path)
        return self._needle in path or self._needle in type_name

    def matching_paths(self) -> list[str]:
        """Every layer the filter text names itself, in model order (empty text: none)."""
        src = self.sourceModel()
        root = src.tree() if isinstance(src, LayerTreeModel) else None
        if not self._needle or root is None:
            return []
        return [n.path for n in root.walk() if n.path and self.accepts(n.path, n.type_name)]

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        if not self._needle:
            return True
        src = self.sourceModel()
        idx = src.index(source_row, COL_LAYER, source_parent)
        return self.accepts(str(src.data(idx, PATH_ROLE) or ""),
                            str(src.data(idx.siblingAtColumn(COL_TYPE)) or ""))
