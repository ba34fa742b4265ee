"""Functions, classes, bodies and statements in a syntax tree, by the language's row.

What the ``--node`` selectors (infill.text.spans) and the documentation sites (infill.text.docstring_sites)
look for, in any language of the table (infill.text.languages): a definition is a node of the row's
``functions`` or ``classes`` kinds, or a declarator binding a name to a function (JavaScript's
``const f = (a) => a``: the ``variable_declarator``); its *outer* node takes in a wrapper
(Python's decorators, JavaScript's ``export`` and ``const``, C++'s ``template``) that holds it
alone; its name is its ``name`` field, else what the
grammar names it by (a Rust ``impl``'s type, a C function's declarator, a Go type's spec); its
qualified name adds the definitions around it (and a Go method's receiver type, or a C++
``Class::`` qualifier). All ranges here are tree-sitter's byte offsets.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import tree_sitter

from infill.text.languages import Language, grammar


def kind_of(node: tree_sitter.Node, language: Language) -> str | None:
    """"function" or "class" for a definition node of ``language``, else None."""
    if node.type in language.functions or bound_function(node, language) is not None:
        return "function"
    if node.type in language.classes and (node.type not in _NEED_A_BODY or body_node(node, language)):
        return "class"
    return None


_NEED_A_BODY = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
"""C/C++ kinds that are also mere type names (``struct point *p``): definitions only with a body."""


def bound_function(node: tree_sitter.Node, language: Language) -> tree_sitter.Node | None:
    """The function a declarator binds a name to (``const f = async (a) => a``: the arrow
    function), or None if ``node`` is no such declarator."""
    if node.type not in language.declarators:
        return None
    value, name = node.child_by_field_name("value"), node.child_by_field_name("name")
    if value is None or name is None or name.type != "identifier":
        return None
    return value if value.type in language.function_values else None


def definitions(root: tree_sitter.Node, language: Language) -> list[tree_sitter.Node]:
    """Every function and class definition in the tree, in source order."""
    captures = tree_sitter.QueryCursor(_definition_query(language)).captures(root)
    found = [node for node in captures.get("definition", []) if kind_of(node, language)]
    return sorted(found, key=lambda node: node.start_byte)


@functools.cache
def _definition_query(language: Language) -> tree_sitter.Query:
    wanted = language.functions | language.classes | language.declarators
    kinds = " ".join(f"({kind})" for kind in sorted(wanted))
    return tree_sitter.Query(grammar(language), f"[{kinds}] @definition")


def outer(node: tree_sitter.Node, language: Language) -> tree_sitter.Node:
    """The wrapper around a definition (decorators, ``export``, ``template``), else the node."""
    definition, parent = node, node.parent
    while parent is not None and parent.type in language.wrappers and inner(parent, language) == definition:
        node, parent = parent, parent.parent
    return node


def inner(node: tree_sitter.Node, language: Language) -> tree_sitter.Node:
    """The definition inside a wrapper (unwrapped all the way); any other node as it is. A wrapper
    holding several nodes of the definition's kind (``const f = () => 1, g = 2;``) wraps none."""
    while node.type in language.wrappers:
        found = next((child for child in node.named_children
                      if kind_of(child, language) or child.type in language.wrappers), None)  # fmt: skip
        if found is None or sum(child.type == found.type for child in node.named_children) > 1:
            return node
        node = found
    return node


def whole_kind(node: tree_sitter.Node, language: Language) -> str | None:
    """"function" or "class" if ``node`` is a whole definition (its wrapper included), else None."""
    definition = inner(node, language)
    kind = kind_of(definition, language)
    return kind if kind is not None and outer(definition, language) == node else None


def name_of(node: tree_sitter.Node) -> str:
    """A definition's own name ("?" if the grammar gives it none)."""
    found = node.child_by_field_name("name")
    if found is None:  # a Rust impl: its type; a C/C++ function: the innermost declarator
        found = node.child_by_field_name("type") if node.type == "impl_item" else None
        declarator = node.child_by_field_name("declarator")
        while declarator is not None:
            found, declarator = declarator, declarator.child_by_field_name("declarator")
    if found is None:  # a Go type declaration: its (first) type spec
        spec = next((child for child in node.named_children if child.type.startswith("type_")), None)
        found = spec.child_by_field_name("name") if spec is not None else None
    if found is None:
        return "?"
    name = node_text(found)
    if found.type in ("generic_type", "template_type"):  # Stack<T>
        name = name.split("<")[0]
    return name.strip()


def qualified_name(node: tree_sitter.Node, language: Language) -> tuple[str, ...]:
    """Names of the definition and the definitions around it, outermost first (a C++
    ``Box::area`` and a Go method of ``*Box`` both give ("Box", "area"))."""
    names: list[str] = []
    current: tree_sitter.Node | None = node
    while current is not None:
        if kind_of(current, language):
            own = [part for part in name_of(current).split("::") if part]
            names.extend(reversed(own or ["?"]))
            if current.type == "method_declaration" and current.child_by_field_name("receiver"):
                names.append(_receiver_type(current.child_by_field_name("receiver")))
        current = current.parent
    return tuple(reversed(names))


def _receiver_type(receiver: tree_sitter.Node) -> str:
    """A Go method receiver's type name: ``(b *Box[T])`` gives "Box"."""
    text = node_text(receiver).strip("() ")
    words = text.replace("*", " ").split()
    return (words[-1] if words else "?").split("[")[0]


def describe(node: tree_sitter.Node, language: Language) -> str:
    """E.g. "function Cls.method" or "class Outer.Inner"."""
    return f"{kind_of(node, language) or node.type} {'.'.join(qualified_name(node, language))}"


def body_node(definition: tree_sitter.Node, language: Language) -> tree_sitter.Node | None:
    """A definition's body: its ``body`` field (a bound function's: the function's), else the
    first block below it (a Go struct's field list)."""
    body = (bound_function(definition, language) or definition).child_by_field_name("body")
    if body is not None:
        return body
    pending = list(definition.named_children)
    while pending:
        node = pending.pop(0)
        if node.type in language.blocks:
            return node
        pending.extend(node.named_children)
    return None


def body_range(definition: tree_sitter.Node, language: Language) -> tuple[int, int] | None:
    """Byte range of a definition's body: what is between the body's braces (whole lines when
    the braces end and start lines of their own: ``{`` ends its line, ``}`` starts its own); else
    the indented block (Python) with the comment lines just above it."""
    body = body_node(definition, language)
    if body is None:
        return None
    braces = [child for child in body.children if child.type in ("{", "}")]
    if len(braces) < 2 or braces[0].type != "{" or braces[-1].type != "}":
        return _indented_body_range(definition, body)
    data, base = body.text or b"", body.start_byte
    start, end = braces[0].end_byte - base, braces[-1].start_byte - base
    line_break = data.find(b"\n", start, end)
    if line_break != -1 and not data[start:line_break].strip():  # "{" ends its line
        start = line_break + 1
    line_break = data.rfind(b"\n", start, end)
    if line_break != -1 and not data[line_break:end].strip():  # "}" starts its line
        end = line_break - data[:line_break].endswith(b"\r")
    return base + start, base + max(start, end)


def _indented_body_range(definition: tree_sitter.Node, body: tree_sitter.Node) -> tuple[int, int]:
    """tree-sitter leaves comments between the ``def ...:`` line and the first statement outside
    the block; they belong to the body all the same. A comment on the header line does not."""
    colons = [child for child in definition.children if child.type == ":"]
    header_end_row = colons[-1].end_point.row if colons else definition.start_point.row
    start = body.start_byte
    for child in definition.children:
        above = child.start_point.row > header_end_row and child.start_byte < body.start_byte
        if child.type == "comment" and above:
            start = min(start, child.start_byte)
    return start, body.end_byte


def is_statement(node: tree_sitter.Node, language: Language) -> bool:
    """A named node (not a comment) directly inside a block, or the definition in a wrapper
    (a decorated function: the whole, and the ``def`` on its own)."""
    parent = node.parent
    if parent is None or not node.is_named or node.is_error or "comment" in node.type:
        return False
    return parent.type in language.blocks or (parent.type in language.wrappers and kind_of(node, language))


def statements_on_row(root: tree_sitter.Node, row: int, language: Language) -> Iterator[tree_sitter.Node]:
    """Statements whose lines include the 0-based ``row``, outer before inner."""
    stack = [root]
    while stack:
        node = stack.pop()
        if is_statement(node, language):
            yield node
        stack.extend(
            child for child in reversed(node.children) if child.start_point.row <= row <= child.end_point.row
        )


def is_expression(node: tree_sitter.Node, language: Language) -> bool:
    """Whether ``node`` is an expression of ``language`` (a definition's own name is not)."""
    if node.type not in expression_types(language):
        return False
    parent = node.parent
    own_name = parent is not None and kind_of(parent, language) and parent.child_by_field_name("name") == node
    return not own_name


@functools.cache
def expression_types(language: Language) -> frozenset[str]:
    """Node types of expressions: the subtypes of the grammar's ``expression`` supertype where it
    declares one, else the kinds named ``*_expression`` plus identifiers and literals."""
    table = grammar(language)
    supertypes = set(table.supertypes)
    names = {table.node_kind_for_id(kind): kind for kind in supertypes}
    root = names.get("expression", names.get("_expression"))
    if root is None:
        kinds = (table.node_kind_for_id(i) for i in range(table.node_kind_count))
        endings = ("_expression", "identifier", "literal")
        return frozenset(kind for kind in kinds if kind and kind.endswith(endings))
    found: set[str] = set()
    pending = [root]
    while pending:
        for subtype in table.subtypes(pending.pop()):
            if subtype in supertypes:
                pending.append(subtype)
            else:
                found.add(table.node_kind_for_id(subtype))
    return frozenset(found)


def node_text(node: tree_sitter.Node) -> str:
    """The source text a node covers."""
    return (node.text or b"").decode("utf-8", "surrogatepass")
