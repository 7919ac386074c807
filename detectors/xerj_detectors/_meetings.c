/* sharedterm's candidate search in C: which files each file scores, counted sparsely (see sharedterm._meetings).
 *
 * numpy counts a block of files against every file in dense files x files matrices, so combine grew with the
 * square of the corpus however short the posting lists were: 1.0 s on 10k generated notes, 11 s on 40k. Here
 * each file's counts go into two arrays of one counter per file, and only the files its posting lists name are
 * touched, read and reset: the work is the lists' total length. The answers are numpy's, entry for entry.
 *
 * Arrays arrive through the buffer protocol (no numpy headers at build time); nothing given is written. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "_buffers.h" /* xerj_core's, on the include path (setup.py) */

typedef struct {
    const int32_t *holders;     /* every file holding each seeding term, grouped by term */
    const int64_t *starts;      /* where each term's holders start (width + 1) */
    const int32_t *sig_holders; /* every file holding each term in its signature, grouped by term */
    const int64_t *sig_starts;  /* (width + 1) */
    const int32_t *terms;       /* each file's distinctive terms, sorted, laid end to end */
    const int64_t *term_starts; /* (total + 1) */
    const int64_t *sig_ends;    /* where each file's signature ends (total) */
    Py_ssize_t total, width;
    int64_t min_families, per_file, signature_terms;
} Lists;

/* Fills scorers/scored (room for total * per_file each) and returns how many pairs it listed; *meeting gets the
 * number of unordered pairs that meet on min_families signature terms from either end. -1: out of memory. */
static Py_ssize_t score_all(const Lists *l, int64_t *scorers, int64_t *scored, int64_t *meeting) {
    /* a count is at most signature_terms (at most 255, checked before the loops): a byte per file keeps both
     * arrays in the processor's nearest caches on corpora of tens of thousands of files */
    uint8_t *hits = calloc(l->total ? l->total : 1, 1);
    uint8_t *met = calloc(l->total ? l->total : 1, 1);
    /* one slot more than files: the slot a file already listed is written to and not kept */
    int32_t *touched = malloc((l->total + 1) * sizeof(int32_t));
    int32_t *met_touched = malloc((l->total + 1) * sizeof(int32_t));
    int64_t *keys = malloc((l->total ? l->total : 1) * sizeof(int64_t));
    Py_ssize_t listed = -1;
    if (hits == NULL || met == NULL || touched == NULL || met_touched == NULL || keys == NULL) {
        goto done;
    }
    listed = 0;
    int64_t strong_pairs = 0, mutual = 0;
    for (Py_ssize_t i = 0; i < l->total; i++) {
        Py_ssize_t found = 0, met_found = 0;
        /* hits[j]: how many of file i's signature terms file j holds */
        for (int64_t p = l->term_starts[i]; p < l->sig_ends[i]; p++) {
            int32_t t = l->terms[p];
            for (int64_t q = l->starts[t]; q < l->starts[t + 1]; q++) {
                int32_t j = l->holders[q];
                /* kept only if j was not met before: no branch to mispredict (and never past the last slot,
                 * whatever the lists hold) */
                touched[found] = j;
                found += (hits[j]++ == 0) & (found < l->total);
            }
        }
        /* met[j]: how many of file j's signature terms file i holds (file j's hits on file i) */
        for (int64_t p = l->term_starts[i]; p < l->term_starts[i + 1]; p++) {
            int32_t t = l->terms[p];
            for (int64_t q = l->sig_starts[t]; q < l->sig_starts[t + 1]; q++) {
                int32_t j = l->sig_holders[q];
                met_touched[met_found] = j;
                met_found += (met[j]++ == 0) & (met_found < l->total);
            }
        }
        /* one pass over the files met: each one's count read and reset, the pairs counted, the candidates keyed
         * (most hits first, then file order) */
        Py_ssize_t candidates = 0;
        for (Py_ssize_t k = 0; k < found; k++) {
            int32_t j = touched[k];
            int64_t h = hits[j];
            hits[j] = 0;
            if (j == i || h < l->min_families) {
                continue; /* a file does not meet itself */
            }
            strong_pairs++;
            mutual += met[j] >= l->min_families;
            keys[candidates++] = (l->signature_terms - h) * (int64_t)l->total + j;
        }
        /* the files scored: the per_file least keys, in order (numpy lists those meeting on more than min_families
         * terms when per_file of them do, else all: its first per_file are these either way), kept sorted by
         * insertion in the caller's room (a file's candidates are hundreds, its scored files a few) */
        int64_t *best = scored + listed;
        Py_ssize_t taken = 0;
        for (Py_ssize_t k = 0; k < candidates; k++) {
            int64_t key = keys[k];
            if (taken == l->per_file && key >= best[taken - 1]) {
                continue;
            }
            Py_ssize_t at = taken < l->per_file ? taken++ : taken - 1;
            for (; at > 0 && best[at - 1] > key; at--) {
                best[at] = best[at - 1];
            }
            best[at] = key;
        }
        for (Py_ssize_t k = 0; k < taken; k++) {
            scorers[listed] = i;
            scored[listed++] = best[k] % l->total;
        }
        for (Py_ssize_t k = 0; k < met_found; k++) {
            met[met_touched[k]] = 0;
        }
    }
    *meeting = strong_pairs - mutual / 2;
done:
    free(hits);
    free(met);
    free(touched);
    free(met_touched);
    free(keys);
    return listed;
}

PyDoc_STRVAR(meetings_doc,
             "meetings(holders, starts, sig_holders, sig_starts, terms, term_starts, sig_ends, min_families, "
             "per_file, signature_terms)\n--\n\n"
             "Each scoring file and the file it scores (int64 bytes, file order, most hits first within a file) "
             "and how many unordered pairs meet on min_families signature terms from either end: "
             "sharedterm._meetings, counted sparsely. holders, sig_holders and terms are int32; the rest int64.");

static PyObject *meetings(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *objs[7];
    Lists l;
    if (!PyArg_ParseTuple(args, "OOOOOOOLLL:meetings", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &l.min_families, &l.per_file, &l.signature_terms)) {
        return NULL;
    }
    static const Py_ssize_t sizes[7] = {4, 8, 4, 8, 4, 8, 8};
    static const char *names[7] = {"holders", "starts", "sig_holders", "sig_starts", "terms", "term_starts",
                                   "sig_ends"};
    Py_buffer views[7];
    int got = 0;
    while (got < 7 && get_items(objs[got], &views[got], sizes[got], names[got]) == 0) {
        got++;
    }
    PyObject *result = NULL;
    if (got < 7) {
        goto release;
    }
    l.holders = views[0].buf;
    l.starts = views[1].buf;
    l.sig_holders = views[2].buf;
    l.sig_starts = views[3].buf;
    l.terms = views[4].buf;
    l.term_starts = views[5].buf;
    l.sig_ends = views[6].buf;
    l.width = views[1].len / 8 - 1;
    l.total = views[5].len / 8 - 1;
    if (l.width < 0 || l.total < 0 || views[3].len != views[1].len || views[6].len != 8 * l.total
            || l.total > INT32_MAX || l.per_file < 0 || l.signature_terms < 0 || l.signature_terms > 255
            || l.min_families < 0 || l.total > PY_SSIZE_T_MAX / 8 / (l.per_file + 1)) {
        PyErr_SetString(PyExc_ValueError, "starts and sig_starts need one entry per term and one more, sig_ends "
                                          "one per file, term_starts one more");
        goto release;
    }
    /* every index the loops follow is checked once here, so a bad array is an error rather than a wild read */
    Py_ssize_t n_holders = views[0].len / 4, n_sig = views[2].len / 4, n_terms = views[4].len / 4;
    int bad = l.starts[0] < 0 || l.sig_starts[0] < 0 || l.term_starts[0] < 0
        || l.starts[l.width] > n_holders || l.sig_starts[l.width] > n_sig || l.term_starts[l.total] > n_terms;
    for (Py_ssize_t t = 0; !bad && t < l.width; t++) {
        bad = l.starts[t] > l.starts[t + 1] || l.sig_starts[t] > l.sig_starts[t + 1];
    }
    for (Py_ssize_t i = 0; !bad && i < l.total; i++) {
        bad = l.term_starts[i] > l.term_starts[i + 1] || l.sig_ends[i] < l.term_starts[i]
            || l.sig_ends[i] > l.term_starts[i + 1] || l.sig_ends[i] - l.term_starts[i] > l.signature_terms;
    }
    for (Py_ssize_t p = 0; !bad && p < l.term_starts[l.total]; p++) {
        bad = l.terms[p] < 0 || l.terms[p] >= l.width;
    }
    for (Py_ssize_t q = 0; !bad && q < l.starts[l.width]; q++) {
        bad = l.holders[q] < 0 || l.holders[q] >= l.total;
    }
    for (Py_ssize_t q = 0; !bad && q < l.sig_starts[l.width]; q++) {
        bad = l.sig_holders[q] < 0 || l.sig_holders[q] >= l.total;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "an offset or a number is out of its array's range");
        goto release;
    }
    Py_ssize_t room = l.total * l.per_file;
    PyObject *scorers = PyByteArray_FromStringAndSize(NULL, 8 * (room > 0 ? room : 1));
    PyObject *scored = PyByteArray_FromStringAndSize(NULL, 8 * (room > 0 ? room : 1));
    if (scorers != NULL && scored != NULL) {
        Py_ssize_t listed;
        int64_t meeting = 0;
        Py_BEGIN_ALLOW_THREADS
        listed = score_all(&l, (int64_t *)PyByteArray_AS_STRING(scorers), (int64_t *)PyByteArray_AS_STRING(scored),
                           &meeting);
        Py_END_ALLOW_THREADS
        if (listed < 0) {
            PyErr_NoMemory();
        } else if (PyByteArray_Resize(scorers, 8 * listed) == 0 && PyByteArray_Resize(scored, 8 * listed) == 0) {
            result = Py_BuildValue("OOL", scorers, scored, (long long)meeting);
        }
    }
    Py_XDECREF(scorers);
    Py_XDECREF(scored);
release:
    while (got-- > 0) {
        PyBuffer_Release(&views[got]);
    }
    return result;
}

/* The terms two sorted runs share, in order, written to out; returns how many. A run many times longer than
 * the other is searched (each probe gallops from the last place found) rather than walked. */
static Py_ssize_t intersect(const int32_t *a, Py_ssize_t na, const int32_t *b, Py_ssize_t nb, int32_t *out) {
    if (na > nb) {
        const int32_t *swap = a;
        a = b;
        b = swap;
        Py_ssize_t n = na;
        na = nb;
        nb = n;
    }
    Py_ssize_t shared = 0;
    if (nb > 16 * na) {
        Py_ssize_t lo = 0;
        for (Py_ssize_t x = 0; x < na && lo < nb; x++) {
            int32_t want = a[x];
            Py_ssize_t step = 1, hi = lo;
            while (hi < nb && b[hi] < want) {
                lo = hi + 1;
                hi += step;
                step *= 2;
            }
            if (hi > nb) {
                hi = nb;
            }
            while (lo < hi) { /* b[lo - 1] < want <= b[hi] (or hi is the end) */
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (b[mid] < want) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if (lo < nb && b[lo] == want) {
                out[shared++] = want;
                lo++;
            }
        }
        return shared;
    }
    Py_ssize_t x = 0, y = 0;
    while (x < na && y < nb) {
        int32_t u = a[x], v = b[y];
        if (u == v) {
            out[shared++] = u;
        }
        x += u <= v;
        y += v <= u;
    }
    return shared;
}

PyDoc_STRVAR(common_doc,
             "common(pairs, total, terms, term_starts, families, family_count)\n--\n\n"
             "The terms each pair (a * total + b) shares, each pair's in term order, laid end to end (int32 "
             "bytes); where each pair's end (int64 bytes); and how many word families each pair's shared terms "
             "make (int64 bytes; families, int64, gives each term's, or is empty to skip the count).");

static PyObject *common(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *objs[4];
    Py_ssize_t total, family_count;
    if (!PyArg_ParseTuple(args, "OnOOOn:common", &objs[0], &total, &objs[1], &objs[2], &objs[3], &family_count)) {
        return NULL;
    }
    static const Py_ssize_t sizes[4] = {8, 4, 8, 8};
    static const char *names[4] = {"pairs", "terms", "term_starts", "families"};
    Py_buffer views[4];
    int got = 0;
    while (got < 4 && get_items(objs[got], &views[got], sizes[got], names[got]) == 0) {
        got++;
    }
    PyObject *result = NULL, *shared = NULL, *ends = NULL, *kinds = NULL;
    int64_t *stamps = NULL;
    if (got < 4) {
        goto release;
    }
    const int64_t *pairs = views[0].buf, *term_starts = views[2].buf, *families = views[3].buf;
    const int32_t *terms = views[1].buf;
    Py_ssize_t n = views[0].len / 8, n_terms = views[1].len / 4, width = views[3].len / 8;
    int counting = width > 0;
    if (total < 1 || views[2].len != 8 * (total + 1) || family_count < 1 || term_starts[0] < 0
            || term_starts[total] > n_terms) {
        PyErr_SetString(PyExc_ValueError, "term_starts needs one entry per file and one more, total and "
                                          "family_count one or more");
        goto release;
    }
    /* every index followed is checked once here; room is the most terms the pairs can share */
    int bad = 0;
    Py_ssize_t room = 0;
    for (Py_ssize_t f = 0; !bad && f < total; f++) {
        bad = term_starts[f] > term_starts[f + 1];
    }
    for (Py_ssize_t k = 0; !bad && k < n; k++) {
        bad = pairs[k] < 0 || pairs[k] / total >= total;
        if (!bad) {
            int64_t a = pairs[k] / total, b = pairs[k] % total;
            int64_t na = term_starts[a + 1] - term_starts[a], nb = term_starts[b + 1] - term_starts[b];
            room += na < nb ? na : nb;
        }
    }
    for (Py_ssize_t p = 0; counting && !bad && p < term_starts[total]; p++) {
        bad = terms[p] < 0 || terms[p] >= width;
    }
    for (Py_ssize_t t = 0; counting && !bad && t < width; t++) {
        bad = families[t] < 0 || families[t] >= family_count;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "a pair, an offset, a term or a family is out of its range");
        goto release;
    }
    shared = PyByteArray_FromStringAndSize(NULL, 4 * (room > 0 ? room : 1));
    ends = PyByteArray_FromStringAndSize(NULL, 8 * (n > 0 ? n : 1));
    kinds = PyByteArray_FromStringAndSize(NULL, 8 * (n > 0 ? n : 1));
    stamps = counting ? calloc(family_count, sizeof(int64_t)) : NULL;
    if (shared == NULL || ends == NULL || kinds == NULL || (counting && stamps == NULL)) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto release;
    }
    int32_t *out = (int32_t *)PyByteArray_AS_STRING(shared);
    int64_t *end = (int64_t *)PyByteArray_AS_STRING(ends), *kind = (int64_t *)PyByteArray_AS_STRING(kinds);
    Py_ssize_t written = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t a = pairs[k] / total, b = pairs[k] % total;
        Py_ssize_t found = intersect(terms + term_starts[a], term_starts[a + 1] - term_starts[a],
                                     terms + term_starts[b], term_starts[b + 1] - term_starts[b], out + written);
        int64_t distinct = 0;
        for (Py_ssize_t x = written; counting && x < written + found; x++) {
            int64_t f = families[out[x]];
            distinct += stamps[f] != k + 1; /* a family counted once per pair: stamped with the pair */
            stamps[f] = k + 1;
        }
        written += found;
        end[k] = written;
        kind[k] = distinct;
    }
    Py_END_ALLOW_THREADS
    if (PyByteArray_Resize(shared, 4 * written) == 0 && PyByteArray_Resize(ends, 8 * n) == 0
            && PyByteArray_Resize(kinds, 8 * n) == 0) {
        result = PyTuple_Pack(3, shared, ends, kinds);
    }
release:
    free(stamps);
    Py_XDECREF(shared);
    Py_XDECREF(ends);
    Py_XDECREF(kinds);
    while (got-- > 0) {
        PyBuffer_Release(&views[got]);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"meetings", meetings, METH_VARARGS, meetings_doc},
    {"common", common, METH_VARARGS, common_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_meetings", "sharedterm's candidate search in C (see sharedterm.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__meetings(void) {
    return PyModule_Create(&module);
}
