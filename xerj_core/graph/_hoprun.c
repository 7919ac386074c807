/* The hop's inner loop in C: read a frontier's runs of packed edges in one pass, keeping the fresh, live ones.
 *
 * numpy does the same work as a dozen whole-array passes (each run's places, a gather, a mask per cut, a
 * compaction), each one touching every candidate edge again; at a million edges a 4,096-node hop both ways
 * spends most of its time in those passes rather than in the cache misses of reading the runs. This loop reads
 * each packed entry once. It only reads: every array it is given stays as it was, and what it keeps is
 * returned as two new byte buffers (the kept places as int64, their packed entries in the table's width).
 *
 * Arrays arrive through the buffer protocol, so the module needs Python's headers alone (no numpy headers at
 * build time). Offsets and packed entries are int32 or int64, as the edge table stores them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A frontier or an earlier one at most this long is matched by comparing each far end with every node; a longer
 * one gets a byte per node of the table (bit 1: this frontier, bit 2: the earlier one). */
#define FEW_NODES 8
#define IN_FRONTIER 1
#define IN_PREVIOUS 2
/* How many runs ahead the loop asks for a run's first cache line: the runs lie at random places, and a miss
 * asked for early overlaps the loop's work on the runs before it. */
#define PREFETCH_AHEAD 8

typedef struct {
    const int64_t *frontier;
    Py_ssize_t frontier_size;
    const int64_t *previous;
    Py_ssize_t previous_size;
    const uint8_t *marks; /* NULL: compare with the few nodes instead */
    int64_t width;
    int64_t low;        /* the far end's bits */
    int64_t inbit;      /* set on an in-edge of a both-ways run; 0: no edge of these runs was met already */
    int64_t alive_from; /* the least packed value of an edge still valid (0 keeps every one) */
} Screen;

static inline int listed(const int64_t *nodes, Py_ssize_t size, int64_t node) {
    for (Py_ssize_t i = 0; i < size; i++) {
        if (nodes[i] == node) {
            return 1;
        }
    }
    return 0;
}

/* Whether an edge whose packed entry is h was met before this hop reached it (0: it is fresh). */
static inline int met(const Screen *s, int64_t h) {
    int64_t far = h & s->low;
    if (s->marks != NULL) {
        if (far >= s->width) {
            return 0;
        }
        uint8_t mark = s->marks[far];
        /* an in-edge from a frontier node is that node's out-edge, met in the same run already */
        return ((h & s->inbit) && (mark & IN_FRONTIER)) || (mark & IN_PREVIOUS);
    }
    return ((h & s->inbit) && listed(s->frontier, s->frontier_size, far))
        || listed(s->previous, s->previous_size, far);
}

/* One loop per (offset width, packed width): the element types are fixed inside it, so each read is one load. */
#define RUNS_LOOP(OFF_T, HOT_T)                                                                    \
    static void runs_##OFF_T##_##HOT_T(const OFF_T *off, const HOT_T *packed, const Screen *s,     \
                                       int64_t *idx, HOT_T *hot, Py_ssize_t *kept,                 \
                                       Py_ssize_t *expired) {                                      \
        Py_ssize_t k = 0, gone = 0;                                                                \
        int check_met = s->inbit != 0 || s->previous_size > 0;                                     \
        for (Py_ssize_t i = 0; i < s->frontier_size; i++) {                                        \
            if (i + PREFETCH_AHEAD < s->frontier_size) {                                           \
                __builtin_prefetch(packed + off[s->frontier[i + PREFETCH_AHEAD]]);                 \
            }                                                                                      \
            int64_t node = s->frontier[i];                                                         \
            int64_t end = off[node + 1];                                                           \
            for (int64_t p = off[node]; p < end; p++) {                                            \
                int64_t h = packed[p];                                                             \
                if (check_met && met(s, h)) {                                                      \
                    continue;                                                                      \
                }                                                                                  \
                if (h < s->alive_from) {                                                           \
                    gone++;                                                                        \
                    continue;                                                                      \
                }                                                                                  \
                idx[k] = p;                                                                        \
                hot[k] = (HOT_T)h;                                                                 \
                k++;                                                                               \
            }                                                                                      \
        }                                                                                          \
        *kept = k;                                                                                 \
        *expired = gone;                                                                           \
    }

RUNS_LOOP(int32_t, int32_t)
RUNS_LOOP(int32_t, int64_t)
RUNS_LOOP(int64_t, int32_t)
RUNS_LOOP(int64_t, int64_t)

static int int_buffer(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    char kind = view->format != NULL ? view->format[strlen(view->format) - 1] : 'B';
    int is_signed = kind == 'i' || kind == 'l' || kind == 'q';
    if (!is_signed || (view->itemsize != 4 && view->itemsize != 8)) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous int32 or int64 array", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int64_t read_at(const Py_buffer *view, Py_ssize_t i) {
    return view->itemsize == 4 ? ((const int32_t *)view->buf)[i] : ((const int64_t *)view->buf)[i];
}

PyDoc_STRVAR(runs_doc,
"runs(off, packed, frontier, previous, low, inbit, alive_from) -> (places, entries, kept, expired)\n\n"
"The entries of each frontier node's run ``packed[off[n]:off[n + 1]]``, node after node, less those met before\n"
"(far end in ``previous``; with ``inbit`` non-zero, an in-edge whose far end is a frontier node) and those\n"
"below ``alive_from`` (counted in ``expired``). ``places`` holds the kept entries' positions as int64 bytes,\n"
"``entries`` the entries in ``packed``'s own width; ``kept`` is how many. ``frontier`` and ``previous`` are\n"
"sorted int64 node ordinals, every frontier node below ``len(off) - 1``.");

static PyObject *runs(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *off_obj, *packed_obj, *frontier_obj, *previous_obj;
    long long low, inbit, alive_from;
    if (!PyArg_ParseTuple(args, "OOOOLLL:runs", &off_obj, &packed_obj, &frontier_obj, &previous_obj, &low, &inbit,
                          &alive_from)) {
        return NULL;
    }
    Py_buffer off, packed, frontier, previous;
    if (int_buffer(off_obj, &off, "off") < 0) {
        return NULL;
    }
    if (int_buffer(packed_obj, &packed, "packed") < 0) {
        PyBuffer_Release(&off);
        return NULL;
    }
    if (int_buffer(frontier_obj, &frontier, "frontier") < 0) {
        PyBuffer_Release(&off);
        PyBuffer_Release(&packed);
        return NULL;
    }
    if (int_buffer(previous_obj, &previous, "previous") < 0) {
        PyBuffer_Release(&off);
        PyBuffer_Release(&packed);
        PyBuffer_Release(&frontier);
        return NULL;
    }
    PyObject *result = NULL, *places = NULL, *entries = NULL;
    uint8_t *marks = NULL;
    Py_ssize_t nodes = frontier.len / frontier.itemsize, before = previous.len / previous.itemsize;
    Py_ssize_t width = off.len / off.itemsize - 1, total = 0;
    if (frontier.itemsize != 8 || previous.itemsize != 8) {
        PyErr_SetString(PyExc_TypeError, "frontier and previous must be int64");
        goto done;
    }
    const int64_t *front = frontier.buf;
    const int64_t entries_count = packed.len / packed.itemsize;
    for (Py_ssize_t i = 0; i < nodes; i++) {  /* every run the loop will read, checked first: it reads unchecked */
        if (front[i] < 0 || front[i] >= width) {
            PyErr_SetString(PyExc_ValueError, "a frontier node lies outside the offsets");
            goto done;
        }
        int64_t lo = read_at(&off, front[i]), hi = read_at(&off, front[i] + 1);
        if (lo < 0 || hi < lo || hi > entries_count) {
            PyErr_SetString(PyExc_ValueError, "the offsets reach past the packed entries");
            goto done;
        }
        total += hi - lo;
    }
    Screen screen = {front, nodes, previous.buf, before, NULL, width, low, inbit, alive_from};
    if ((inbit != 0 && nodes > FEW_NODES) || before > FEW_NODES) {
        marks = PyMem_Calloc((size_t)width > 0 ? (size_t)width : 1, 1);
        if (marks == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        if (inbit != 0) {
            for (Py_ssize_t i = 0; i < nodes; i++) {
                marks[front[i]] |= IN_FRONTIER;
            }
        }
        const int64_t *prev = previous.buf;
        for (Py_ssize_t i = 0; i < before; i++) {
            if (prev[i] >= 0 && prev[i] < width) {
                marks[prev[i]] |= IN_PREVIOUS;
            }
        }
        screen.marks = marks;
    }
    places = PyByteArray_FromStringAndSize(NULL, total * 8);
    entries = PyByteArray_FromStringAndSize(NULL, total * packed.itemsize);
    if (places == NULL || entries == NULL) {
        goto done;
    }
    Py_ssize_t kept = 0, expired = 0;
    int64_t *idx = (int64_t *)PyByteArray_AS_STRING(places);
    void *hot = PyByteArray_AS_STRING(entries);
    Py_BEGIN_ALLOW_THREADS
    if (off.itemsize == 4 && packed.itemsize == 4) {
        runs_int32_t_int32_t(off.buf, packed.buf, &screen, idx, hot, &kept, &expired);
    } else if (off.itemsize == 4) {
        runs_int32_t_int64_t(off.buf, packed.buf, &screen, idx, hot, &kept, &expired);
    } else if (packed.itemsize == 4) {
        runs_int64_t_int32_t(off.buf, packed.buf, &screen, idx, hot, &kept, &expired);
    } else {
        runs_int64_t_int64_t(off.buf, packed.buf, &screen, idx, hot, &kept, &expired);
    }
    Py_END_ALLOW_THREADS
    if (PyByteArray_Resize(places, kept * 8) < 0 || PyByteArray_Resize(entries, kept * packed.itemsize) < 0) {
        goto done;
    }
    result = Py_BuildValue("OOnn", places, entries, kept, expired);
done:
    Py_XDECREF(places);
    Py_XDECREF(entries);
    PyMem_Free(marks);
    PyBuffer_Release(&off);
    PyBuffer_Release(&packed);
    PyBuffer_Release(&frontier);
    PyBuffer_Release(&previous);
    return result;
}

static PyMethodDef methods[] = {
    {"runs", runs, METH_VARARGS, runs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hoprun", "The hop's inner loop, compiled (see xerj_core.graph.hoprun).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hoprun(void) {
    return PyModule_Create(&module);
}
