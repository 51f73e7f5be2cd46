"""Getting a function's source and AST, and errors that point at the user's file and line."""

import ast
import inspect
import linecache
import textwrap

from ..errors import UnsupportedError

__all__ = ["FunctionSource", "get_source", "located_error"]


class FunctionSource:
    """The parsed source of one Python function.

    ``tree`` is the ast.FunctionDef (or ast.Lambda); line numbers in it are relative to the
    snippet, so ``line_offset`` is added to get the file's line, and ``col_offset`` (the
    indentation removed by dedent) is added to columns."""

    __slots__ = ("func", "tree", "filename", "line_offset", "col_offset", "lines", "qualname")

    def __init__(self, func, tree, filename, line_offset, col_offset, lines):
        self.func = func
        self.tree = tree
        self.filename = filename
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.lines = lines
        self.qualname = getattr(func, "__qualname__", getattr(func, "__name__", "<function>"))

    def file_line(self, node):
        return getattr(node, "lineno", 1) + self.line_offset

    def location(self, node):
        """'  File "x.py", line 12, in f\\n    <source line>\\n    ^^^' for an AST node."""
        if node is None or not hasattr(node, "lineno"):
            node = self.tree
        rel = node.lineno
        line_no = rel + self.line_offset
        text = self.lines[rel - 1] if 0 < rel <= len(self.lines) else ""
        col = getattr(node, "col_offset", 0) or 0
        end_col = getattr(node, "end_col_offset", None)
        if getattr(node, "end_lineno", rel) != rel or end_col is None or end_col <= col:
            end_col = max(len(text.rstrip()), col + 1)
        stripped = text.lstrip()
        lead = len(text) - len(stripped)
        caret = " " * max(col - lead, 0) + "^" * max(end_col - col, 1)
        return '  File "%s", line %d, in %s\n    %s\n    %s' % (
            self.filename, line_no, self.qualname, stripped.rstrip(), caret)


def located_error(cls, message, src, node):
    """An exception of ``cls`` whose message ends with the location block."""
    err = cls("%s\n%s" % (message, src.location(node)))
    err.cufunc_location = (src.filename, src.file_line(node) if node is not None else None)
    return err


def _func_name(func):
    return getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))


def get_source(func):
    """Parse ``func``'s source. Raises UnsupportedError when there is none (exec, the plain
    interactive prompt, builtins) or it cannot be isolated (several lambdas on one line)."""
    code = getattr(func, "__code__", None)
    if code is None:
        raise UnsupportedError("cannot translate %r: it is not a Python function" % (func,))
    try:
        raw_lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError) as e:
        raise UnsupportedError(
            "cannot translate %s: its source code is not available (%s). Functions defined with "
            "exec() or at the plain interactive prompt have no source; define it in a file "
            "(or in IPython/Jupyter, which keep the source)." % (_func_name(func), e)) from None
    filename = code.co_filename
    text = "".join(raw_lines)
    dedented = textwrap.dedent(text)
    first_line = raw_lines[0] if raw_lines else ""
    first_ded = dedented.splitlines(True)[0] if dedented else ""
    col_offset = len(first_line) - len(first_ded)
    lines = [l.rstrip("\n") for l in raw_lines]
    line_offset = (first if first > 0 else 1) - 1
    tree = None
    if func.__name__ == "<lambda>":
        tree = _find_lambda(dedented, code, line_offset)
    else:
        try:
            mod = ast.parse(dedented)
        except SyntaxError as e:
            raise UnsupportedError("cannot translate %s: its source does not parse on its own "
                                   "(%s)" % (_func_name(func), e)) from None
        for node in mod.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name == func.__name__:
                tree = node
                break
        if tree is None and mod.body and isinstance(mod.body[0], (ast.FunctionDef,
                                                                  ast.AsyncFunctionDef)):
            tree = mod.body[0]
    if tree is None:
        raise UnsupportedError("cannot translate %s: its definition was not found in its source "
                               "(%s, line %d)" % (_func_name(func), filename, first))
    # The source lines shown in errors come from the file as it is now when possible.
    shown = []
    for i, l in enumerate(lines):
        cur = linecache.getline(filename, line_offset + i + 1).rstrip("\n")
        shown.append(cur if cur.strip() == l.strip() and cur else l)
    # ast columns are relative to the dedented text; shift them back to the file's columns.
    if col_offset:
        for node in ast.walk(tree):
            if hasattr(node, "col_offset") and node.col_offset is not None:
                node.col_offset += col_offset
            if getattr(node, "end_col_offset", None) is not None:
                node.end_col_offset += col_offset
    return FunctionSource(func, tree, filename, line_offset, col_offset, shown)


def _find_lambda(text, code, line_offset):
    """The lambda whose first line and parameter names match the code object."""
    mod = None
    candidates = [text]
    # A lambda passed as an argument spans a partial statement; try trimming to the lambda.
    idx = text.find("lambda")
    while idx >= 0:
        candidates.append(text[idx:])
        idx = text.find("lambda", idx + 1)
    params = list(code.co_varnames[:code.co_argcount])
    for cand in candidates:
        for trim in range(0, 200):
            piece = cand if trim == 0 else cand[:-trim]
            if not piece.strip():
                break
            try:
                mod = ast.parse(piece.strip())
            except SyntaxError:
                continue
            found = [n for n in ast.walk(mod) if isinstance(n, ast.Lambda)
                     and [a.arg for a in n.args.args] == params]
            if len(found) == 1:
                return found[0]
            break
    raise UnsupportedError("cannot translate the lambda defined at %s line %d: its source "
                           "cannot be isolated; use a def" % (code.co_filename,
                                                              code.co_firstlineno))
