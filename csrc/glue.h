/*
 * glue.h -- helpers shared by the CPython glue modules (_core, _cuda).
 * Parse arguments, get exact-dtype contiguous arrays, map status codes to
 * exceptions.  No policy: dtype choice and conversions are the Python
 * layer's; the glue only refuses what it was not given exactly.
 */
#ifndef ACC_GLUE_H
#define ACC_GLUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef ACC_NUMPY_IMPORT
#define NO_IMPORT_ARRAY
#endif
#define PY_ARRAY_UNIQUE_SYMBOL ACC_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "accspmm.h"

/* Sets the Python exception for a negative status and returns NULL. */
PyObject *acc_py_raise(int status, const char *context);

/* Returns a new reference to obj when it is an ndarray of exactly `type`,
 * `ndim` dimensions, C-contiguous and aligned (and writeable when
 * `writeable`); otherwise sets TypeError/ValueError naming `name` and
 * returns NULL. len0 >= 0 also requires shape[0] == len0, len1 >= 0
 * shape[1] == len1. */
PyArrayObject *acc_py_array(PyObject *obj, int type, int ndim, npy_intp len0, npy_intp len1, int writeable,
                            const char *name);

/* NumPy type number of an acc_dtype, and back (-1 when unsupported). */
int acc_py_npy_type(acc_dtype dtype);
int acc_py_dtype_of(PyArrayObject *arr);

#endif /* ACC_GLUE_H */
