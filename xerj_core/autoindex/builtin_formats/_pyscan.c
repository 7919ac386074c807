/* The byte-level pass of the Python outline scan (see pyoutline.py) in C: one walk over a module's bytes.
 *
 * The outline needs, per byte, whether it is code, inside a string literal or inside a comment; where the lines
 * are; and which lines start a top-level statement. In Python that took a regular expression's split of the
 * file into code, strings and comments, then a dozen numpy passes over arrays as long as the file: about
 * two-thirds of the outline's time on real code. Here one loop does it, with the same rules:
 *
 * - a string or comment starts at every quote or ``#`` met in code (a prefix such as r, b, f or u changes neither
 *   where a literal ends nor what it may hold, for this interpreter's tokenizer);
 * - a triple-quoted literal ends at the first unescaped matching triple quote; a single-quoted one at its
 *   matching quote, and a newline not escaped by a backslash before that leaves it unclosed; a backslash
 *   escapes the byte after it, whatever it is;
 * - a comment runs to the end of its line (the newline is code).
 *
 * The module gives up (returns None, and the caller parses with ``ast``) where the Python pass gives up: a
 * literal that never closes, a byte of 0x80 or more in code (a non-ASCII identifier), a backtick or ``<>`` in
 * code, brackets that close more than they opened or leave some open, and (as pyoutline's _python2 does before
 * that pass) a line opening with a Python 2 statement. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { CODE = 0, STRING = 1, COMMENT = 2 };

/* A line starting with one of these opens no top-level statement. */
static int blank_opener(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '#';
}

/* Where the literal opening at ``at`` (a quote) ends (one past its closing quote), or -1 when it never closes. */
static Py_ssize_t literal_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    unsigned char q = s[at];
    if (at + 2 < n && s[at + 1] == q && s[at + 2] == q) {
        for (Py_ssize_t j = at + 3; j < n;) {
            if (s[j] == '\\') {
                j += 2;
            } else if (s[j] == q && j + 2 < n && s[j + 1] == q && s[j + 2] == q) {
                return j + 3;
            } else {
                j++;
            }
        }
        return -1;
    }
    for (Py_ssize_t j = at + 1; j < n;) {
        if (s[j] == '\\') {
            j += 2;
        } else if (s[j] == '\n') {
            return -1;
        } else if (s[j] == q) {
            return j + 1;
        } else {
            j++;
        }
    }
    return -1;
}

/* A growable int64 array. */
typedef struct {
    int64_t *items;
    Py_ssize_t size, room;
} Positions;

static int push(Positions *p, int64_t value) {
    if (p->size == p->room) {
        Py_ssize_t room = p->room ? 2 * p->room : 256;
        int64_t *grown = PyMem_RawRealloc(p->items, sizeof(int64_t) * (size_t)room);
        if (grown == NULL) {
            return -1;
        }
        p->items = grown;
        p->room = room;
    }
    p->items[p->size++] = value;
    return 0;
}

/* The walk. Fills ``kind`` (a byte per byte of ``s``) and the newline and top-level line positions; returns 0, 1
 * when the outline cannot vouch for the module, -1 when out of memory. */
static int walk(const unsigned char *s, Py_ssize_t n, unsigned char *kind, Positions *newlines, Positions *top) {
    int64_t depth = 0;
    if (n > 0 && !blank_opener(s[0]) && push(top, 0) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\'') {
            Py_ssize_t end = literal_end(s, n, i);
            if (end < 0) {
                return 1;
            }
            for (; i < end; i++) {
                kind[i] = STRING;
                if (s[i] == '\n') {
                    if (push(newlines, i) < 0) {
                        return -1;
                    }
                    /* a line that starts inside a string continues a statement */
                }
            }
            continue;
        }
        if (c == '#') {
            while (i < n && s[i] != '\n') {
                kind[i++] = COMMENT;
            }
            continue;
        }
        kind[i] = CODE;
        if (c == '(' || c == '[' || c == '{') {
            depth++;
        } else if (c == ')' || c == ']' || c == '}') {
            if (--depth < 0) {
                return 1;
            }
        } else if (c >= 0x80 || c == '`' || (c == '<' && i + 1 < n && s[i + 1] == '>')) {
            return 1;
        } else if (c == '\n') {
            if (push(newlines, i) < 0) {
                return -1;
            }
            /* the next line starts a top-level statement unless inside brackets, after a backslash in code, or
             * blank, indented or a comment */
            Py_ssize_t start = i + 1;
            int slashed = i >= 1 && s[i - 1] == '\\' && kind[i - 1] == CODE;
            if (start < n && depth == 0 && !slashed && !blank_opener(s[start]) && push(top, start) < 0) {
                return -1;
            }
        }
        i++;
    }
    return depth != 0;
}

static int word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

/* Whether ``s[at:]`` starts with the ``size`` bytes of ``word``. */
static int starts(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, const char *word, Py_ssize_t size) {
    return at + size <= n && memcmp(s + at, word, (size_t)size) == 0;
}

/* Past the spaces and tabs from ``at``. */
static Py_ssize_t blanks(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    while (at < n && (s[at] == ' ' || s[at] == '\t')) {
        at++;
    }
    return at;
}

/* Whether the line starting at ``at`` opens with a Python 2 statement that tokenizes like Python 3 but does not
 * parse, as pyoutline's _PYTHON2_STATEMENT reads one: after the indentation, ``print`` or ``exec``, spacing, then
 * neither an operator keyword (if else and or in is not) nor anything but a name, a quote, ``{`` or ``~``; or
 * ``except`` or ``raise``, spacing, a dotted name and a comma. */
static int python2_line(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    static const char *const operators[] = {"if", "else", "and", "or", "in", "is", "not"};
    at = blanks(s, n, at);
    int printing = 1;
    Py_ssize_t size = 0;
    if (starts(s, n, at, "print", 5)) {
        size = 5;
    } else if (starts(s, n, at, "exec", 4)) {
        size = 4;
    } else if (starts(s, n, at, "except", 6)) {
        size = 6;
        printing = 0;
    } else if (starts(s, n, at, "raise", 5)) {
        size = 5;
        printing = 0;
    }
    if (size == 0 || at + size >= n || (s[at + size] != ' ' && s[at + size] != '\t')) {
        return 0;
    }
    Py_ssize_t next = blanks(s, n, at + size);
    if (next >= n) {
        return 0;
    }
    if (printing) {
        for (size_t k = 0; k < sizeof(operators) / sizeof(operators[0]); k++) {
            Py_ssize_t length = (Py_ssize_t)strlen(operators[k]);
            if (starts(s, n, next, operators[k], length) && (next + length >= n || !word_byte(s[next + length]))) {
                return 0;
            }
        }
        unsigned char c = s[next];
        return word_byte(c) || c == '"' || c == '\'' || c == '{' || c == '~';
    }
    Py_ssize_t end = next;
    while (end < n && ((word_byte(s[end]) && s[end] < 0x80) || s[end] == '.')) {
        end++;
    }
    if (end == next) {
        return 0;
    }
    end = blanks(s, n, end);
    return end < n && s[end] == ',';
}

static PyObject *as_bytes(const Positions *p) {
    return PyBytes_FromStringAndSize((const char *)p->items, (Py_ssize_t)sizeof(int64_t) * p->size);
}

PyDoc_STRVAR(scan_doc,
"scan(data) -> (kind, newlines, top) | None\n\n"
"One walk over a module's UTF-8 bytes: ``kind`` holds a byte per byte of ``data`` (0 code, 1 string, 2 comment),\n"
"``newlines`` the offset of every newline and ``top`` the offset where each line opening a top-level statement\n"
"starts, both as native int64 bytes in ascending order. None when the outline cannot vouch for the module (a\n"
"literal that never closes, a non-ASCII byte, a backtick or ``<>`` in code, unbalanced brackets, a Python 2\n"
"statement).");

static PyObject *scan(PyObject *Py_UNUSED(module), PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes bytes");
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    PyObject *kind = PyBytes_FromStringAndSize(NULL, n);
    if (kind == NULL) {
        return NULL;
    }
    Positions newlines = {NULL, 0, 0}, top = {NULL, 0, 0};
    int found = walk(s, n, (unsigned char *)PyBytes_AS_STRING(kind), &newlines, &top);
    /* a Python 2 statement on any line, even inside a string, leaves the module to ast */
    for (Py_ssize_t k = -1; found == 0 && k < newlines.size; k++) {
        found = python2_line(s, n, k < 0 ? 0 : (Py_ssize_t)newlines.items[k] + 1);
    }
    PyObject *result = NULL;
    if (found < 0) {
        PyErr_NoMemory();
    } else if (found > 0) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *lines = as_bytes(&newlines), *starts = as_bytes(&top);
        if (lines != NULL && starts != NULL) {
            result = PyTuple_Pack(3, kind, lines, starts);
        }
        Py_XDECREF(lines);
        Py_XDECREF(starts);
    }
    Py_DECREF(kind);
    PyMem_RawFree(newlines.items);
    PyMem_RawFree(top.items);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pyscan", "The Python outline scan's byte-level pass (see pyoutline.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__pyscan(void) {
    return PyModule_Create(&module);
}
