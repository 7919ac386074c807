/* A seal's bucket layout in C: one segment's postings of one field packed into hash buckets (see postpack.py).
 *
 * postpack.pack lays the buckets out with numpy: a crc32 per term, a stable sort by bucket, then a dozen scatters
 * into one buffer, cut into a value per bucket. A seal of a thousand rows calls it with about a thousand terms,
 * where each numpy call's own cost outweighs its work; this loop does the same in one pass per term and writes
 * each bucket's bytes straight into its own bytes object. The bytes are identical to the numpy layout's (the
 * tests compare them), native byte order as numpy writes them.
 *
 * Arrays arrive through the buffer protocol, so the module needs Python's headers alone. */
#include "../_buffers.h"

#include <stdint.h>
#include <string.h>

static uint32_t crc_table[256];

/* zlib's crc32 (the reflected IEEE polynomial), which postpack.bucket_of uses to find a term's bucket. */
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int bit = 0; bit < 8; bit++) {
            c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        }
        crc_table[i] = c;
    }
}

static uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++) {
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

static inline Py_ssize_t pad4(Py_ssize_t size) {
    return (size + 3) & ~(Py_ssize_t)3;
}

typedef struct {
    const unsigned char **term;  /* each term's first byte */
    Py_ssize_t *length;
    const int64_t *bounds;
    const void *rows;  /* int32 or int64 (row_size bytes each): a merge's grouped rows come as int32 */
    Py_ssize_t row_size;
    const float *tfs;
    Py_ssize_t n, own_above;
} Terms;

static inline uint32_t row_at(const Terms *t, Py_ssize_t p) {
    return t->row_size == 4 ? (uint32_t)((const int32_t *)t->rows)[p] : (uint32_t)((const int64_t *)t->rows)[p];
}

static Py_ssize_t listed_count(const Terms *t, Py_ssize_t k) {
    Py_ssize_t count = (Py_ssize_t)(t->bounds[k + 1] - t->bounds[k]);
    return count > t->own_above ? 0 : count;  /* a large term is listed with no postings: its own key holds them */
}

/* The bucket of terms order[lo:hi] (all hashed to it) as one value. */
static PyObject *bucket_value(const Terms *t, const Py_ssize_t *order, Py_ssize_t lo, Py_ssize_t hi) {
    Py_ssize_t per_n = hi - lo, per_total = 0, per_bytes = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        per_total += listed_count(t, order[i]);
        per_bytes += t->length[order[i]];
    }
    Py_ssize_t size = 8 + pad4(2 * per_n) + pad4(per_bytes) + 4 * per_n + 8 * per_total;
    PyObject *value = PyBytes_FromStringAndSize(NULL, size);
    if (value == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(value);
    memset(out, 0, (size_t)size);
    uint32_t header[2] = {(uint32_t)per_n, (uint32_t)per_total};
    memcpy(out, header, sizeof header);
    char *lengths = out + 8, *bytes = lengths + pad4(2 * per_n);
    char *counts = bytes + pad4(per_bytes), *rows = counts + 4 * per_n, *tfs = rows + 4 * per_total;
    for (Py_ssize_t i = lo; i < hi; i++) {
        Py_ssize_t k = order[i], listed = listed_count(t, k);
        uint16_t length = (uint16_t)t->length[k];
        uint32_t count = (uint32_t)listed;
        memcpy(lengths, &length, 2);
        lengths += 2;
        memcpy(bytes, t->term[k], (size_t)t->length[k]);
        bytes += t->length[k];
        memcpy(counts, &count, 4);
        counts += 4;
        for (Py_ssize_t p = (Py_ssize_t)t->bounds[k]; p < (Py_ssize_t)t->bounds[k] + listed; p++) {
            uint32_t row = row_at(t, p);
            memcpy(rows, &row, 4);
            rows += 4;
            memcpy(tfs, &t->tfs[p], 4);
            tfs += 4;
        }
    }
    return value;
}

/* The buckets of every term, laid out; NULL with an exception set on failure. */
static PyObject *pack_terms(Terms *t, Py_ssize_t bucket_bytes) {
    Py_ssize_t n = t->n, total_bytes = 0, total_listed = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (t->length[k] > 0xFFFF) {
            PyErr_SetString(PyExc_ValueError, "a term of a bucket must be shorter than 65,536 bytes");
            return NULL;
        }
        if (t->bounds[k + 1] < t->bounds[k]) {
            PyErr_SetString(PyExc_ValueError, "bounds must not decrease");
            return NULL;
        }
        total_bytes += t->length[k];
        total_listed += listed_count(t, k);
    }
    Py_ssize_t buckets = (total_bytes + 6 * n + 8 * total_listed + bucket_bytes - 1) / bucket_bytes;
    if (buckets < 1) {
        buckets = 1;
    }
    uint32_t *which = PyMem_Malloc(sizeof(uint32_t) * (size_t)(n > 0 ? n : 1));
    Py_ssize_t *first = PyMem_Calloc((size_t)buckets + 1, sizeof(Py_ssize_t));
    Py_ssize_t *order = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n > 0 ? n : 1));
    PyObject *suffixes = PyList_New(0), *values = PyList_New(0), *result = NULL;
    if (which == NULL || first == NULL || order == NULL || suffixes == NULL || values == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* A counting sort by bucket, stable: within a bucket the terms keep the caller's order, as numpy's does. */
    for (Py_ssize_t k = 0; k < n; k++) {
        which[k] = (uint32_t)(crc32_of(t->term[k], t->length[k]) % (uint32_t)buckets);
        first[which[k] + 1]++;
    }
    for (Py_ssize_t b = 0; b < buckets; b++) {
        first[b + 1] += first[b];
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        order[first[which[k]]++] = k;
    }
    /* first[b] is now bucket b's end, its start the previous bucket's end */
    for (Py_ssize_t b = 0, lo = 0; b < buckets; lo = first[b], b++) {
        if (first[b] == lo) {
            continue;
        }
        unsigned char key[5] = {0, (unsigned char)(b >> 24), (unsigned char)(b >> 16), (unsigned char)(b >> 8),
                                (unsigned char)b};
        PyObject *suffix = PyBytes_FromStringAndSize((const char *)key, 5);
        PyObject *value = suffix != NULL ? bucket_value(t, order, lo, first[b]) : NULL;
        int failed = value == NULL || PyList_Append(suffixes, suffix) < 0 || PyList_Append(values, value) < 0;
        Py_XDECREF(suffix);
        Py_XDECREF(value);
        if (failed) {
            goto done;
        }
    }
    result = Py_BuildValue("nOO", buckets, suffixes, values);
done:
    PyMem_Free(which);
    PyMem_Free(first);
    PyMem_Free(order);
    Py_XDECREF(suffixes);
    Py_XDECREF(values);
    return result;
}

PyDoc_STRVAR(pack_doc,
"pack(terms, width, bounds, rows, tfs, own_above, bucket_bytes) -> (buckets, suffixes, values)\n\n"
"The bucket part of ``postpack.pack``: term ``k``'s postings are ``rows[bounds[k]:bounds[k+1]]`` (int64 or\n"
"int32) and their ``tfs`` (float32); ``bounds`` is int64, one more than the terms. ``terms`` is a list of bytes\n"
"(``width`` 0) or a buffer of fixed-width terms of ``width`` bytes each, NUL padded. A term with more than\n"
"``own_above`` postings is listed with none. Returns the bucket count, and each used bucket's key suffix and\n"
"value, buckets ascending; the terms of their own keys are left to the caller.");

static PyObject *pack(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *terms_obj, *bounds_obj, *rows_obj, *tfs_obj;
    Py_ssize_t width, own_above, bucket_bytes;
    if (!PyArg_ParseTuple(args, "OnOOOnn:pack", &terms_obj, &width, &bounds_obj, &rows_obj, &tfs_obj, &own_above,
                          &bucket_bytes)) {
        return NULL;
    }
    if (bucket_bytes < 1 || width < 0) {
        PyErr_SetString(PyExc_ValueError, "bucket_bytes must be positive and width not negative");
        return NULL;
    }
    Py_buffer bounds, rows, tfs, fixed = {0};
    if (get_items(bounds_obj, &bounds, 8, "bounds") < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&bounds);
        return NULL;
    }
    if ((rows.itemsize != 4 && rows.itemsize != 8) || rows.len % rows.itemsize) {
        PyErr_SetString(PyExc_TypeError, "rows must be a contiguous array of 4- or 8-byte items");
        PyBuffer_Release(&bounds);
        PyBuffer_Release(&rows);
        return NULL;
    }
    if (get_items(tfs_obj, &tfs, 4, "tfs") < 0) {
        PyBuffer_Release(&bounds);
        PyBuffer_Release(&rows);
        return NULL;
    }
    PyObject *result = NULL;
    Terms t = {NULL, NULL, bounds.buf, rows.buf, rows.itemsize, tfs.buf, bounds.len / 8 - 1, own_above};
    if (t.n < 0) {
        PyErr_SetString(PyExc_ValueError, "bounds must hold one more entry than the terms");
        goto release;
    }
    if (width > 0) {
        if (PyObject_GetBuffer(terms_obj, &fixed, PyBUF_C_CONTIGUOUS) < 0) {
            goto release;
        }
        if (fixed.len != t.n * width) {
            PyErr_Format(PyExc_ValueError, "terms hold %zd bytes, not %zd terms of %zd", fixed.len, t.n, width);
            goto release;
        }
    } else if (!PyList_Check(terms_obj) || PyList_GET_SIZE(terms_obj) != t.n) {
        PyErr_SetString(PyExc_TypeError, "terms must be a list of bytes, one per term, when width is 0");
        goto release;
    }
    int64_t postings = t.n ? t.bounds[t.n] : 0;
    if (t.n && (t.bounds[0] < 0 || postings > rows.len / rows.itemsize || postings > tfs.len / 4)) {
        PyErr_SetString(PyExc_ValueError, "bounds point outside rows or tfs");
        goto release;
    }
    t.term = PyMem_Malloc(sizeof(*t.term) * (size_t)(t.n > 0 ? t.n : 1));
    t.length = PyMem_Malloc(sizeof(*t.length) * (size_t)(t.n > 0 ? t.n : 1));
    if (t.term == NULL || t.length == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    for (Py_ssize_t k = 0; k < t.n; k++) {
        if (width > 0) {
            const unsigned char *at = (const unsigned char *)fixed.buf + k * width;
            const unsigned char *nul = memchr(at, 0, (size_t)width);
            t.term[k] = at;
            t.length[k] = nul != NULL ? nul - at : width;
        } else {
            PyObject *term = PyList_GET_ITEM(terms_obj, k);
            if (!PyBytes_Check(term)) {
                PyErr_SetString(PyExc_TypeError, "terms must be bytes");
                goto release;
            }
            t.term[k] = (const unsigned char *)PyBytes_AS_STRING(term);
            t.length[k] = PyBytes_GET_SIZE(term);
        }
    }
    /* the list's bytes stay referenced by the list, which the caller holds for the call */
    result = pack_terms(&t, bucket_bytes);
release:
    PyMem_Free(t.term);
    PyMem_Free(t.length);
    if (fixed.obj != NULL) {
        PyBuffer_Release(&fixed);
    }
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&tfs);
    return result;
}

static PyMethodDef methods[] = {
    {"pack", pack, METH_VARARGS, pack_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_postpack", "A seal's bucket layout (see xerj_core.store.postpack).", -1, methods,
};

PyMODINIT_FUNC PyInit__postpack(void) {
    crc_init();
    return PyModule_Create(&module);
}
