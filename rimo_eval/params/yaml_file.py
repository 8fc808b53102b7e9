"""The project's one YAML reader for files a person writes (params.yaml, the errata, sweep
files): safe loading that refuses a key given twice in one mapping, and aliases that expand
the document beyond a budget.

YAML says keys are unique, but PyYAML keeps the last copy silently: two ``limit:`` lines under
``predict`` ran with the second. Each repeat is named with its key path and the lines of both
copies. Merge keys (``<<: *anchor``) may still be overridden by an explicit key: that is what
they are for.

Aliases share one node, so loading a "billion laughs" is cheap, but everything that walks the
result (check-params, a sweep's ``-S`` values) walks every copy: 10 KB of nine levels kept
check-params busy for minutes (issue 42). The loader counts what each alias adds to the
expanded tree as it composes, in time linear in the file, and stops at ``ALIAS_NODES_MAX`` with
the file, line and column of the alias; an alias inside its own anchor (a cycle no walker
ends) and nesting deeper than ``DEPTH_MAX`` (Python's recursion) are refused the same way. The
errors are ``yaml.YAMLError``s, so every caller already reports them as bad YAML of the file.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rimo_eval.io.surrogates import escaped

MERGE_TAG = "tag:yaml.org,2002:merge"
# Nodes that aliases may add to the expanded document, all aliases together: far above any
# anchor a person reuses (a shared section of a few hundred nodes, a hundred times), far below
# what takes a walker more than a fraction of a second.
ALIAS_NODES_MAX = 100_000
DEPTH_MAX = 100  # collections inside collections; params nest five deep


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts the expanded size of every alias while composing."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._sizes: dict[int, int] = {}  # id(node) -> its expanded size (complete nodes only)
        self._open: list[str | None] = []  # anchors of the collections being composed
        self._added = 0

    def _size(self, node: Node) -> int:
        known = self._sizes.get(id(node))
        if known is None:
            if isinstance(node, SequenceNode):
                known = 1 + sum(self._size(item) for item in node.value)
            elif isinstance(node, MappingNode):
                known = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
            else:
                known = 1
            self._sizes[id(node)] = known
        return known

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent) and event.anchor in self.anchors:
            if event.anchor in self._open:
                raise _refused(f"the alias *{event.anchor} is inside its own anchor: a "
                               f"structure that contains itself is refused", event.start_mark)
            self._added += self._size(self.anchors[event.anchor])
            if self._added > ALIAS_NODES_MAX:
                raise _refused(f"the aliases up to *{event.anchor} expand the document by more "
                               f"than {ALIAS_NODES_MAX} nodes (a YAML alias bomb?): write the "
                               f"values out, or alias less", event.start_mark)
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        if len(self._open) >= DEPTH_MAX:
            raise _refused(f"nested more than {DEPTH_MAX} levels deep", event.start_mark)
        self._open.append(event.anchor if isinstance(event, NodeEvent) else None)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.pop()


def _refused(problem: str, mark: Any) -> ComposerError:
    """A composer error as PyYAML words its own: the problem, then the file, line and column."""
    return ComposerError(None, None, problem, mark)


def _repeats(loader: yaml.SafeLoader, node: Node, path: tuple[str, ...],
             seen: set[int]) -> list[tuple[tuple[str, ...], int, int]]:
    """(key path, first line, repeated line) of every key given twice, depth first."""
    if id(node) in seen:  # an alias to a node already walked (or a recursive anchor)
        return []
    seen.add(id(node))
    found: list[tuple[tuple[str, ...], int, int]] = []
    if isinstance(node, MappingNode):
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG or not isinstance(key_node, ScalarNode):
                found += _repeats(loader, value_node, path, seen)
                continue
            key = loader.construct_object(key_node, deep=True)
            name = (*path, escaped(key))
            line = key_node.start_mark.line + 1
            try:
                if key in first:
                    found.append((name, first[key], line))
                else:
                    first[key] = line
            except TypeError:  # unhashable: the constructor refuses it with its own message
                pass
            found += _repeats(loader, value_node, name, seen)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            found += _repeats(loader, item, (*path, str(index)), seen)
    return found


class DuplicateKeyError(ValueError):
    """One line per repeated key: ``file:line: key.path: given twice (first at line N) ...``."""


def load_unique(text: str, name: str | os.PathLike[str]) -> Any:
    """The YAML document in ``text`` (None when empty), as ``yaml.safe_load`` builds it.

    Raises DuplicateKeyError when a mapping holds a key twice, yaml.YAMLError when the text is
    not YAML or its aliases or nesting are over the budget. ``name`` is how the file is named
    in the message.
    """
    where = os.fspath(name)
    loader = _BoundedLoader(text)
    loader.name = where  # a syntax error names the file, not "<unicode string>"
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        repeats = _repeats(loader, node, (), set())
        if repeats:
            raise DuplicateKeyError("\n".join(
                f"{where}:{again}: {'.'.join(path)}: key given twice (first at line {first}); "
                f"YAML would keep only the last copy: delete one"
                for path, first, again in repeats))
        return loader.construct_document(node)
    finally:
        loader.dispose()
