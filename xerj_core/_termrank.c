/* Ranking a batch's terms in C (see termrank.py): the distinct terms in bytes order and each term's rank.
 *
 * A write groups its postings by term: it numbers every posting's term by that term's place among the batch's
 * distinct terms, so one stable integer sort groups them. In Python that is a dict of the terms, a sort of the
 * distinct ones and a dict lookup per posting: a hash and a compare of a separate bytes object each, about a
 * fifth of the writer's CPU in an autoindex of real code. Here one open-addressing table over the terms' own
 * bytes numbers them by first occurrence, the distinct ones are sorted by memcmp, and the ranks come out as an
 * int32 array. No term object is made: names reuse the caller's bytes objects (or, for terms read in place from
 * a NUL-joined buffer, are made once per distinct term).
 *
 * The same table makes a NUL-joined run of terms distinct (distinct_joined), with no object at all: sharedterm's
 * union of a file's words.
 *
 * That stable integer sort is here too (group): the ranks (and the parts a seal cuts its rows into) are dense
 * keys, so one counting sort groups the postings, where numpy's merge sort and its gathers cost the writer about
 * twice as much.
 *
 * The order is Python's for bytes: byte by byte as unsigned, a prefix before every longer term. */
#include "_buffers.h"
#include "_termtable.h"

#include <stdlib.h>

static int term_cmp(const void *a, const void *b) {
    const Term *x = (const Term *)a, *y = (const Term *)b;
    Py_ssize_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->data, y->data, (size_t)n) : 0;
    if (c) {
        return c;
    }
    return (x->len > y->len) - (x->len < y->len);
}

/* A distinct term during the sort: its bytes and its number by first occurrence. */
typedef struct {
    Term term;
    int32_t id;
} Distinct;

static int distinct_cmp(const void *a, const void *b) {
    return term_cmp(&((const Distinct *)a)->term, &((const Distinct *)b)->term);
}

/* The ``count`` sorted distinct terms end to end in one bytes object, and their bounds in it (int64, one more than
 * the terms) in a bytearray, as a pair; ``place`` gets each term's rank by its number. NULL on failure. */
static PyObject *packed_names(const Distinct *distinct, int32_t count, int32_t *place) {
    Py_ssize_t bytes = 0;
    for (int32_t k = 0; k < count; k++) {
        bytes += distinct[k].term.len;
    }
    PyObject *joined = PyBytes_FromStringAndSize(NULL, bytes);
    PyObject *bounds = PyByteArray_FromStringAndSize(NULL, 8 * ((Py_ssize_t)count + 1));
    PyObject *pair = NULL;
    if (joined != NULL && bounds != NULL) {
        char *to = PyBytes_AS_STRING(joined);
        int64_t *at = (int64_t *)PyByteArray_AS_STRING(bounds);
        at[0] = 0;
        for (int32_t k = 0; k < count; k++) {
            place[distinct[k].id] = k;
            memcpy(to + at[k], distinct[k].term.data, (size_t)distinct[k].term.len);
            at[k + 1] = at[k] + distinct[k].term.len;
        }
        pair = PyTuple_Pack(2, joined, bounds);
    }
    Py_XDECREF(joined);
    Py_XDECREF(bounds);
    return pair;
}

/* Where ranked reads its terms: an array of them, or the NUL-separated runs of a buffer read in place (one Term
 * per term of a corpus's joined words was 16 bytes a word, 88 MB at sharedterm's combine on 22k files of code). */
typedef struct {
    const Term *terms;  /* NULL: the terms are read from ``at`` on */
    const unsigned char *at, *end;
} Terms;

static Term next_term(Terms *from, Py_ssize_t i) {
    if (from->terms != NULL) {
        return from->terms[i];
    }
    const unsigned char *start = from->at, *stop = memchr(start, 0, (size_t)(from->end - start));
    if (stop == NULL) {
        stop = from->end;
    }
    from->at = stop + 1;
    return (Term){start, stop - start};
}

/* The table's slots for a ranking of ``n`` terms at first: few, since most rankings meet far fewer distinct terms
 * than terms (a table for every term being distinct was 4 to 8 bytes a term); it doubles as they come. */
static size_t first_slots(Py_ssize_t n) {
    return term_slots(n < (1 << 16) ? n : (1 << 16));
}

/* The names and ranks of ``n`` terms read from ``from``: ``list`` holds them as bytes objects (names reuse those),
 * or is NULL and names are made from the terms' bytes; with ``packed``, the names are instead one bytes object of
 * them end to end and an int64 bytearray of their bounds in it (no object per term: sharedterm ranks a corpus's
 * million distinct words to keep a few of them, and their freed objects left the heap scattered). */
static PyObject *ranked(Terms from, Py_ssize_t n, PyObject *list, int packed) {
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "fewer than 2**31 terms can be ranked at once");
        return NULL;
    }
    PyObject *ranks = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (ranks == NULL) {
        return NULL;
    }
    int32_t *out = (int32_t *)PyByteArray_AS_STRING(ranks);
    size_t slots = first_slots(n);
    int32_t *table = calloc(slots, sizeof(int32_t));
    /* room for every term being distinct: pages past the distinct ones are never touched, so never resident */
    Distinct *distinct = malloc((size_t)(n ? n : 1) * sizeof(Distinct));
    Py_ssize_t *first = list != NULL ? malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t)) : NULL; /* each one's item */
    int32_t *place = NULL;
    PyObject *names = NULL;
    if (table == NULL || distinct == NULL || (list != NULL && first == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int added;
        Term term = next_term(&from, i);
        int32_t k = term_number(table, slots, distinct, sizeof(Distinct), &count, term.data, term.len, &added);
        if (added) {
            distinct[k].term = term;
            distinct[k].id = k;
            if (first != NULL) {
                first[k] = i;
            }
            if ((size_t)count * 2 > slots && term_table_grow(&table, &slots, distinct, sizeof(Distinct), count)) {
                PyErr_NoMemory();
                goto done;
            }
        }
        out[i] = k;
    }
    free(table);
    table = NULL;
    qsort(distinct, (size_t)count, sizeof(Distinct), distinct_cmp);
    place = malloc((size_t)(count ? count : 1) * sizeof(int32_t));
    if (place == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (packed) {
        names = packed_names(distinct, count, place);
        goto remap;
    }
    names = PyList_New(count);
    if (names == NULL) {
        goto done;
    }
    for (int32_t k = 0; k < count; k++) {
        place[distinct[k].id] = k;
        PyObject *name;
        if (list != NULL) {
            name = PyList_GET_ITEM(list, first[distinct[k].id]);
            Py_INCREF(name);
        } else {
            name = PyBytes_FromStringAndSize((const char *)distinct[k].term.data, distinct[k].term.len);
            if (name == NULL) {
                Py_CLEAR(names);
                goto done;
            }
        }
        PyList_SET_ITEM(names, k, name);
    }
remap:
    if (names != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = place[out[i]];
        }
    }
done:
    free(table);
    free(distinct);
    free(first);
    free(place);
    if (names == NULL) {
        Py_DECREF(ranks);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, names, ranks);
    Py_DECREF(names);
    Py_DECREF(ranks);
    return result;
}

static const char rank_doc[] =
    "rank(terms: list[bytes]) -> (names: list[bytes], ranks: bytearray)\n\n"
    "The distinct terms of ``terms`` sorted as bytes sort (the list's own objects, each distinct term's first), "
    "and each term's place among them as native int32 values, in the list's order.";

static PyObject *rank(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyList_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "rank() takes a list of bytes");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(arg);
    Term *terms = malloc((size_t)(n ? n : 1) * sizeof(Term));
    if (terms == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(arg, i);
        if (!PyBytes_CheckExact(item)) {
            free(terms);
            PyErr_SetString(PyExc_TypeError, "rank() takes a list of bytes");
            return NULL;
        }
        terms[i].data = (const unsigned char *)PyBytes_AS_STRING(item);
        terms[i].len = PyBytes_GET_SIZE(item);
    }
    PyObject *result = ranked((Terms){terms, NULL, NULL}, n, arg, 0);
    free(terms);
    return result;
}

static const char rank_joined_doc[] =
    "rank_joined(joined: bytes, packed: bool = False) -> (names: list[bytes], ranks: bytearray)\n\n"
    "rank(joined.split(b'\\0')) without the list: the terms are the NUL-separated runs of ``joined`` (an empty "
    "``joined`` holds one empty term, as its split does). With ``packed``, names is ``(bytes, bounds)``: the "
    "distinct terms end to end, and their bounds in it as native int64 values.";

/* The NUL-separated terms of ``s[0:size]`` (an empty buffer holds one empty term, as its split does), in a new
 * array of ``*n``; NULL, with MemoryError set, when it cannot be made. */
static Term *split_joined(const unsigned char *s, Py_ssize_t size, Py_ssize_t *n) {
    const unsigned char *end = s + size;
    *n = 1;
    for (const unsigned char *p = s; (p = memchr(p, 0, (size_t)(end - p))) != NULL; p++) {
        ++*n;
    }
    Term *terms = malloc((size_t)*n * sizeof(Term));
    if (terms == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    const unsigned char *at = s;
    for (Py_ssize_t i = 0; i < *n; i++) {
        const unsigned char *stop = memchr(at, 0, (size_t)(end - at));
        if (stop == NULL) {
            stop = end;
        }
        terms[i].data = at;
        terms[i].len = stop - at;
        at = stop + 1;
    }
    return terms;
}

static PyObject *rank_joined(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *joined;
    int packed = 0;
    if (!PyArg_ParseTuple(args, "O|p:rank_joined", &joined, &packed)) {
        return NULL;
    }
    if (!PyBytes_CheckExact(joined)) {
        PyErr_SetString(PyExc_TypeError, "rank_joined() takes bytes");
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(joined), *end = s + PyBytes_GET_SIZE(joined);
    Py_ssize_t n = 1;  /* an empty buffer holds one empty term, as its split does */
    for (const unsigned char *p = s; (p = memchr(p, 0, (size_t)(end - p))) != NULL; p++) {
        n++;
    }
    return ranked((Terms){NULL, s, end}, n, NULL, packed);
}

static const char distinct_joined_doc[] =
    "distinct_joined(joined: bytes, shortest: int, longest: int) -> bytes\n\n"
    "The NUL-separated terms of ``joined`` of ``shortest`` to ``longest`` bytes, each once, in order of first "
    "appearance, joined by NULs: ``b'\\0'.join(dict.fromkeys(t for t in joined.split(b'\\0') if shortest <= "
    "len(t) <= longest))`` without an object per term.";

static PyObject *distinct_joined(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *source;
    Py_ssize_t shortest, longest, n;
    if (!PyArg_ParseTuple(args, "Snn:distinct_joined", &source, &shortest, &longest)) {
        return NULL;
    }
    Term *terms = split_joined((const unsigned char *)PyBytes_AS_STRING(source), PyBytes_GET_SIZE(source), &n);
    if (terms == NULL) {
        return NULL;
    }
    if (n >= INT32_MAX) {  /* the table numbers terms as int32 */
        free(terms);
        PyErr_SetString(PyExc_OverflowError, "fewer than 2**31 terms can be made distinct at once");
        return NULL;
    }
    PyObject *result = NULL;
    size_t slots = term_slots(n);
    int32_t *table = calloc(slots, sizeof(int32_t));
    int32_t count = 0;
    Py_ssize_t bytes = 0;
    if (table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* each kept term is moved to the front of ``terms`` when first met (the k-th kept is never behind the i-th
     * read), where the table finds it */
    for (Py_ssize_t i = 0; i < n; i++) {
        Term term = terms[i];
        if (term.len < shortest || term.len > longest) {
            continue;
        }
        int added;
        int32_t k = term_number(table, slots, terms, sizeof(Term), &count, term.data, term.len, &added);
        if (added) {
            terms[k] = term;
            bytes += term.len;
        }
    }
    result = PyBytes_FromStringAndSize(NULL, count ? bytes + count - 1 : 0);
    if (result != NULL) {
        char *out = PyBytes_AS_STRING(result);
        for (int32_t k = 0; k < count; k++) {
            if (k) {
                *out++ = '\0';
            }
            memcpy(out, terms[k].data, (size_t)terms[k].len);
            out += terms[k].len;
        }
    }
done:
    free(table);
    free(terms);
    return result;
}

/* The grouping's first pass, the GIL released: each posting's key (part * names + rank; with one part the rank is
 * the key, and ``key`` is not written) and each key's count in ``at[key + 1]``. Returns the number of groups, or -2
 * (a rank or row outside what the keys can hold). Keys are int32: the caller keeps parts * names below 2**31. */
static Py_ssize_t count_keys(const int32_t *ids, const int32_t *rows, Py_ssize_t n, const int64_t *starts,
                             Py_ssize_t parts, Py_ssize_t names, int32_t *key, Py_ssize_t *at) {
    Py_ssize_t part = 0, groups = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= names || rows[i] < starts[0]) {
            return -2;
        }
        int32_t k = ids[i];
        if (parts > 1) {
            /* the part whose first row is the last one at or below the row (runs are mostly in row order, so
             * the part of the posting before is tried first) */
            if (!(starts[part] <= rows[i] && (part + 1 == parts || rows[i] < starts[part + 1]))) {
                Py_ssize_t lo = 0, hi = parts;
                while (hi - lo > 1) {
                    Py_ssize_t mid = (lo + hi) / 2;
                    if (starts[mid] <= rows[i]) {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                part = lo;
            }
            k = (int32_t)(part * names + k);
            key[i] = k;
        }
        groups += at[k + 1]++ == 0;
    }
    return groups;
}

/* The second pass, the GIL released: a counting sort of the postings by key, stable, so each run's rows stay
 * ascending within a group; each group's key and bounds. ``key`` is ``ids`` when there is one part; ``tfs`` and
 * ``out_tfs`` are NULL when rows are grouped alone. */
static void fill_groups(const int32_t *key, const int32_t *rows, const float *tfs, Py_ssize_t n, Py_ssize_t keys,
                        Py_ssize_t *at, int32_t *out_rows, float *out_tfs, int64_t *group_key, int64_t *bounds) {
    Py_ssize_t groups = 0;
    for (Py_ssize_t k = 0; k < keys; k++) {
        if (at[k + 1]) {
            group_key[groups] = k;
            bounds[++groups] = (int64_t)(at[k] + at[k + 1]);
        }
        at[k + 1] += at[k];
    }
    bounds[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t to = at[key[i]]++;
        out_rows[to] = rows[i];
        if (tfs != NULL) {
            out_tfs[to] = tfs[i];
        }
    }
}

PyDoc_STRVAR(group_doc,
"group(ids, rows, tfs, starts, names) -> (keys, rows, tfs, bounds) or None\n\n"
"``tfs`` may be None (rows grouped alone): the answer's tfs is None then.\n"
"Postings grouped by (part, term): ``ids`` each posting's term rank (int32, below ``names``), ``rows`` (int32)\n"
"and ``tfs`` (float32) the postings, ``starts`` the parts' first rows (int64, ascending; a posting is in the\n"
"last part starting at or below its row). Returns each group's key (part * names + rank, ascending, an int64\n"
"bytearray), the rows and frequencies in group order (a stable sort: postings of a group keep their order) and\n"
"the groups' bounds in them (int64, one more than the groups); None when a rank or a row is outside what\n"
"the keys can hold, for the caller's general path. The GIL is released meanwhile. Besides its answer it holds\n"
"a count per key and, with more than one part, a key per posting (int32): a merge of big segments groups\n"
"millions of postings, and each 8-byte array of one entry per posting was tens of megabytes at its peak.");

static PyObject *group(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *ids_obj, *rows_obj, *tfs_obj, *starts_obj;
    Py_ssize_t names;
    if (!PyArg_ParseTuple(args, "OOOOn:group", &ids_obj, &rows_obj, &tfs_obj, &starts_obj, &names)) {
        return NULL;
    }
    /* tfs last: it may be None (a caller grouping rows alone), and then no view of it is taken */
    Py_buffer views[4];
    int got = 0, with_tfs = tfs_obj != Py_None;
    if (get_items(ids_obj, &views[0], 4, "ids") == 0 && ++got
            && get_items(rows_obj, &views[1], 4, "rows") == 0 && ++got
            && get_items(starts_obj, &views[2], 8, "starts") == 0 && ++got
            && with_tfs && get_items(tfs_obj, &views[3], 4, "tfs") == 0) {
        got++;
    }
    PyObject *result = NULL;
    PyObject *keys = NULL, *out_rows = NULL, *out_tfs = NULL, *bounds = NULL;
    Py_ssize_t *at = NULL;
    int32_t *key = NULL;
    if (got == 3 + with_tfs) {
        Py_ssize_t n = views[0].len / 4, parts = views[2].len / 8;
        if (views[1].len != 4 * n || (with_tfs && views[3].len != 4 * n) || parts < 1 || names < 1
                || parts > PY_SSIZE_T_MAX / 16 / names) {
            PyErr_SetString(PyExc_ValueError, "ids, rows and tfs need one entry per posting, starts and names one "
                                              "or more");
            goto done;
        }
        if (parts * names > INT32_MAX) {
            result = Py_NewRef(Py_None);  /* keys past int32: the caller's general path */
            goto done;
        }
        at = PyMem_RawCalloc((size_t)(parts * names) + 1, sizeof(Py_ssize_t));
        key = parts > 1 ? PyMem_RawMalloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1)) : NULL;
        if (at == NULL || (parts > 1 && key == NULL)) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t groups;
        Py_BEGIN_ALLOW_THREADS
        groups = count_keys(views[0].buf, views[1].buf, n, views[2].buf, parts, names, key, at);
        Py_END_ALLOW_THREADS
        if (groups == -2) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        /* bytearrays of their final sizes: numpy views of them are writable, as the arrays of the general path
         * are */
        keys = PyByteArray_FromStringAndSize(NULL, 8 * groups);
        out_rows = PyByteArray_FromStringAndSize(NULL, 4 * n);
        out_tfs = with_tfs ? PyByteArray_FromStringAndSize(NULL, 4 * n) : Py_NewRef(Py_None);
        bounds = PyByteArray_FromStringAndSize(NULL, 8 * (groups + 1));
        if (keys == NULL || out_rows == NULL || out_tfs == NULL || bounds == NULL) {
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        fill_groups(parts > 1 ? key : views[0].buf, views[1].buf, with_tfs ? views[3].buf : NULL, n, parts * names,
                    at, (int32_t *)PyByteArray_AS_STRING(out_rows),
                    with_tfs ? (float *)PyByteArray_AS_STRING(out_tfs) : NULL, (int64_t *)PyByteArray_AS_STRING(keys),
                    (int64_t *)PyByteArray_AS_STRING(bounds));
        Py_END_ALLOW_THREADS
        result = PyTuple_Pack(4, keys, out_rows, out_tfs, bounds);
    }
done:
    PyMem_RawFree(at);
    PyMem_RawFree(key);
    Py_XDECREF(keys);
    Py_XDECREF(out_rows);
    Py_XDECREF(out_tfs);
    Py_XDECREF(bounds);
    while (got-- > 0) {
        PyBuffer_Release(&views[got]);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"rank", rank, METH_O, rank_doc},
    {"rank_joined", rank_joined, METH_VARARGS, rank_joined_doc},
    {"distinct_joined", distinct_joined, METH_VARARGS, distinct_joined_doc},
    {"group", group, METH_VARARGS, group_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_termrank", "Terms ranked and made distinct in C (see termrank.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__termrank(void) {
    return PyModule_Create(&module);
}
