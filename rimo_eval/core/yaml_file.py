"""The project's one YAML reader for files a person writes (params.yaml, the errata): safe
loading that refuses a key given twice in one mapping.

YAML says keys are unique, but PyYAML keeps the last copy silently: two ``limit:`` lines under
``predict`` ran with the second. Each repeat is named with its key path and the lines of both
copies. Merge keys (``<<: *anchor``) may still be overridden by an explicit key: that is what
they are for.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rimo_eval.io.surrogates import escaped

MERGE_TAG = "tag:yaml.org,2002:merge"


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
    not YAML. ``name`` is how the file is named in the message.
    """
    where = os.fspath(name)
    loader = yaml.SafeLoader(text)
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
