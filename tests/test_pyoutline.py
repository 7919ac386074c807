"""The Python outline scan answers what the ``ast`` walk answers, on every installed module and on hard cases."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from xerj_core.autoindex.builtin_formats import code, pyoutline
from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.builtin_formats.pyoutline import Definition, outline, outline_from_tree
from xerj_core.autoindex.formats import FormatError, decode_text, file_name

MTIME = 1_700_000_000_000


def _reference(text: str):
    try:
        return outline_from_tree(ast.parse(text))
    except (SyntaxError, ValueError):
        return None


def _installed_modules() -> list[Path]:
    site = Path(sysconfig.get_paths()["purelib"])
    return sorted(path for path in site.rglob("*.py") if path.is_file())


@pytest.mark.slow
def test_the_scan_matches_ast_on_every_installed_module():
    checked = answered = 0
    wrong = []
    for path in _installed_modules():
        try:
            text = decode_text(path.read_bytes()).text
        except (OSError, FormatError):
            continue
        checked += 1
        found = outline(text)
        if found is None:
            continue
        answered += 1
        if found != _reference(text):
            wrong.append(str(path))
    assert checked > 1000
    assert not wrong, f"{len(wrong)} modules outlined unlike ast: {wrong[:5]}"
    # the scan must vouch for nearly every real module, or it saves nothing
    assert answered >= 0.99 * checked, (answered, checked)


HARD_CASES = {
    "decorated and async": "import os\n\n@a.b(1,\n   2)\n@c\nasync def f(x):\n    return [\n1]\n# trailing\n\nclass K(object):  # c\n    '''doc\ndef fake():\n'''\n    x = (1,\n)\n\n\nX = 1\n",
    "closing bracket at column 0": "x = foo(\n    1,\n)\ndef f():\n    pass\n",
    "string at column 0": 's = """\ndef not_a_def():\n    import nothing\n"""\ndef real(): return 1\n',
    "backslash continuation": "x = 1 + \\\n2\ndef f(): \\\n    pass\nimport a.b \\\n    as c, d\nfrom e \\\n    import f\n",
    "one-line bodies": "try: import json\nexcept ImportError: import simplejson as json\nif x: import y; import z.w\n",
    "nested imports": "def f():\n    if a:\n        import b\n    else:\n        from c.d import e\n    try:\n        pass\n    finally:\n        import g\n"
                      "match x:\n    case 1:\n        import h\nwhile 1:\n    import i\nelse:\n    import j\n",
    "relative and dotted": "from . import a\nfrom .b import c\nfrom ..d.e import f\nfrom.g import h\nfrom x . y import (\n  z,\n)\nimport  p . q\n",
    "import words in strings and comments": "x = 'import os'  # import sys\ny = f\"{'import re'}\"\n#def g(): pass\n",
    "names with from and import inside": "from a.from_b import c\nimport importlib, my_import\nfrom frommer import x\n",
    "semicolons and ellipsis": "def f(): ...; x = 1\nclass A: pass\nfrom ... import z\n",
    "escaped quotes": "s = 'it\\'s'\nt = \"a\\\"b\"\nu = '''x\\'''y'''\ndef f(): pass\n",
    "raw and byte strings": "r = r'\\d+'\nb = rb\"\\\\\"\ndef f(): return b'('\n",
    "empty": "",
    "only comments": "# one\n# two\n",
    "no trailing newline": "def f():\n    return 1",
    "bodies ending before comments": "def f():\n    x = 1  # c\n    # done\n\n# between\nclass K:\n    y = 2\n"
                                     "        # deeper\n  \n# end\n# end",
    "bodies ending in blank lines of a string": "def f():\n    return '''\n\n   \n'''\n\nx = 1\n"
                                                "def g(): s = '''a\n  # not a comment\n'''\n# c\n",
    "blank lines with spaces": "def f():\n    x = 1\n    \n  \n\n    y = 2\n\n\n\nz = 3\n",
    "class named like keyword prefix": "classify = 1\ndefault = 2\nasync_mode = 3\nclass_ = 4\n",
    "unicode identifiers": "def ﬁle():\n    pass\nimport ﬁle_mod\nclass Café: pass\n",
    "py2 print": 'print "hello"\ndef f():\n    pass\n',
    "py2 print in a function": 'def f():\n    print "hello"\n',
    "py2 except": "try:\n    pass\nexcept Exception, e:\n    pass\n",
    "py2 raise": 'raise ValueError, "x"\n',
    "py2 backticks": "x = `1`\n",
    "py2 inequality": "if a <> b: pass\n",
    "unterminated string": "x = 'abc\ndef f(): pass\n",
    "unterminated triple string": 'x = """abc"\ndef f(): pass\n',
    "unbalanced brackets": "x = (1,\ndef f(): pass\n",
    "extra closing bracket": "x = 1)\ndef f(): pass\n",
    "decorator on nothing": "@dec\nx = 1\n",
    "def without a name": "def (:\n",
    "NUL byte": "x = 1\0\n",
    "form feed": "\fdef f(): pass\n",
    "bad identifier": "€ = 2\n",
    "print as a name": "print = 3\nprint (x)\nprint\nprint if a else b\n",
}


@pytest.fixture(params=["compiled walk", "numpy passes"])
def byte_pass(request):
    """Runs a test once with each byte-level pass of the scan (see pyoutline.ENABLED): the compiled walk, then the
    regular expression and numpy's passes. Without a build of the walk its half is skipped, unless
    XERJ_REQUIRE_PYSCAN_KERNEL=1 (scripts/test) made the import fail already."""
    compiled = request.param == "compiled walk"
    if compiled and pyoutline._scan is None:
        pytest.skip("the outline's compiled walk was not built (no C compiler at install)")
    if compiled and pyoutline._NESTED_FSTRINGS:
        pytest.skip("the compiled walk does not check 3.12's nested f-string quotes: the numpy passes run there")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pyoutline, "ENABLED", compiled)
        yield request.param


# Cases for the walk's own edges (where a literal or a comment ends, escapes at the end of the file): both
# passes must say the same of them, whatever ast says.
WALK_CASES = {
    "string at the end": "x = 'a'",
    "backslash ending the file in a string": "x = 'a\\",
    "backslash ending the file in a triple string": 'x = """a\\',
    "four and five quotes": 'a = """x""""\nb = """"""\nc = """""\n"""\n',
    "escaped newline in a short string": "x = 'a\\\nb'\ndef f(): pass\n",
    "a newline in a short string": "x = 'a\nb'\ndef f(): pass\n",
    "two quotes at the end": 'x = ""',
    "three quotes at the end": 'x = """',
    "comment at the end": "x = 1  # no newline",
    "hash and brackets in strings": "x = '#(['\ny = \"]})\"  # ((\ndef f(): pass\n",
    "less than then greater than": "x = a < b > c\ny = '<>'  # <>\nz = '<'>'\n",
    "backslash before a newline in a comment": "x = 1  # \\\ndef f(): pass\n",
    "adjacent literals": "x = 'a''b'\"c\"'''d'''\ndef f(): pass\n",
    "non-ASCII in strings and comments": "s = 'café'  # naïve\ndef f(): return '€'\n",
    "a top line after a closing bracket": "x = [\n1]\ny = 2\n",
    "depth below zero then back": "x = 1)\n(\n",
    "py2 print at the end": "def f():\n    print 'x'",
    "py2 print of a name": "print x\n", "py2 print of a brace": "print {1: 2}\n",
    "py2 print of a tilde": "print ~x\n", "py2 exec of a string": "exec 'x = 1'\n",
    "print before operators": "print if x else y\nprint in z\nprint is not w\nprint and v\nprint or u\n"
                              "print not t\nprint else s\nprint\tor\n",
    "print before operator-like names": "print iffy\n", "print before a number": "print 1\n",
    "print before a call": "print (1)\nprint -1\nprint\n",
    "printer and execute": "printer x\nexecute y\nexcepted z, w\nraised a, b\n",
    "py2 except with a dotted name": "try:\n    pass\nexcept a.b.C , e:\n    pass\n",
    "except and raise without a comma": "try:\n    pass\nexcept (A, B):\n    raise X(1, 2)\n",
    "py2 raise in a string": "s = '''\n  raise E, 'm'\n'''\n",
    "py2 raise with tabs": "\traise\tE\t,\t'm'\n",
    "keywords at the very end": "print", "print and a space at the end": "print ", "raise and a name": "raise E",
    "non-ASCII after print": "print é\n", "non-ASCII name in raise": "raise é, x\n",
}


@pytest.mark.parametrize("name", sorted(HARD_CASES) + sorted(WALK_CASES))
def test_the_two_byte_passes_agree(name):
    if pyoutline._scan is None:
        pytest.skip("the outline's compiled walk was not built (no C compiler at install)")
    text = HARD_CASES.get(name, WALK_CASES.get(name))
    _assert_passes_agree(text)


def _assert_passes_agree(text: str) -> None:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return
    walked = pyoutline._scan(data)
    passed = None if pyoutline._python2(data) else pyoutline._numpy_scan(text, data)
    if passed is None:
        assert walked is None
        return
    assert walked is not None
    kind, newlines, top = walked
    assert kind == passed[0].tobytes()
    assert np.frombuffer(newlines, np.int64).tolist() == passed[1].tolist()
    assert np.frombuffer(top, np.int64).tolist() == passed[2].tolist()


@pytest.mark.slow
def test_the_two_byte_passes_agree_on_every_installed_module():
    if pyoutline._scan is None:
        pytest.skip("the outline's compiled walk was not built (no C compiler at install)")
    checked = 0
    for path in _installed_modules():
        try:
            text = decode_text(path.read_bytes()).text
        except (OSError, FormatError):
            continue
        if "\0" not in text and "\f" not in text and "\r" not in text:
            _assert_passes_agree(text)
            checked += 1
    assert checked > 1000


def test_the_walk_takes_bytes_only():
    if pyoutline._scan is None:
        pytest.skip("the outline's compiled walk was not built (no C compiler at install)")
    with pytest.raises(TypeError):
        pyoutline._scan("x = 1\n")
    assert pyoutline._scan(b"") == (b"", b"", b"")


@pytest.mark.parametrize("name", sorted(HARD_CASES))
def test_the_scan_answers_like_ast_or_not_at_all(name, byte_pass):
    text = HARD_CASES[name]
    found = outline(text)
    reference = _reference(text)
    if reference is None:
        assert found is None, "the scan vouched for a module ast refuses"
    elif found is not None:
        assert found == reference


def test_the_scan_vouches_for_ordinary_modules(byte_pass):
    for name in ("decorated and async", "backslash continuation", "one-line bodies", "nested imports",
                 "relative and dotted", "names with from and import inside", "escaped quotes", "empty"):
        assert outline(HARD_CASES[name]) is not None, name
    found = outline(HARD_CASES["decorated and async"])
    assert found.definitions == (Definition(2, 8, "async def", "f"), Definition(10, 16, "class", "K"))
    assert found.imports == ("os",)
    assert outline(HARD_CASES["relative and dotted"]).imports == ("p.q", "x.y")


def _python_by_tree(fmt: code.CodeFormat, rel_path: str, text: str, mtime_ms: int):
    """The code format's Python documents as the format built them before the scan: every file through ``ast``."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [fmt._card(rel_path, text.strip(), mtime_ms, title=file_name(rel_path), language="python")]
    lines = text.split("\n")
    spans = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            keyword = {ast.ClassDef: "class", ast.AsyncFunctionDef: "async def"}.get(type(node), "def")
            spans.append((first - 1, node.end_lineno or node.lineno, f"{keyword} {node.name}", node.name))
    covered: set[int] = set()
    for start, end, _, _ in spans:
        covered.update(range(start, end))
    outside = "\n".join(line for index, line in enumerate(lines) if index not in covered)
    docs = [fmt._card(rel_path, outside.strip(), mtime_ms, title=file_name(rel_path), language="python",
                      imports=list(outline_from_tree(tree).imports) or None)]
    anchors = Anchors("definition")
    for ordinal, (start, end, label, symbol) in enumerate(spans, start=1):
        docs.append(document(fmt, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchors(symbol)}",
                             title=file_name(rel_path), text="\n".join(lines[start:end]).strip(), section=label,
                             kind="section", ordinal=ordinal, language="python", symbol=symbol, line=start + 1))
    return docs


def test_code_documents_are_those_of_the_tree_path_on_real_modules():
    fmt = code.CodeFormat()
    modules = _installed_modules()[::7][:600]
    compared = 0
    for path in modules:
        data = path.read_bytes()
        try:
            text = decode_text(data).text
        except FormatError:
            continue
        rel = path.name
        assert fmt.parse(rel, data, MTIME) == _python_by_tree(fmt, rel, text, MTIME), str(path)
        compared += 1
    for name, text in HARD_CASES.items():
        assert fmt.parse("m.py", text.encode(), MTIME) == _python_by_tree(fmt, "m.py", text, MTIME), name
    assert compared >= 300
