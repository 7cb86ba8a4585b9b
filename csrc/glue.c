/* glue.c -- shared CPython glue helpers (see glue.h). */
#include "glue.h"

PyObject *acc_py_raise(int status, const char *context) {
    PyObject *type;
    switch (status) {
    case ACC_ERR_OUT_OF_MEMORY:
    case ACC_ERR_DEVICE_MEMORY:
        type = PyExc_MemoryError;
        break;
    case ACC_ERR_NO_DEVICE:
    case ACC_ERR_CUDA:
    case ACC_ERR_CUSPARSE_LOAD:
    case ACC_ERR_CUSPARSE:
        type = PyExc_RuntimeError;
        break;
    case ACC_ERR_UNSUPPORTED:
        type = PyExc_NotImplementedError;
        break;
    default:
        type = PyExc_ValueError;
        break;
    }
    PyErr_Format(type, "%s: %s (status %d)", context, acc_status_string(status), status);
    return NULL;
}

PyArrayObject *acc_py_array(PyObject *obj, int type, int ndim, npy_intp len0, npy_intp len1, int writeable,
                            const char *name) {
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray", name);
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    if (PyArray_TYPE(arr) != type) {
        PyArray_Descr *want = PyArray_DescrFromType(type);
        PyErr_Format(PyExc_TypeError, "%s must have dtype %S, got %S", name, (PyObject *)want,
                     (PyObject *)PyArray_DESCR(arr));
        Py_XDECREF(want);
        return NULL;
    }
    if (PyArray_NDIM(arr) != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must be %d-dimensional, got %d dimensions", name, ndim,
                     PyArray_NDIM(arr));
        return NULL;
    }
    if (!PyArray_IS_C_CONTIGUOUS(arr) || !PyArray_ISALIGNED(arr)) {
        PyErr_Format(PyExc_ValueError, "%s must be C-contiguous and aligned", name);
        return NULL;
    }
    if (writeable && !PyArray_ISWRITEABLE(arr)) {
        PyErr_Format(PyExc_ValueError, "%s must be writeable", name);
        return NULL;
    }
    if ((len0 >= 0 && PyArray_DIM(arr, 0) != len0) ||
        (ndim > 1 && len1 >= 0 && PyArray_DIM(arr, 1) != len1)) {
        PyErr_Format(PyExc_ValueError, "%s has the wrong shape", name);
        return NULL;
    }
    Py_INCREF(arr);
    return arr;
}

int acc_py_npy_type(acc_dtype dtype) { return dtype == ACC_FLOAT64 ? NPY_FLOAT64 : NPY_FLOAT32; }

int acc_py_dtype_of(PyArrayObject *arr) {
    switch (PyArray_TYPE(arr)) {
    case NPY_FLOAT32:
        return ACC_FLOAT32;
    case NPY_FLOAT64:
        return ACC_FLOAT64;
    default:
        return -1;
    }
}
