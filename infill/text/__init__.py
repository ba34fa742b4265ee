"""The text, with no model: documents, spans and their selectors, syntax, edits (tree-sitter).

    document         a file's text and how to write it back byte for byte (BOM, line endings)
    languages        the languages infill knows: one row each (grammar, node kinds, comments)
    spans            what to regenerate: lines, ranges, syntax nodes (selectors), as spans
    definitions      functions, classes, bodies and statements in a syntax tree
    docstring_sites  where a docstring or doc comment is missing (doc_comments: how one is written)
    syntax           syntax errors as the parser finds them (parse_cache: parse a text once)
    window           the piece of a long text a request works on, and its edits mapped back
    line_shape       a fill keeps the line shape of the span it replaces
    edits            minimal text edits, unified diffs, JSON ranges

The language server lists its actions with these alone; the engine (infill.engine) uses them too.
"""
