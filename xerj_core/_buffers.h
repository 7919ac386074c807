/* Arrays through the buffer protocol, shared by the compiled loops that take numpy arrays of fixed-size items
 * (_termrank.c's grouping, store/_postpack.c's bucket layout). */
#ifndef XERJ_BUFFERS_H
#define XERJ_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A C-contiguous buffer of ``itemsize``-byte items, or a TypeError naming ``what``. */
static int get_items(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (view->itemsize != itemsize || view->len % itemsize) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous array of %zd-byte items", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#endif
