/* The hash table _termrank.c and _wordcount.c share: terms (byte runs of a buffer) numbered by first occurrence.
 *
 * Open addressing with linear probing over int32 slots, each 0 (empty) or 1 + a term's number; the terms live in
 * the caller's array of records that begin with a Term, ``stride`` bytes apart. A caller keeps the load at most
 * one half: it sizes the table for every term it may meet, or grows it (term_table_grow) as terms are added. */
#ifndef XERJ_TERMTABLE_H
#define XERJ_TERMTABLE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *data;
    Py_ssize_t len;
} Term;

/* FNV-1a over the term's bytes, then a final mix: terms are short, so a per-byte loop is cheap and reads nothing
 * past the end. */
static uint64_t term_hash(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
}

/* Slots for ``terms`` terms at a load of at most one half (a power of two). */
static size_t term_slots(Py_ssize_t terms) {
    size_t slots = 16;
    while (slots < (size_t)terms * 2) {
        slots <<= 1;
    }
    return slots;
}

/* The number of the term ``s[0:len]`` among the ``*count`` terms of ``records`` (a Term at the start of each
 * record, ``stride`` bytes apart); when it is not there, the number it is to take (``*count``), with ``*added``
 * set: the caller then fills that record and the count is already one more. */
static int32_t term_number(int32_t *table, size_t slots, void *records, size_t stride, int32_t *count,
                           const unsigned char *s, Py_ssize_t len, int *added) {
    size_t mask = slots - 1, at = (size_t)term_hash(s, len) & mask;
    for (;;) {
        int32_t held = table[at];
        if (!held) {
            table[at] = ++*count;
            *added = 1;
            return *count - 1;
        }
        const Term *t = (const Term *)((const char *)records + (size_t)(held - 1) * stride);
        if (t->len == len && (len == 0 || memcmp(t->data, s, (size_t)len) == 0)) {
            *added = 0;
            return held - 1;
        }
        at = (at + 1) & mask;
    }
}

/* The table of ``*slots`` slots holding ``count`` terms of ``records`` doubled in place (``*table`` and ``*slots``
 * replaced): 0, or -1 when it cannot be made (the old table is kept). */
static inline int term_table_grow(int32_t **table, size_t *slots, const void *records, size_t stride, int32_t count) {
    size_t grown = *slots * 2, mask = grown - 1;
    int32_t *fresh = calloc(grown, sizeof(int32_t));
    if (fresh == NULL) {
        return -1;
    }
    for (int32_t k = 0; k < count; k++) {
        const Term *t = (const Term *)((const char *)records + (size_t)k * stride);
        size_t at = (size_t)term_hash(t->data, t->len) & mask;
        while (fresh[at]) {
            at = (at + 1) & mask;
        }
        fresh[at] = k + 1;
    }
    free(*table);
    *table = fresh;
    *slots = grown;
    return 0;
}

#endif
