/* The kNN scan's first pass in C: each row's integer dot product with the query, over int8 copies of the vectors.
 *
 * An exact kNN scan is bound by memory: numpy's float32 loop reads 4 bytes a dimension and already streams at
 * the memory's pace. An int8 copy of the rows is a quarter of those bytes; with a bound on what the rounding to
 * int8 can change, this pass leaves few rows that may still reach the top k, and only those are scored again in
 * float32 by numpy (see xerj_core.query.knnquant). numpy has no int8 dot product that does not first widen every
 * element in a buffer, so this loop is the one thing that needs C.
 *
 * The dedup probe's first pass over its sketches' int8 codes (xerj_core.memory.dedup) lives here too: above() sums
 * each row's weighted codes, which numpy converts to float32 one by one through a buffer.
 *
 * Arrays arrive through the buffer protocol, so the module needs Python's headers alone. It only reads the rows
 * and the query; the sums go into the caller's int32 array. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* One row's sum: at most 127 * 127 * d, exact in 32 bits for d below 133,000. The query comes widened to int16,
 * so GCC's vectoriser sees its multiply-add pattern (pmaddwd: pairs of 16-bit products summed into 32 bits);
 * with both sides int8 it widened every product to 32 bits and ran half as fast. */
static inline int32_t row_dot(const int8_t *row, const int16_t *query, Py_ssize_t d) {
    int32_t acc = 0;
    for (Py_ssize_t j = 0; j < d; j++) {
        acc += (int32_t)(int16_t)row[j] * (int32_t)query[j];
    }
    return acc;
}

/* On x86-64 Linux with GCC the clones let the loops below use AVX2 or AVX-512 where the CPU has them. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ROW_LOOP __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define ROW_LOOP
#endif

/* Every row's sum; with ``wanted`` (not NULL) a row it leaves out is not read and its sum is 0. */
ROW_LOOP
static void rows_dots(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int16_t *query, const uint8_t *wanted,
                      int32_t *out) {
    for (Py_ssize_t r = 0; r < n; r++) {
        out[r] = wanted == NULL || wanted[r] ? row_dot(rows + r * d, query, d) : 0;
    }
}

/* The sums of the ``m`` rows numbered in ``at``, in that order. */
#define AHEAD 8
ROW_LOOP
static void listed_dots(const int8_t *rows, const int64_t *at, Py_ssize_t m, Py_ssize_t d, const int16_t *query,
                        int32_t *out) {
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i + AHEAD < m) {
            /* The rows listed are scattered, so the hardware's prefetch does not see them coming: ask for the row
             * AHEAD places on, so its lines arrive while this one is summed. */
#if defined(__GNUC__) || defined(__clang__)
            const char *next = (const char *)(rows + at[i + AHEAD] * d);
            for (Py_ssize_t j = 0; j < d; j += 64) {
                __builtin_prefetch(next + j);
            }
#endif
        }
        out[i] = row_dot(rows + at[i] * d, query, d);
    }
}

/* A C-contiguous buffer of signed integers of ``itemsize`` bytes (int8, int16 or int32). */
static int get_buffer(PyObject *obj, Py_buffer *view, int flags, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, flags | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    char kind = view->format != NULL ? view->format[strlen(view->format) - 1] : 'B';
    int is_signed = kind == 'b' || kind == 'h' || kind == 'i' || kind == 'l';
    if (!is_signed || view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous int%zd array", what, itemsize * 8);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(dots_doc,
"dots(rows, query, out, wanted=None) -> None\n\n"
"``out[r] = sum(rows[r, j] * query[j])`` for every row: ``rows`` a C-contiguous int8 matrix of ``len(out)`` rows\n"
"and ``len(query)`` columns, ``query`` int16 with values in [-128, 127] (the int8 query, widened), ``out`` a\n"
"writable int32 array. With ``wanted`` (a bool per row) the rows it leaves out are not read and get 0. The GIL\n"
"is released meanwhile.");

static PyObject *dots(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *rows_obj, *query_obj, *out_obj, *wanted_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O:dots", &rows_obj, &query_obj, &out_obj, &wanted_obj)) {
        return NULL;
    }
    Py_buffer rows, query, out, wanted = {0};
    if (get_buffer(rows_obj, &rows, PyBUF_SIMPLE, 1, "rows") < 0) {
        return NULL;
    }
    if (get_buffer(query_obj, &query, PyBUF_SIMPLE, 2, "query") < 0) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    if (get_buffer(out_obj, &out, PyBUF_WRITABLE, 4, "out") < 0) {
        PyBuffer_Release(&rows);
        PyBuffer_Release(&query);
        return NULL;
    }
    if (wanted_obj != Py_None && PyObject_GetBuffer(wanted_obj, &wanted, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&rows);
        PyBuffer_Release(&query);
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t d = query.len / 2, n = out.len / 4;
    if (d == 0 || rows.len != n * d) {
        PyErr_Format(PyExc_ValueError, "rows hold %zd bytes, not %zd rows of %zd", rows.len, n, d);
    } else if (wanted.obj != NULL && (wanted.itemsize != 1 || wanted.len != n)) {
        PyErr_Format(PyExc_ValueError, "wanted needs one bool per row, not %zd bytes for %zd rows", wanted.len, n);
    } else {
        const uint8_t *keep = wanted.obj != NULL ? (const uint8_t *)wanted.buf : NULL;
        Py_BEGIN_ALLOW_THREADS
        rows_dots((const int8_t *)rows.buf, n, d, (const int16_t *)query.buf, keep, (int32_t *)out.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&rows);
    PyBuffer_Release(&query);
    PyBuffer_Release(&out);
    if (wanted.obj != NULL) {
        PyBuffer_Release(&wanted);
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* One run of rows for left(): the int8 rows and the query, and per row the numbers bounding its score. */
typedef struct {
    const int8_t *rows;
    const int16_t *query;
    const double *scale, *slack, *rounded;
    const uint8_t *wanted;
    Py_ssize_t n, d;
    double times, norm_times, error_times, add;
} Run;

/* A min-heap of the k largest values seen: heap[0] is the k-th largest once k were pushed. */
static void heap_sift(double *heap, Py_ssize_t size, Py_ssize_t at) {
    for (;;) {
        Py_ssize_t least = at, left = 2 * at + 1, right = left + 1;
        if (left < size && heap[left] < heap[least]) {
            least = left;
        }
        if (right < size && heap[right] < heap[least]) {
            least = right;
        }
        if (least == at) {
            return;
        }
        double swap = heap[at];
        heap[at] = heap[least];
        heap[least] = swap;
        at = least;
    }
}

static void heap_offer(double *heap, Py_ssize_t *size, Py_ssize_t k, double value) {
    if (*size < k) {
        Py_ssize_t at = (*size)++;
        heap[at] = value;
        while (at > 0 && heap[(at - 1) / 2] > heap[at]) {
            Py_ssize_t up = (at - 1) / 2;
            double swap = heap[at];
            heap[at] = heap[up];
            heap[up] = swap;
            at = up;
        }
    } else if (value > heap[0]) {
        heap[0] = value;
        heap_sift(heap, k, 0);
    }
}

/* Over a run's wanted rows alone, the GIL released: list them (in out[], which has room for every row), bound
 * each one's score and keep the k largest lower ends in a heap, then keep listed the rows whose upper end reaches
 * the k-th largest lower end. Only the wanted rows are read, so a filter keeping one row in ten makes the run
 * about ten times shorter. Returns how many rows are left in out[], or -1 when out of memory. */
static Py_ssize_t bounded_rows(const Run *run, Py_ssize_t k, int64_t *out) {
    Py_ssize_t m = 0;
    for (Py_ssize_t r = 0; r < run->n; r++) {
        out[m] = r;
        m += run->wanted[r] != 0;
    }
    /* Most rows wanted: one pass down the rows in order (the hardware prefetches it), a sum per row. */
    int dense = 2 * m > run->n;
    double *heap = PyMem_RawMalloc(sizeof(double) * (size_t)(k > 0 ? k : 1));
    double *upper = PyMem_RawMalloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
    int32_t *sums = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(dense ? run->n : m > 0 ? m : 1));
    if (heap == NULL || upper == NULL || sums == NULL) {
        PyMem_RawFree(heap);
        PyMem_RawFree(upper);
        PyMem_RawFree(sums);
        return -1;
    }
    if (dense) {
        rows_dots(run->rows, run->n, run->d, run->query, run->wanted, sums);
    } else {
        listed_dots(run->rows, out, m, run->d, run->query, sums);
    }
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t r = (Py_ssize_t)out[i];
        double centre = (double)sums[dense ? r : i] * run->scale[r] * run->times;
        double width = run->slack[r] * run->norm_times + run->rounded[r] * run->error_times + run->add;
        upper[i] = centre + width;
        heap_offer(heap, &size, k, centre - width);
    }
    double floor = size < k ? -HUGE_VAL : heap[0];
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (upper[i] >= floor) {
            out[kept++] = out[i];  /* kept <= i: the list is compacted in place */
        }
    }
    PyMem_RawFree(heap);
    PyMem_RawFree(upper);
    PyMem_RawFree(sums);
    return kept;
}

/* A C-contiguous buffer of floats of ``itemsize`` bytes (4: float32, 8: float64). */
static int get_reals(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    char kind = itemsize == 8 ? 'd' : 'f';
    if (view->itemsize != itemsize || view->format == NULL || view->format[strlen(view->format) - 1] != kind) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous float%zd array", what, itemsize * 8);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(left_doc,
"left(rows, query, scale, slack, rounded, wanted, k, times, norm_times, error_times, add) -> bytearray\n\n"
"The rows that may be among the ``k`` best ``wanted`` rows, as int64 bytes in ascending order. Each row's score\n"
"lies within ``centre +- width``: ``centre = dot * scale[r] * times`` (``dot`` as :func:`dots` computes it) and\n"
"``width = slack[r] * norm_times + rounded[r] * error_times + add``; a row is left when its upper end reaches\n"
"the k-th largest lower end among wanted rows (every wanted row when fewer than ``k`` are). ``scale``,\n"
"``slack`` and ``rounded`` are float64 per row, ``wanted`` a bool per row. The GIL is released meanwhile.");

static PyObject *left(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *objs[6];
    Run run;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "OOOOOOndddd:left", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &k, &run.times, &run.norm_times, &run.error_times, &run.add)) {
        return NULL;
    }
    Py_buffer views[6];
    int got = 0;
    if (get_buffer(objs[0], &views[0], PyBUF_SIMPLE, 1, "rows") == 0 && ++got
            && get_buffer(objs[1], &views[1], PyBUF_SIMPLE, 2, "query") == 0 && ++got
            && get_reals(objs[2], &views[2], 8, "scale") == 0 && ++got
            && get_reals(objs[3], &views[3], 8, "slack") == 0 && ++got
            && get_reals(objs[4], &views[4], 8, "rounded") == 0 && ++got
            && PyObject_GetBuffer(objs[5], &views[5], PyBUF_C_CONTIGUOUS) == 0) {
        got++;
    }
    PyObject *found = NULL;
    if (got == 6) {
        run.n = views[5].len;
        run.d = views[1].len / 2;
        if (run.d == 0 || views[5].itemsize != 1 || views[0].len != run.n * run.d || views[2].len != 8 * run.n
                || views[3].len != 8 * run.n || views[4].len != 8 * run.n) {
            PyErr_SetString(PyExc_ValueError, "rows, scale, slack, rounded and wanted need one entry per row");
        } else if (k <= 0) {
            PyErr_SetString(PyExc_ValueError, "k must be positive");
        } else {
            run.rows = views[0].buf;
            run.query = views[1].buf;
            run.scale = views[2].buf;
            run.slack = views[3].buf;
            run.rounded = views[4].buf;
            run.wanted = views[5].buf;
            found = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * (run.n > 0 ? run.n : 1));
            if (found != NULL) {
                Py_ssize_t kept;
                Py_BEGIN_ALLOW_THREADS
                kept = bounded_rows(&run, k < run.n ? k : run.n, (int64_t *)PyByteArray_AS_STRING(found));
                Py_END_ALLOW_THREADS
                if (kept < 0) {
                    Py_CLEAR(found);
                    PyErr_NoMemory();
                } else if (PyByteArray_Resize(found, (Py_ssize_t)sizeof(int64_t) * kept) < 0) {
                    Py_CLEAR(found);
                }
            }
        }
    }
    while (got-- > 0) {
        PyBuffer_Release(&views[got]);
    }
    return found;
}

/* above() on x86-64 with AVX2: 64 rows' sums in eight registers of 8 floats while every direction's codes go by,
 * so each direction's cache line is read whole at once (the directions lie a multiple of 4 KiB apart when the
 * rows are, and so compete for the same few lines of the first-level cache). Written with intrinsics because
 * GCC 12 left every plain form of this loop scalar (a conversion per code). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define ABOVE_AVX2 1
#define ABOVE_ROWS 64

__attribute__((target("avx2")))
static Py_ssize_t rows_above_avx2(const int8_t *codes, Py_ssize_t m, Py_ssize_t n, const float *weights,
                                  double threshold, int64_t *out, Py_ssize_t *done) {
    Py_ssize_t kept = 0, i = 0;
    for (; i + ABOVE_ROWS <= n; i += ABOVE_ROWS) {
        __m256 sums[ABOVE_ROWS / 8];
        for (int v = 0; v < ABOVE_ROWS / 8; v++) {
            sums[v] = _mm256_setzero_ps();
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            const int8_t *row = codes + j * n + i;
            __m256 weight = _mm256_set1_ps(weights[j]);
            for (int v = 0; v < ABOVE_ROWS / 8; v++) {
                __m256 code = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + 8 * v))));
                /* a product then a sum, as the plain loop rounds them */
                sums[v] = _mm256_add_ps(sums[v], _mm256_mul_ps(weight, code));
            }
        }
        float found[ABOVE_ROWS];
        for (int v = 0; v < ABOVE_ROWS / 8; v++) {
            _mm256_storeu_ps(found + 8 * v, sums[v]);
        }
        for (int k = 0; k < ABOVE_ROWS; k++) {
            out[kept] = i + k;  /* kept <= i + k: written always, kept only when the sum reaches the bar */
            kept += (double)found[k] >= threshold;
        }
    }
    *done = i;
    return kept;
}
#endif

/* The rows whose weighted sum of codes reaches ``threshold``, listed in out[] (room for every row); returns how
 * many. ``codes`` holds a row of ``n`` codes per direction (``m`` of them). Each sum is float32, a product then a
 * sum per direction in order: its rounding is far below what the caller's bound allows for a float32 sum of a few
 * dozen terms. */
static Py_ssize_t rows_above(const int8_t *codes, Py_ssize_t m, Py_ssize_t n, const float *weights,
                             double threshold, int64_t *out) {
    Py_ssize_t kept = 0, i = 0;
#ifdef ABOVE_AVX2
    if (__builtin_cpu_supports("avx2")) {
        kept = rows_above_avx2(codes, m, n, weights, threshold, out, &i);
    }
#endif
    for (; i < n; i++) {
        float sum = 0;
        for (Py_ssize_t j = 0; j < m; j++) {
            float product = weights[j] * (float)codes[j * n + i];
            sum += product;
        }
        out[kept] = i;
        kept += (double)sum >= threshold;
    }
    return kept;
}

PyDoc_STRVAR(above_doc,
"above(codes, weights, threshold) -> bytearray\n\n"
"The columns ``i`` of ``codes`` (a C-contiguous int8 matrix of ``len(weights)`` rows) where\n"
"``sum(weights[j] * codes[j, i])``, summed in float32 in order of ``j``, is at least ``threshold``: int64 bytes,\n"
"ascending. ``weights`` is a contiguous float32 array. The GIL is released meanwhile.");

static PyObject *above(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *codes_obj, *weights_obj;
    double threshold;
    if (!PyArg_ParseTuple(args, "OOd:above", &codes_obj, &weights_obj, &threshold)) {
        return NULL;
    }
    Py_buffer codes, weights;
    if (get_buffer(codes_obj, &codes, PyBUF_SIMPLE, 1, "codes") < 0) {
        return NULL;
    }
    if (get_reals(weights_obj, &weights, 4, "weights") < 0) {
        PyBuffer_Release(&codes);
        return NULL;
    }
    PyObject *found = NULL;
    Py_ssize_t m = weights.len / 4, n = m > 0 ? codes.len / m : 0;
    if (m == 0 || codes.len != m * n) {
        PyErr_Format(PyExc_ValueError, "codes hold %zd bytes, not a row of codes per weight (%zd)", codes.len, m);
    } else {
        found = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * (n > 0 ? n : 1));
        if (found != NULL) {
            Py_ssize_t kept;
            Py_BEGIN_ALLOW_THREADS
            kept = rows_above((const int8_t *)codes.buf, m, n, (const float *)weights.buf, threshold,
                              (int64_t *)PyByteArray_AS_STRING(found));
            Py_END_ALLOW_THREADS
            if (PyByteArray_Resize(found, (Py_ssize_t)sizeof(int64_t) * kept) < 0) {
                Py_CLEAR(found);
            }
        }
    }
    PyBuffer_Release(&codes);
    PyBuffer_Release(&weights);
    return found;
}

static PyMethodDef methods[] = {
    {"dots", dots, METH_VARARGS, dots_doc},
    {"left", left, METH_VARARGS, left_doc},
    {"above", above, METH_VARARGS, above_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_knnscan",
    "The int8 first passes of the kNN scan and the dedup probe (see xerj_core.query.knnquant).", -1, methods,
};

PyMODINIT_FUNC PyInit__knnscan(void) {
    return PyModule_Create(&module);
}
