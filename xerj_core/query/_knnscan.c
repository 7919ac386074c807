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
#if !defined(__GNUC__) && !defined(__clang__)
#include <stdatomic.h>
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#endif

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
static void rows_dots_plain(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int16_t *query,
                            const uint8_t *wanted, int32_t *out) {
    for (Py_ssize_t r = 0; r < n; r++) {
        out[r] = wanted == NULL || wanted[r] ? row_dot(rows + r * d, query, d) : 0;
    }
}

/* The sums of the ``m`` rows numbered in ``at``, in that order. */
#define AHEAD 8
ROW_LOOP
static void listed_dots_plain(const int8_t *rows, const int64_t *at, Py_ssize_t m, Py_ssize_t d,
                              const int16_t *query, int32_t *out) {
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

#ifdef HAVE_AVX2_PATH
/* A row's sum with AVX2, 32 codes a step: pmaddubsw multiplies unsigned bytes by signed ones and sums each pair
 * into 16 bits, so the row's codes go in as their magnitudes (|-128| = 128 fits a byte) and the query's codes take
 * the row's signs (psignb); a pair is at most 2 * 128 * 127 = 32,512, below int16's saturation, so every sum is
 * exact. pmaddwd by ones then widens the pairs into 32-bit sums. GCC's own vectorisation of row_dot, a 16-bit
 * widening of every code, ran at about half the memory's pace. ``narrow`` is the query as int8, none of it -128
 * (whose sign cannot be flipped in a byte). */
__attribute__((target("avx2")))
static inline int32_t row_dot_avx2(const int8_t *row, const int8_t *narrow, const int16_t *query, Py_ssize_t d) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    Py_ssize_t j = 0;
    for (; j + 32 <= d; j += 32) {
        __m256i codes = _mm256_loadu_si256((const __m256i *)(row + j));
        __m256i probe = _mm256_loadu_si256((const __m256i *)(narrow + j));
        __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(codes), _mm256_sign_epi8(probe, codes));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
    }
    __m128i half = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    half = _mm_add_epi32(half, _mm_shuffle_epi32(half, _MM_SHUFFLE(1, 0, 3, 2)));
    half = _mm_add_epi32(half, _mm_shuffle_epi32(half, _MM_SHUFFLE(2, 3, 0, 1)));
    int32_t sum = _mm_cvtsi128_si32(half);
    for (; j < d; j++) {
        sum += (int32_t)row[j] * (int32_t)query[j];
    }
    return sum;
}

__attribute__((target("avx2")))
static void rows_dots_avx2(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int8_t *narrow,
                           const int16_t *query, const uint8_t *wanted, int32_t *out) {
    for (Py_ssize_t r = 0; r < n; r++) {
        out[r] = wanted == NULL || wanted[r] ? row_dot_avx2(rows + r * d, narrow, query, d) : 0;
    }
}

__attribute__((target("avx2")))
static void listed_dots_avx2(const int8_t *rows, const int64_t *at, Py_ssize_t m, Py_ssize_t d,
                             const int8_t *narrow, const int16_t *query, int32_t *out) {
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i + AHEAD < m) {  /* see listed_dots_plain */
            const char *next = (const char *)(rows + at[i + AHEAD] * d);
            for (Py_ssize_t j = 0; j < d; j += 64) {
                __builtin_prefetch(next + j);
            }
        }
        out[i] = row_dot_avx2(rows + at[i] * d, narrow, query, d);
    }
}
#endif

/* The query as the loops read it: widened to int16, and for the AVX2 loop (where the CPU has it) as int8. */
typedef struct {
    const int16_t *wide;
    int8_t *narrow;  /* NULL: the plain loop (no AVX2, or a code outside [-127, 127]) */
} Query;

/* ``narrow`` filled from ``wide`` when the AVX2 loop can take this query; 0, or -1 when out of memory. */
static int query_init(Query *q, const int16_t *wide, Py_ssize_t d) {
    q->wide = wide;
    q->narrow = NULL;
#ifdef HAVE_AVX2_PATH
    if (!__builtin_cpu_supports("avx2")) {
        return 0;
    }
    for (Py_ssize_t j = 0; j < d; j++) {
        if (wide[j] < -127 || wide[j] > 127) {
            return 0;
        }
    }
    q->narrow = PyMem_RawMalloc((size_t)(d > 0 ? d : 1));
    if (q->narrow == NULL) {
        return -1;
    }
    for (Py_ssize_t j = 0; j < d; j++) {
        q->narrow[j] = (int8_t)wide[j];
    }
#endif
    return 0;
}

/* Every row's sum; with ``wanted`` (not NULL) a row it leaves out is not read and its sum is 0. */
static void rows_dots(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const Query *q, const uint8_t *wanted,
                      int32_t *out) {
#ifdef HAVE_AVX2_PATH
    if (q->narrow != NULL) {
        rows_dots_avx2(rows, n, d, q->narrow, q->wide, wanted, out);
        return;
    }
#endif
    rows_dots_plain(rows, n, d, q->wide, wanted, out);
}

/* The sums of the ``m`` rows numbered in ``at``, in that order. */
static void listed_dots(const int8_t *rows, const int64_t *at, Py_ssize_t m, Py_ssize_t d, const Query *q,
                        int32_t *out) {
#ifdef HAVE_AVX2_PATH
    if (q->narrow != NULL) {
        listed_dots_avx2(rows, at, m, d, q->narrow, q->wide, out);
        return;
    }
#endif
    listed_dots_plain(rows, at, m, d, q->wide, out);
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
        Query q;
        if (query_init(&q, (const int16_t *)query.buf, d) < 0) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            rows_dots((const int8_t *)rows.buf, n, d, &q, keep, (int32_t *)out.buf);
            Py_END_ALLOW_THREADS
            PyMem_RawFree(q.narrow);
        }
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
    const Query *query;
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

/* The k largest lower ends seen, and the rows whose upper end may still reach the k-th of them. */
typedef struct {
    double *heap;
    Py_ssize_t size, k;
    int64_t *rows;
    double *upper;
    Py_ssize_t count, room;
} Bounds;

static int bounds_init(Bounds *b, Py_ssize_t k, Py_ssize_t room) {
    b->k = k;
    b->size = b->count = 0;
    b->room = room > 0 ? room : 1;
    b->heap = PyMem_RawMalloc(sizeof(double) * (size_t)(k > 0 ? k : 1));
    b->rows = PyMem_RawMalloc(sizeof(int64_t) * (size_t)b->room);
    b->upper = PyMem_RawMalloc(sizeof(double) * (size_t)b->room);
    return b->heap != NULL && b->rows != NULL && b->upper != NULL ? 0 : -1;
}

static void bounds_free(Bounds *b) {
    PyMem_RawFree(b->heap);
    PyMem_RawFree(b->rows);
    PyMem_RawFree(b->upper);
}

static double bounds_floor(const Bounds *b) {
    return b->size == 0 || b->size < b->k ? -HUGE_VAL : b->heap[0];
}

/* Keeps the rows whose upper end reaches the final floor, in the order they came; returns how many. */
static Py_ssize_t bounds_settle(Bounds *b) {
    double floor = bounds_floor(b);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        if (b->upper[i] >= floor) {
            b->rows[kept++] = b->rows[i];
        }
    }
    return b->count = kept;
}

/* Bounds a run's wanted rows alone, the GIL released: lists them (in listed[], room for every row), sums each
 * one's int8 dot product (into sums[], likewise), offers each lower end to the heap and notes each row, as
 * ``first_row`` plus its place in the run, whose upper end reaches the heap's floor so far. That floor only
 * rises, so a row below it now is below the final one too. Only the wanted rows are read, so a filter keeping
 * one row in ten makes the run about ten times shorter. Returns -1 when out of memory. */
static int bound_run(const Run *run, int64_t first_row, Bounds *b, int64_t *listed, int32_t *sums) {
    Py_ssize_t m = 0;
    for (Py_ssize_t r = 0; r < run->n; r++) {
        listed[m] = r;
        m += run->wanted[r] != 0;
    }
    /* Most rows wanted: one pass down the rows in order (the hardware prefetches it), a sum per row. */
    int dense = 2 * m > run->n;
    if (dense) {
        rows_dots(run->rows, run->n, run->d, run->query, run->wanted, sums);
    } else {
        listed_dots(run->rows, listed, m, run->d, run->query, sums);
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t r = (Py_ssize_t)listed[i];
        double centre = (double)sums[dense ? r : i] * run->scale[r] * run->times;
        double width = run->slack[r] * run->norm_times + run->rounded[r] * run->error_times + run->add;
        heap_offer(b->heap, &b->size, b->k, centre - width);
        if (centre + width < bounds_floor(b)) {
            continue;
        }
        if (b->count == b->room) {
            Py_ssize_t room = 2 * b->room;
            int64_t *rows = PyMem_RawRealloc(b->rows, sizeof(int64_t) * (size_t)room);
            if (rows == NULL) {
                return -1;
            }
            b->rows = rows;
            double *upper = PyMem_RawRealloc(b->upper, sizeof(double) * (size_t)room);
            if (upper == NULL) {
                return -1;
            }
            b->upper = upper;
            b->room = room;
        }
        b->rows[b->count] = first_row + r;
        b->upper[b->count++] = centre + width;
    }
    return 0;
}

/* One run alone (left()): the rows left, ascending, in out[] (room for every row); returns how many, or -1 when
 * out of memory. */
static Py_ssize_t bounded_rows(const Run *run, Py_ssize_t k, int64_t *out) {
    Bounds b = {0};
    int32_t *sums = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(run->n > 0 ? run->n : 1));
    Py_ssize_t kept = -1;
    if (sums != NULL && bounds_init(&b, k, 64) == 0 && bound_run(run, 0, &b, out, sums) == 0) {
        kept = bounds_settle(&b);
        memcpy(out, b.rows, sizeof(int64_t) * (size_t)kept);
    }
    bounds_free(&b);
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
            Query q;
            run.rows = views[0].buf;
            run.query = &q;
            run.scale = views[2].buf;
            run.slack = views[3].buf;
            run.rounded = views[4].buf;
            run.wanted = views[5].buf;
            found = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * (run.n > 0 ? run.n : 1));
            if (found != NULL && query_init(&q, views[1].buf, run.d) < 0) {
                Py_CLEAR(found);
                PyErr_NoMemory();
            }
            if (found != NULL) {
                Py_ssize_t kept;
                Py_BEGIN_ALLOW_THREADS
                kept = bounded_rows(&run, k < run.n ? k : run.n, (int64_t *)PyByteArray_AS_STRING(found));
                Py_END_ALLOW_THREADS
                PyMem_RawFree(q.narrow);
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

/* The next run a thread takes: the claim counter is shared by every thread scanning one query's parts. */
static Py_ssize_t next_run(int64_t *claim) {
#if defined(__GNUC__) || defined(__clang__)
    return (Py_ssize_t)__atomic_fetch_add(claim, 1, __ATOMIC_RELAXED);
#else
    return (Py_ssize_t)atomic_fetch_add((_Atomic int64_t *)claim, 1);
#endif
}

/* One part of left_runs(): its first row's number, its rows with their bounds' numbers, its float32 rows and
 * their inverse norms. */
typedef struct {
    int64_t start;
    Py_buffer views[7];  /* rows, scale, slack, rounded, wanted, values, inverse */
    int got;
    Py_ssize_t n, runs;
} Part;

static int get_part(PyObject *item, Part *part, Py_ssize_t d) {
    PyObject *objs[7];
    long long start;
    part->got = 0;
    if (!PyArg_ParseTuple(item, "LOOOOOOO:part", &start, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6])) {
        return -1;
    }
    part->start = (int64_t)start;
    if (get_buffer(objs[0], &part->views[0], PyBUF_SIMPLE, 1, "rows") == 0 && ++part->got
            && get_reals(objs[1], &part->views[1], 8, "scale") == 0 && ++part->got
            && get_reals(objs[2], &part->views[2], 8, "slack") == 0 && ++part->got
            && get_reals(objs[3], &part->views[3], 8, "rounded") == 0 && ++part->got
            && PyObject_GetBuffer(objs[4], &part->views[4], PyBUF_C_CONTIGUOUS) == 0 && ++part->got
            && get_reals(objs[5], &part->views[5], 4, "values") == 0 && ++part->got
            && get_reals(objs[6], &part->views[6], 4, "inverse") == 0) {
        part->got++;
    }
    if (part->got < 7) {
        return -1;
    }
    part->n = part->views[4].len;
    if (part->views[4].itemsize != 1 || part->views[0].len != part->n * d || part->views[1].len != 8 * part->n
            || part->views[2].len != 8 * part->n || part->views[3].len != 8 * part->n
            || part->views[5].len != 4 * part->n * d || part->views[6].len != 4 * part->n) {
        PyErr_SetString(PyExc_ValueError,
                        "rows, scale, slack, rounded, wanted, values and inverse need one entry per row");
        return -1;
    }
    return 0;
}

/* The float32 rows of the ``kept`` rows (ascending, numbered as in left_runs()) copied into ``out``, one after
 * another, and their inverse norms into ``inverse``: the caller scores them next, and its own gathers of rows
 * scattered over the parts waited on the memory row by row (about 1.4 us each, cold), where this loop asks for
 * the rows ahead while it copies. */
static void copy_values(const Part *parts, const int64_t *kept, Py_ssize_t count, Py_ssize_t d, const char **from,
                        float *out, float *inverse) {
    Py_ssize_t p = 0, size = (Py_ssize_t)sizeof(float) * d;
    for (Py_ssize_t i = 0; i < count; i++) {
        while (kept[i] >= parts[p].start + parts[p].n) {
            p++;
        }
        from[i] = (const char *)parts[p].views[5].buf + (kept[i] - parts[p].start) * size;
        inverse[i] = ((const float *)parts[p].views[6].buf)[kept[i] - parts[p].start];
    }
    for (Py_ssize_t i = 0; i < count; i++) {
#if defined(__GNUC__) || defined(__clang__)
        if (i + AHEAD < count) {
            for (Py_ssize_t j = 0; j < size; j += 64) {
                __builtin_prefetch(from[i + AHEAD] + j);
            }
        }
#endif
        memcpy(out + i * d, from[i], (size_t)size);
    }
}

/* The runs this thread claims, each bounded into one Bounds (any set of rows' k-th largest lower end is at
 * most the k-th best score among all rows, so a row of the best k is never dropped), GIL released throughout.
 * Returns how many rows are left in b, or -1 when out of memory. */
static Py_ssize_t claimed_rows(Part *parts, Py_ssize_t count, Py_ssize_t run_rows, Py_ssize_t longest,
                               const Run *shape, int64_t *claim, Py_ssize_t copy_at_most, Bounds *b,
                               float **values, float **inverse) {
    /* room for the longest run: run_rows, or the longest part when every part is shorter */
    longest = longest < run_rows ? longest : run_rows;
    int64_t *listed = PyMem_RawMalloc(sizeof(int64_t) * (size_t)(longest > 0 ? longest : 1));
    int32_t *sums = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(longest > 0 ? longest : 1));
    Py_ssize_t kept = -1, part = 0, before = 0;  /* runs in the parts ahead of ``part`` */
    if (listed != NULL && sums != NULL) {
        for (;;) {
            Py_ssize_t at = next_run(claim);
            while (part < count && at >= before + parts[part].runs) {  /* claims only grow: parts go by once */
                before += parts[part++].runs;
            }
            if (part == count) {
                kept = bounds_settle(b);
                if (kept > copy_at_most) {
                    break;  /* the caller scores every row instead: no copy of so many rows */
                }
                const char **from = PyMem_RawMalloc(sizeof(char *) * (size_t)(kept > 0 ? kept : 1));
                *values = PyMem_RawMalloc(sizeof(float) * (size_t)(kept > 0 ? kept * shape->d : 1));
                *inverse = PyMem_RawMalloc(sizeof(float) * (size_t)(kept > 0 ? kept : 1));
                if (from == NULL || *values == NULL || *inverse == NULL) {
                    kept = -1;
                } else {
                    copy_values(parts, b->rows, kept, shape->d, from, *values, *inverse);
                }
                PyMem_RawFree(from);
                break;
            }
            Part *p = &parts[part];
            Py_ssize_t lo = (at - before) * run_rows, hi = lo + run_rows < p->n ? lo + run_rows : p->n;
            Run run = *shape;
            run.rows = (const int8_t *)p->views[0].buf + lo * shape->d;
            run.scale = (const double *)p->views[1].buf + lo;
            run.slack = (const double *)p->views[2].buf + lo;
            run.rounded = (const double *)p->views[3].buf + lo;
            run.wanted = (const uint8_t *)p->views[4].buf + lo;
            run.n = hi - lo;
            if (bound_run(&run, p->start + lo, b, listed, sums) < 0) {
                break;
            }
        }
    }
    PyMem_RawFree(listed);
    PyMem_RawFree(sums);
    return kept;
}

PyDoc_STRVAR(left_runs_doc,
"left_runs(parts, query, k, run_rows, times, norm_times, error_times, add, claim, copy_at_most)\n"
"    -> (bytes, bytes | None, bytes | None)\n\n"
":func:`left` over many parts at once, cut into runs of ``run_rows`` rows that the threads calling it with the\n"
"same ``claim`` (a writable int64 array of one zero) take in turn: each call bounds the runs it takes against\n"
"one heap and returns the rows they leave as int64 bytes, ascending, numbered ``start`` plus the row's place in\n"
"its part, then those rows' float32 values, one after another, and their float32 inverse norms. ``parts`` is a\n"
"sequence of ``(start, rows, scale, slack, rounded, wanted, values, inverse)`` in order of ``start``, none\n"
"overlapping: the first six as :func:`left` reads them, ``values`` the part's float32 rows and ``inverse`` a\n"
"float32 per row. When more than ``copy_at_most`` rows are left, nothing is copied (both None). The GIL is\n"
"released meanwhile.");

static PyObject *left_runs(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *parts_obj, *query_obj, *claim_obj;
    Py_ssize_t k, run_rows, copy_at_most;
    Run shape = {0};
    if (!PyArg_ParseTuple(args, "OOnnddddOn:left_runs", &parts_obj, &query_obj, &k, &run_rows, &shape.times,
                          &shape.norm_times, &shape.error_times, &shape.add, &claim_obj, &copy_at_most)) {
        return NULL;
    }
    if (k <= 0 || run_rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "k and run_rows must be positive");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(parts_obj, "parts must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq), ready = 0;
    Part *parts = PyMem_Calloc((size_t)(count > 0 ? count : 1), sizeof(Part));
    Py_buffer query, claim;
    Query probe = {0};
    int have_query = 0, have_claim = 0;
    PyObject *found = NULL;
    if (parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (get_buffer(query_obj, &query, PyBUF_SIMPLE, 2, "query") < 0) {
        goto done;
    }
    have_query = 1;
    if (get_buffer(claim_obj, &claim, PyBUF_WRITABLE, 8, "claim") < 0) {
        goto done;
    }
    have_claim = 1;
    shape.d = query.len / 2;
    if (shape.d == 0 || claim.len != 8) {
        PyErr_SetString(PyExc_ValueError, "the query needs a dimension and claim one int64");
        goto done;
    }
    if (query_init(&probe, query.buf, shape.d) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    shape.query = &probe;
    Py_ssize_t longest = 0;
    for (; ready < count; ready++) {
        if (get_part(PySequence_Fast_GET_ITEM(seq, ready), &parts[ready], shape.d) < 0) {
            ready++;  /* its buffers got so far are released below */
            goto done;
        }
        parts[ready].runs = (parts[ready].n + run_rows - 1) / run_rows;
        longest = parts[ready].n > longest ? parts[ready].n : longest;
        if (ready > 0 && parts[ready].start < parts[ready - 1].start + parts[ready - 1].n) {
            PyErr_SetString(PyExc_ValueError, "parts must come in order of their rows, none overlapping");
            ready++;
            goto done;
        }
    }
    Bounds b = {0};
    float *values = NULL, *inverse = NULL;
    if (bounds_init(&b, k, 64) == 0) {
        Py_ssize_t kept;
        Py_BEGIN_ALLOW_THREADS
        kept = claimed_rows(parts, count, run_rows, longest, &shape, (int64_t *)claim.buf, copy_at_most, &b,
                            &values, &inverse);
        Py_END_ALLOW_THREADS
        if (kept > copy_at_most) {
            found = Py_BuildValue("(y#OO)", (const char *)b.rows, (Py_ssize_t)sizeof(int64_t) * kept, Py_None,
                                  Py_None);
        } else if (kept >= 0) {
            found = Py_BuildValue("(y#y#y#)", (const char *)b.rows, (Py_ssize_t)sizeof(int64_t) * kept,
                                  (const char *)values, (Py_ssize_t)sizeof(float) * kept * shape.d,
                                  (const char *)inverse, (Py_ssize_t)sizeof(float) * kept);
        }
    }
    bounds_free(&b);
    PyMem_RawFree(values);
    PyMem_RawFree(inverse);
    if (found == NULL && !PyErr_Occurred()) {
        PyErr_NoMemory();
    }
done:
    for (Py_ssize_t i = 0; i < ready; i++) {
        for (int v = 0; v < parts[i].got; v++) {
            PyBuffer_Release(&parts[i].views[v]);
        }
    }
    PyMem_Free(parts);
    PyMem_RawFree(probe.narrow);
    if (have_query) {
        PyBuffer_Release(&query);
    }
    if (have_claim) {
        PyBuffer_Release(&claim);
    }
    Py_DECREF(seq);
    return found;
}

/* above() on x86-64 with AVX2: 64 rows' sums in eight registers of 8 floats while every direction's codes go by,
 * so each direction's cache line is read whole at once (the directions lie a multiple of 4 KiB apart when the
 * rows are, and so compete for the same few lines of the first-level cache). Written with intrinsics because
 * GCC 12 left every plain form of this loop scalar (a conversion per code). */
#ifdef HAVE_AVX2_PATH
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
    {"left_runs", left_runs, METH_VARARGS, left_runs_doc},
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
