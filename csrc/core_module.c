/*
 * core_module.c -- accspmm._core: CPython glue over the C core.
 *
 * Each function: parse arguments, take exact-dtype contiguous arrays (the
 * Python layer converts), fill the view structs, release the GIL around the
 * core call, map its status to an exception, build the result.  Outputs of
 * unknown size are made in two passes (count, allocate, fill).
 */
#define ACC_NUMPY_IMPORT
#include "glue.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Arrays held while a CSR view points into them. */
typedef struct csr_args {
    PyArrayObject *indptr, *indices, *data;
    acc_csr view;
} csr_args;

static void csr_args_release(csr_args *a) {
    Py_XDECREF(a->indptr);
    Py_XDECREF(a->indices);
    Py_XDECREF(a->data);
}

/* indptr int64 [m+1], indices int32 [*], data float32/64 [*] or None. */
static int csr_args_parse(csr_args *a, Py_ssize_t m, Py_ssize_t k, PyObject *indptr, PyObject *indices,
                          PyObject *data) {
    memset(a, 0, sizeof(*a));
    if (m < 0 || k < 0) {
        PyErr_SetString(PyExc_ValueError, "matrix dimensions must be non-negative");
        return -1;
    }
    if (k > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "A has more than 2**31-1 columns; not supported");
        return -1;
    }
    a->indptr = acc_py_array(indptr, NPY_INT64, 1, m + 1, -1, 0, "indptr");
    if (!a->indptr) return -1;
    a->indices = acc_py_array(indices, NPY_INT32, 1, -1, -1, 0, "indices");
    if (!a->indices) return -1;
    const int64_t *rp = PyArray_DATA(a->indptr);
    if (rp[m] < 0 || rp[m] > PyArray_DIM(a->indices, 0)) {
        PyErr_Format(PyExc_ValueError, "indptr[-1] = %lld does not match the %lld column indices",
                     (long long)rp[m], (long long)PyArray_DIM(a->indices, 0));
        return -1;
    }
    a->view.m = m;
    a->view.k = k;
    a->view.row_offsets = rp;
    a->view.column_indices = PyArray_DATA(a->indices);
    a->view.dtype = ACC_FLOAT32;
    if (data && data != Py_None) {
        if (!PyArray_Check(data) || acc_py_dtype_of((PyArrayObject *)data) < 0) {
            PyErr_SetString(PyExc_TypeError, "data must be a float32 or float64 numpy.ndarray");
            return -1;
        }
        a->view.dtype = (acc_dtype)acc_py_dtype_of((PyArrayObject *)data);
        a->data = acc_py_array(data, acc_py_npy_type(a->view.dtype), 1, -1, -1, 0, "data");
        if (!a->data) return -1;
        if (PyArray_DIM(a->data, 0) < rp[m]) {
            PyErr_SetString(PyExc_ValueError, "data is shorter than indptr[-1]");
            return -1;
        }
        a->view.values = PyArray_DATA(a->data);
    }
    return 0;
}

static PyObject *py_csr_check(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices;
    csr_args a;
    int canonical = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOO", &m, &k, &indptr, &indices)) return NULL;
    if (csr_args_parse(&a, m, k, indptr, indices, NULL) < 0) goto fail;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_csr_check(&a.view, &canonical);
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "invalid CSR matrix");
        goto fail;
    }
    csr_args_release(&a);
    return PyBool_FromLong(canonical);
fail:
    csr_args_release(&a);
    return NULL;
}

static PyObject *py_narrow_indices(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t k;
    (void)self;
    if (!PyArg_ParseTuple(args, "On", &obj, &k)) return NULL;
    PyArrayObject *in = acc_py_array(obj, NPY_INT64, 1, -1, -1, 0, "indices");
    if (!in) return NULL;
    npy_intp n = PyArray_DIM(in, 0);
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    if (!out) {
        Py_DECREF(in);
        return NULL;
    }
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_indices_narrow(PyArray_DATA(in), n, k, PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    Py_DECREF(in);
    if (st != ACC_SUCCESS) {
        Py_DECREF(out);
        return acc_py_raise(st, "invalid CSR matrix");
    }
    return (PyObject *)out;
}

static PyObject *py_csr_canonicalize(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *data;
    PyArrayObject *rp = NULL, *ci = NULL, *vals = NULL;
    csr_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOO", &m, &k, &indptr, &indices, &data)) return NULL;
    if (csr_args_parse(&a, m, k, indptr, indices, data) < 0) goto fail;
    if (!a.data) {
        PyErr_SetString(PyExc_TypeError, "data is required");
        goto fail;
    }
    npy_intp np1 = m + 1, nnz = a.view.row_offsets[m];
    rp = (PyArrayObject *)PyArray_SimpleNew(1, &np1, NPY_INT64);
    ci = (PyArrayObject *)PyArray_SimpleNew(1, &nnz, NPY_INT32);
    vals = (PyArrayObject *)PyArray_SimpleNew(1, &nnz, acc_py_npy_type(a.view.dtype));
    if (!rp || !ci || !vals) goto fail;
    int64_t nnz_out = 0;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_csr_canonicalize(&a.view, PyArray_DATA(rp), PyArray_DATA(ci), PyArray_DATA(vals), &nnz_out);
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "cannot canonicalize CSR matrix");
        goto fail;
    }
    csr_args_release(&a);
    PyObject *res = Py_BuildValue("(NNNn)", rp, ci, vals, (Py_ssize_t)nnz_out);
    return res;
fail:
    Py_XDECREF(rp);
    Py_XDECREF(ci);
    Py_XDECREF(vals);
    csr_args_release(&a);
    return NULL;
}

static PyObject *py_perm_check(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t m;
    (void)self;
    if (!PyArg_ParseTuple(args, "On", &obj, &m)) return NULL;
    PyArrayObject *perm = acc_py_array(obj, NPY_INT64, 1, m, -1, 0, "perm");
    if (!perm) return NULL;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_perm_check(PyArray_DATA(perm), m);
    Py_END_ALLOW_THREADS
    Py_DECREF(perm);
    if (st != ACC_SUCCESS) return acc_py_raise(st, "invalid row permutation");
    Py_RETURN_NONE;
}

/* B must be k x n and C m x n, both of A's dtype. */
static int dense_args(PyObject *Bobj, PyObject *Cobj, int64_t m, int64_t k, acc_dtype dtype,
                      PyArrayObject **B, PyArrayObject **C) {
    const int t = acc_py_npy_type(dtype);
    *B = acc_py_array(Bobj, t, 2, k, -1, 0, "B");
    if (!*B) return -1;
    *C = acc_py_array(Cobj, t, 2, m, PyArray_DIM(*B, 1), 1, "C");
    if (!*C) return -1;
    if (PyArray_DATA(*C) == PyArray_DATA(*B) && PyArray_NBYTES(*C) > 0) {
        PyErr_SetString(PyExc_ValueError, "C must not share memory with B");
        return -1;
    }
    return 0;
}

static PyObject *py_csr_spmm(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *data, *Bobj, *Cobj;
    PyArrayObject *B = NULL, *C = NULL;
    csr_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOOOO", &m, &k, &indptr, &indices, &data, &Bobj, &Cobj)) return NULL;
    if (csr_args_parse(&a, m, k, indptr, indices, data) < 0) goto fail;
    if (!a.data) {
        PyErr_SetString(PyExc_TypeError, "data is required");
        goto fail;
    }
    if (dense_args(Bobj, Cobj, m, k, a.view.dtype, &B, &C) < 0) goto fail;
    acc_status st = ACC_SUCCESS;
    Py_BEGIN_ALLOW_THREADS
    st = acc_csr_check(&a.view, NULL);
    if (st == ACC_SUCCESS) st = acc_csr_spmm(&a.view, PyArray_DATA(B), PyArray_DIM(B, 1), PyArray_DATA(C));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "CSR SpMM failed");
        goto fail;
    }
    Py_DECREF(B);
    Py_DECREF(C);
    csr_args_release(&a);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(B);
    Py_XDECREF(C);
    csr_args_release(&a);
    return NULL;
}

/* The format builders' precondition: a canonical CSR and a valid permutation of its rows. */
static acc_status check_canonical_perm(const acc_csr *A, const int64_t *perm) {
    int canonical = 0;
    acc_status st = acc_csr_check(A, &canonical);
    if (st == ACC_SUCCESS && !canonical) st = ACC_ERR_NOT_CANONICAL;
    return st == ACC_SUCCESS ? acc_perm_check(perm, A->m) : st;
}

static PyObject *py_bittcf_build(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *data, *permobj;
    PyArrayObject *perm = NULL, *wo = NULL, *cols = NULL, *mask = NULL, *vo = NULL, *vals = NULL;
    csr_args a;
    acc_status st;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOOO", &m, &k, &indptr, &indices, &data, &permobj)) return NULL;
    if (csr_args_parse(&a, m, k, indptr, indices, data) < 0) goto fail;
    if (!a.data) {
        PyErr_SetString(PyExc_TypeError, "data is required");
        goto fail;
    }
    perm = acc_py_array(permobj, NPY_INT64, 1, m, -1, 0, "perm");
    if (!perm) goto fail;
    npy_intp nw1 = (m + ACC_TILE - 1) / ACC_TILE + 1;
    wo = (PyArrayObject *)PyArray_SimpleNew(1, &nw1, NPY_INT64);
    if (!wo) goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = check_canonical_perm(&a.view, PyArray_DATA(perm));
    if (st == ACC_SUCCESS) st = acc_bittcf_count(&a.view, PyArray_DATA(perm), PyArray_DATA(wo));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "cannot build BitTCF");
        goto fail;
    }
    npy_intp nb = ((int64_t *)PyArray_DATA(wo))[nw1 - 1];
    npy_intp nb8 = nb * ACC_TILE, nb1 = nb + 1, nnz = a.view.row_offsets[m];
    cols = (PyArrayObject *)PyArray_SimpleNew(1, &nb8, NPY_INT32);
    mask = (PyArrayObject *)PyArray_SimpleNew(1, &nb, NPY_UINT64);
    vo = (PyArrayObject *)PyArray_SimpleNew(1, &nb1, NPY_INT64);
    vals = (PyArrayObject *)PyArray_SimpleNew(1, &nnz, acc_py_npy_type(a.view.dtype));
    if (!cols || !mask || !vo || !vals) goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = acc_bittcf_fill(&a.view, PyArray_DATA(perm), PyArray_DATA(wo), PyArray_DATA(cols),
                         PyArray_DATA(mask), PyArray_DATA(vo), PyArray_DATA(vals));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "cannot build BitTCF");
        goto fail;
    }
    Py_DECREF(perm);
    csr_args_release(&a);
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N}", "window_offsets", wo, "block_cols", cols, "block_mask",
                         mask, "block_value_offsets", vo, "values", vals);
fail:
    Py_XDECREF(perm);
    Py_XDECREF(wo);
    Py_XDECREF(cols);
    Py_XDECREF(mask);
    Py_XDECREF(vo);
    Py_XDECREF(vals);
    csr_args_release(&a);
    return NULL;
}

static int parse_half_format(int fmt) {
    if (fmt != ACC_HALF_FP16 && fmt != ACC_HALF_BF16) {
        PyErr_SetString(PyExc_ValueError, "half format must be 0 (fp16) or 1 (bf16)");
        return -1;
    }
    return 0;
}

static PyObject *py_half_round(PyObject *self, PyObject *args) {
    PyObject *obj;
    int fmt;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi", &obj, &fmt) || parse_half_format(fmt) < 0) return NULL;
    if (!PyArray_Check(obj) || acc_py_dtype_of((PyArrayObject *)obj) < 0) {
        PyErr_SetString(PyExc_TypeError, "half_round takes a float32 or float64 numpy.ndarray");
        return NULL;
    }
    const acc_dtype dt = (acc_dtype)acc_py_dtype_of((PyArrayObject *)obj);
    PyArrayObject *in = acc_py_array(obj, acc_py_npy_type(dt), 1, -1, -1, 0, "values");
    if (!in) return NULL;
    npy_intp n = PyArray_DIM(in, 0);
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_UINT16);
    if (!out) {
        Py_DECREF(in);
        return NULL;
    }
    int64_t bad = -1;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_half_round(PyArray_DATA(in), dt, n, (acc_half_format)fmt, PyArray_DATA(out), &bad);
    Py_END_ALLOW_THREADS
    Py_DECREF(in);
    if (st != ACC_SUCCESS) {
        Py_DECREF(out);
        return acc_py_raise(st, "half_round");
    }
    return Py_BuildValue("(NL)", out, (long long)bad);
}

static PyObject *py_half_widen(PyObject *self, PyObject *args) {
    PyObject *obj;
    int fmt;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi", &obj, &fmt) || parse_half_format(fmt) < 0) return NULL;
    PyArrayObject *in = acc_py_array(obj, NPY_UINT16, 1, -1, -1, 0, "half bits");
    if (!in) return NULL;
    npy_intp n = PyArray_DIM(in, 0);
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_FLOAT32);
    if (!out) {
        Py_DECREF(in);
        return NULL;
    }
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_half_widen(PyArray_DATA(in), n, (acc_half_format)fmt, PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    Py_DECREF(in);
    if (st != ACC_SUCCESS) {
        Py_DECREF(out);
        return acc_py_raise(st, "half_widen");
    }
    return (PyObject *)out;
}

/* BSR16 pass 1 (after the builders' precondition): brow_offsets as a new int64 array, or NULL with
 * the exception set. */
static PyArrayObject *bsr16_offsets(const acc_csr *A, PyArrayObject *perm) {
    npy_intp nr1 = (A->m + ACC_BSR - 1) / ACC_BSR + 1;
    PyArrayObject *bo = (PyArrayObject *)PyArray_SimpleNew(1, &nr1, NPY_INT64);
    if (!bo) return NULL;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = check_canonical_perm(A, PyArray_DATA(perm));
    if (st == ACC_SUCCESS) st = acc_bsr16_count(A, PyArray_DATA(perm), PyArray_DATA(bo));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        Py_DECREF(bo);
        acc_py_raise(st, "cannot build BSR16");
        return NULL;
    }
    return bo;
}

static PyObject *py_bsr16_build(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *hobj, *permobj;
    PyArrayObject *half = NULL, *perm = NULL, *bo = NULL, *cols = NULL, *vals = NULL, *masks = NULL;
    csr_args a;
    acc_status st;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOOO", &m, &k, &indptr, &indices, &hobj, &permobj)) return NULL;
    if (csr_args_parse(&a, m, k, indptr, indices, NULL) < 0) goto fail;
    half = acc_py_array(hobj, NPY_UINT16, 1, -1, -1, 0, "half values");
    perm = half ? acc_py_array(permobj, NPY_INT64, 1, m, -1, 0, "perm") : NULL;
    if (!perm) goto fail;
    if (PyArray_DIM(half, 0) < a.view.row_offsets[m]) {
        PyErr_SetString(PyExc_ValueError, "half values are shorter than indptr[-1]");
        goto fail;
    }
    bo = bsr16_offsets(&a.view, perm);
    if (!bo) goto fail;
    npy_intp nb = ((int64_t *)PyArray_DATA(bo))[PyArray_DIM(bo, 0) - 1], nv = nb * ACC_BSR * ACC_BSR,
             nm = 4 * nb;
    cols = (PyArrayObject *)PyArray_SimpleNew(1, &nb, NPY_INT32);
    vals = (PyArrayObject *)PyArray_SimpleNew(1, &nv, NPY_UINT16);
    masks = (PyArrayObject *)PyArray_SimpleNew(1, &nm, NPY_UINT64);
    if (!cols || !vals || !masks) goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = acc_bsr16_fill(&a.view, PyArray_DATA(half), PyArray_DATA(perm), PyArray_DATA(bo), PyArray_DATA(cols),
                        PyArray_DATA(vals), PyArray_DATA(masks));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "cannot build BSR16");
        goto fail;
    }
    Py_DECREF(half);
    Py_DECREF(perm);
    csr_args_release(&a);
    return Py_BuildValue("{s:N,s:N,s:N,s:N}", "brow_offsets", bo, "block_cols", cols, "block_values", vals,
                         "block_masks", masks);
fail:
    Py_XDECREF(half);
    Py_XDECREF(perm);
    Py_XDECREF(bo);
    Py_XDECREF(cols);
    Py_XDECREF(vals);
    Py_XDECREF(masks);
    csr_args_release(&a);
    return NULL;
}

static PyObject *py_bsr16_count(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *permobj;
    PyArrayObject *perm = NULL, *bo = NULL;
    csr_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOO", &m, &k, &indptr, &indices, &permobj)) return NULL;
    if (csr_args_parse(&a, m, k, indptr, indices, NULL) < 0) goto fail;
    perm = acc_py_array(permobj, NPY_INT64, 1, m, -1, 0, "perm");
    if (!perm) goto fail;
    bo = bsr16_offsets(&a.view, perm);
    if (!bo) goto fail;
    Py_DECREF(perm);
    csr_args_release(&a);
    return (PyObject *)bo;
fail:
    Py_XDECREF(perm);
    Py_XDECREF(bo);
    csr_args_release(&a);
    return NULL;
}

/* spgemm(mA, kA, indptrA, indicesA, dataA, n, indptrB, indicesB, dataB, drop_zeros, out_float64,
 *        b_canonical) -> (indptr, indices, data, products): C = A @ B (A and B of one dtype), columns
 * ascending per row.  b_canonical: -1 checks A and B here; 0/1 only from a caller that has just
 * validated both (accspmm._validate.as_csr) and knows whether B is canonical. */
static PyObject *py_spgemm(PyObject *self, PyObject *args) {
    Py_ssize_t m, k, n;
    PyObject *ipa, *ixa, *va, *ipb, *ixb, *vb;
    int drop, f64, b_canonical;
    csr_args a, b;
    PyArrayObject *rp = NULL, *cols = NULL, *vals = NULL;
    acc_spgemm_state *state = NULL;
    memset(&b, 0, sizeof b);
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOOnOOOppi", &m, &k, &ipa, &ixa, &va, &n, &ipb, &ixb, &vb, &drop, &f64,
                          &b_canonical))
        return NULL;
    if (csr_args_parse(&a, m, k, ipa, ixa, va) < 0 || csr_args_parse(&b, k, n, ipb, ixb, vb) < 0) goto fail;
    if (!a.data || !b.data || a.view.dtype != b.view.dtype) {
        PyErr_SetString(PyExc_TypeError, "spgemm needs the values of A and B, of one dtype");
        goto fail;
    }
    const acc_dtype odt = f64 ? ACC_FLOAT64 : ACC_FLOAT32;
    int64_t nnz = 0, products = 0;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_spgemm_compute(&a.view, &b.view, drop, b_canonical, odt, &state, &nnz, &products);
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "spgemm");
        goto fail;
    }
    npy_intp m1 = m + 1, total = nnz;
    rp = (PyArrayObject *)PyArray_SimpleNew(1, &m1, NPY_INT64);
    cols = (PyArrayObject *)PyArray_SimpleNew(1, &total, NPY_INT32);
    vals = (PyArrayObject *)PyArray_SimpleNew(1, &total, acc_py_npy_type(odt));
    if (!rp || !cols || !vals) goto fail;
    int64_t kept = 0;
    Py_BEGIN_ALLOW_THREADS
    st = acc_spgemm_fill(state, PyArray_DATA(rp), PyArray_DATA(cols), PyArray_DATA(vals), &kept);
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "spgemm");
        goto fail;
    }
    if (kept < nnz) { /* exact zeros dropped: the arrays shrink to the kept entries */
        npy_intp len = kept;
        PyArray_Dims shape = {&len, 1};
        PyObject *r1 = PyArray_Resize(cols, &shape, 0, NPY_CORDER);
        Py_XDECREF(r1);
        PyObject *r2 = r1 ? PyArray_Resize(vals, &shape, 0, NPY_CORDER) : NULL;
        Py_XDECREF(r2);
        if (!r2) goto fail;
    }
    acc_spgemm_free(state);
    csr_args_release(&a);
    csr_args_release(&b);
    return Py_BuildValue("(NNNL)", rp, cols, vals, (long long)products);
fail:
    acc_spgemm_free(state);
    Py_XDECREF(rp);
    Py_XDECREF(cols);
    Py_XDECREF(vals);
    csr_args_release(&a);
    csr_args_release(&b);
    return NULL;
}

/* Arrays held while a BitTCF view points into them; read from the
 * attributes of a Python format object (accspmm.BitTCF). */
#define BITTCF_NARRAYS 6
typedef struct bittcf_args {
    PyArrayObject *arr[BITTCF_NARRAYS];
    acc_bittcf view;
} bittcf_args;

static void bittcf_args_release(bittcf_args *a) {
    for (int i = 0; i < BITTCF_NARRAYS; i++)
        Py_XDECREF(a->arr[i]);
}

static int bittcf_args_parse(bittcf_args *a, PyObject *fmt) {
    static const char *names[BITTCF_NARRAYS] = {"perm",       "window_offsets",      "block_cols",
                                                "block_mask", "block_value_offsets", "values"};
    static const int types[BITTCF_NARRAYS] = {NPY_INT64, NPY_INT64, NPY_INT32, NPY_UINT64, NPY_INT64, -1};
    memset(a, 0, sizeof(*a));
    PyObject *shape = PyObject_GetAttrString(fmt, "shape");
    if (!shape) return -1;
    Py_ssize_t m, k;
    int ok = PyArg_ParseTuple(shape, "nn", &m, &k);
    Py_DECREF(shape);
    if (!ok) return -1;
    for (int i = 0; i < BITTCF_NARRAYS; i++) {
        PyObject *obj = PyObject_GetAttrString(fmt, names[i]);
        if (!obj) return -1;
        int t = types[i];
        if (t < 0) {
            int d = PyArray_Check(obj) ? acc_py_dtype_of((PyArrayObject *)obj) : -1;
            t = d < 0 ? NPY_FLOAT32 : acc_py_npy_type((acc_dtype)d);
            a->view.dtype = d < 0 ? ACC_FLOAT32 : (acc_dtype)d;
        }
        a->arr[i] = acc_py_array(obj, t, 1, -1, -1, 0, names[i]);
        Py_DECREF(obj);
        if (!a->arr[i]) return -1;
    }
    a->view.m = m;
    a->view.k = k;
    a->view.num_windows = (m + ACC_TILE - 1) / ACC_TILE;
    a->view.perm = PyArray_DATA(a->arr[0]);
    a->view.window_offsets = PyArray_DATA(a->arr[1]);
    a->view.block_cols = PyArray_DATA(a->arr[2]);
    a->view.block_mask = PyArray_DATA(a->arr[3]);
    a->view.block_value_offsets = PyArray_DATA(a->arr[4]);
    a->view.values = PyArray_DATA(a->arr[5]);
    const npy_intp nb = PyArray_DIM(a->arr[3], 0);
    a->view.num_blocks = nb;
    a->view.nnz = PyArray_DIM(a->arr[5], 0);
    if (m < 0 || k < 0 || PyArray_DIM(a->arr[0], 0) != m ||
        PyArray_DIM(a->arr[1], 0) != a->view.num_windows + 1 || PyArray_DIM(a->arr[2], 0) != nb * ACC_TILE ||
        PyArray_DIM(a->arr[4], 0) != nb + 1) {
        PyErr_SetString(PyExc_ValueError, "BitTCF arrays have inconsistent lengths");
        return -1;
    }
    return 0;
}

/* The Python dict of a BitTCF's statistics. */
static PyObject *stats_dict(const acc_bittcf_stats *s) {
    return Py_BuildValue("{s:L,s:L,s:L,s:d,s:d,s:L,s:d,s:d,s:L,s:L}", "tc_blocks", (long long)s->num_blocks,
                         "windows", (long long)s->num_windows, "empty_windows", (long long)s->empty_windows,
                         "mean_nnz_tc", s->mean_nnz_per_block, "blocks_per_window_mean",
                         s->blocks_per_window_mean, "blocks_per_window_max",
                         (long long)s->blocks_per_window_max, "blocks_per_window_std",
                         s->blocks_per_window_std, "imbalance_degree", s->imbalance_degree, "bytes",
                         (long long)s->bytes, "csr_bytes", (long long)s->csr_bytes);
}

static PyObject *py_bittcf_stats(PyObject *self, PyObject *fmt) {
    bittcf_args a;
    acc_bittcf_stats s;
    (void)self;
    if (bittcf_args_parse(&a, fmt) < 0) {
        bittcf_args_release(&a);
        return NULL;
    }
    acc_status st = acc_bittcf_check(&a.view);
    if (st == ACC_SUCCESS) st = acc_bittcf_get_stats(&a.view, &s);
    bittcf_args_release(&a);
    if (st != ACC_SUCCESS) return acc_py_raise(st, "invalid BitTCF");
    return stats_dict(&s);
}

static PyObject *py_bittcf_spmm(PyObject *self, PyObject *args) {
    PyObject *fmt, *Bobj, *Cobj;
    PyArrayObject *B = NULL, *C = NULL;
    bittcf_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &fmt, &Bobj, &Cobj)) return NULL;
    if (bittcf_args_parse(&a, fmt) < 0) goto fail;
    if (dense_args(Bobj, Cobj, a.view.m, a.view.k, a.view.dtype, &B, &C) < 0) goto fail;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_bittcf_check(&a.view);
    if (st == ACC_SUCCESS) st = acc_bittcf_spmm(&a.view, PyArray_DATA(B), PyArray_DIM(B, 1), PyArray_DATA(C));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "BitTCF SpMM failed");
        goto fail;
    }
    Py_DECREF(B);
    Py_DECREF(C);
    bittcf_args_release(&a);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(B);
    Py_XDECREF(C);
    bittcf_args_release(&a);
    return NULL;
}

/* Parses (m, k, indptr, indices) of a canonical pattern and an optional
 * writeable int64[2] progress array (None allowed). */
static int pattern_args(csr_args *a, Py_ssize_t m, Py_ssize_t k, PyObject *indptr, PyObject *indices,
                        PyObject *progobj, PyArrayObject **progress) {
    *progress = NULL;
    if (csr_args_parse(a, m, k, indptr, indices, NULL) < 0) return -1;
    if (progobj && progobj != Py_None) {
        *progress = acc_py_array(progobj, NPY_INT64, 1, 2, -1, 1, "progress");
        if (!*progress) return -1;
    }
    int canonical = 0;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_csr_check(&a->view, &canonical);
    Py_END_ALLOW_THREADS
    if (st == ACC_SUCCESS && !canonical) st = ACC_ERR_NOT_CANONICAL;
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "cannot reorder");
        return -1;
    }
    return 0;
}

/* Runs one reordering with the GIL released and returns perm. */
typedef acc_status (*reorder_fn)(const acc_csr *A, const void *params, int64_t *perm, int64_t *progress);

static acc_status run_degree(const acc_csr *A, const void *params, int64_t *perm, int64_t *progress) {
    (void)params;
    (void)progress;
    return acc_reorder_degree(A, perm);
}
static acc_status run_rcm(const acc_csr *A, const void *params, int64_t *perm, int64_t *progress) {
    (void)progress;
    return acc_reorder_rcm(A, params, perm);
}
typedef struct affinity_call {
    acc_affinity_params params;
    double *seconds; /* NULL or ACC_AFFINITY_PHASES */
} affinity_call;
static acc_status run_affinity(const acc_csr *A, const void *call, int64_t *perm, int64_t *progress) {
    const affinity_call *c = call;
    return acc_reorder_affinity(A, &c->params, perm, progress, c->seconds);
}
static acc_status run_jaccard(const acc_csr *A, const void *params, int64_t *perm, int64_t *progress) {
    return acc_reorder_jaccard(A, params, perm, progress);
}

static PyObject *reorder_common(Py_ssize_t m, Py_ssize_t k, PyObject *indptr, PyObject *indices,
                                PyObject *progobj, reorder_fn fn, const void *params) {
    csr_args a;
    PyArrayObject *progress = NULL, *perm = NULL;
    if (pattern_args(&a, m, k, indptr, indices, progobj, &progress) < 0) goto fail;
    npy_intp len = m;
    perm = (PyArrayObject *)PyArray_SimpleNew(1, &len, NPY_INT64);
    if (!perm) goto fail;
    acc_status st;
    int64_t *pr = progress ? PyArray_DATA(progress) : NULL;
    Py_BEGIN_ALLOW_THREADS
    st = fn(&a.view, params, PyArray_DATA(perm), pr);
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "reordering failed");
        goto fail;
    }
    Py_XDECREF(progress);
    csr_args_release(&a);
    return (PyObject *)perm;
fail:
    Py_XDECREF(perm);
    Py_XDECREF(progress);
    csr_args_release(&a);
    return NULL;
}

static PyObject *py_reorder_degree(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOO", &m, &k, &indptr, &indices)) return NULL;
    return reorder_common(m, k, indptr, indices, NULL, run_degree, NULL);
}

static PyObject *py_reorder_rcm(PyObject *self, PyObject *args) {
    Py_ssize_t m;
    PyObject *indptr, *indices, *seedobj;
    (void)self;
    if (!PyArg_ParseTuple(args, "nOOO", &m, &indptr, &indices, &seedobj)) return NULL;
    PyArrayObject *seeds = acc_py_array(seedobj, NPY_INT64, 1, m, -1, 0, "seeds");
    if (!seeds) return NULL;
    PyObject *perm = reorder_common(m, m, indptr, indices, NULL, run_rcm, PyArray_DATA(seeds));
    Py_DECREF(seeds);
    return perm;
}

static PyObject *py_reorder_affinity(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *progobj, *secobj;
    unsigned long long seed;
    long long max_scan;
    int community;
    double max_community;
    long long chunk_nnz, part_edges;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOKLidLLOO", &m, &k, &indptr, &indices, &seed, &max_scan, &community,
                          &max_community, &chunk_nnz, &part_edges, &progobj, &secobj))
        return NULL;
    PyArrayObject *sec = NULL;
    if (secobj != Py_None) {
        sec = acc_py_array(secobj, NPY_FLOAT64, 1, ACC_AFFINITY_PHASES, -1, 1, "seconds");
        if (!sec) return NULL;
    }
    const affinity_call c = {{seed, max_scan, community, max_community, chunk_nnz, part_edges},
                             sec ? PyArray_DATA(sec) : NULL};
    PyObject *perm = reorder_common(m, k, indptr, indices, progobj, run_affinity, &c);
    Py_XDECREF(sec);
    return perm;
}

static PyObject *py_reorder_jaccard(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *progobj;
    unsigned long long seed;
    double tau;
    long long block_width, max_candidates;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOKdLLO", &m, &k, &indptr, &indices, &seed, &tau, &block_width,
                          &max_candidates, &progobj))
        return NULL;
    const acc_jaccard_params p = {seed, tau, block_width, max_candidates};
    return reorder_common(m, k, indptr, indices, progobj, run_jaccard, &p);
}

/* BitTCF statistics of A under perm without building the format (count
 * pass only).  value_size: bytes per value for the byte counts. */
static PyObject *py_bittcf_count_stats(PyObject *self, PyObject *args) {
    Py_ssize_t m, k;
    PyObject *indptr, *indices, *permobj;
    int f64;
    csr_args a;
    PyArrayObject *perm = NULL, *progress = NULL;
    int64_t *wo = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnOOOp", &m, &k, &indptr, &indices, &permobj, &f64)) return NULL;
    if (pattern_args(&a, m, k, indptr, indices, NULL, &progress) < 0) goto fail;
    perm = acc_py_array(permobj, NPY_INT64, 1, m, -1, 0, "perm");
    if (!perm) goto fail;
    const int64_t W = (m + ACC_TILE - 1) / ACC_TILE;
    wo = malloc((size_t)(W + 1) * sizeof(int64_t));
    if (!wo) {
        PyErr_NoMemory();
        goto fail;
    }
    acc_bittcf_stats s;
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_perm_check(PyArray_DATA(perm), m);
    if (st == ACC_SUCCESS) st = acc_bittcf_count(&a.view, PyArray_DATA(perm), wo);
    if (st == ACC_SUCCESS) {
        const acc_bittcf F = {m,    k,    W,    wo[W], a.view.row_offsets[m],          PyArray_DATA(perm), wo,
                              NULL, NULL, NULL, NULL,  f64 ? ACC_FLOAT64 : ACC_FLOAT32};
        st = acc_bittcf_get_stats(&F, &s);
    }
    Py_END_ALLOW_THREADS
    free(wo);
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "cannot count TC blocks");
        goto fail;
    }
    Py_DECREF(perm);
    csr_args_release(&a);
    return stats_dict(&s);
fail:
    Py_XDECREF(perm);
    csr_args_release(&a);
    return NULL;
}

/* BitTCF statistics from its window offsets alone (a format built on the GPU):
 * bittcf_window_stats(m, k, nnz, window_offsets, float64) -> stats dict. */
static PyObject *py_bittcf_window_stats(PyObject *self, PyObject *args) {
    Py_ssize_t m, k, nnz;
    PyObject *woobj;
    int f64;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnnOp", &m, &k, &nnz, &woobj, &f64)) return NULL;
    const int64_t W = (m + ACC_TILE - 1) / ACC_TILE;
    PyArrayObject *wo = acc_py_array(woobj, NPY_INT64, 1, W + 1, -1, 0, "window_offsets");
    if (!wo) return NULL;
    const int64_t *w = PyArray_DATA(wo);
    const acc_bittcf F = {m, k,    W,    w[W], nnz,  NULL,
                          w, NULL, NULL, NULL, NULL, f64 ? ACC_FLOAT64 : ACC_FLOAT32};
    acc_bittcf_stats st;
    acc_status status = acc_bittcf_get_stats(&F, &st);
    Py_DECREF(wo);
    if (status != ACC_SUCCESS) return acc_py_raise(status, "cannot compute BitTCF statistics");
    return stats_dict(&st);
}

/* schedule_cost(window_offsets, cap, warps, (WB, FILL, REDUCE, TASK, MERGE)) -> (sum, max, ntasks) */
/* window_offsets (int64, 1-D, >= 1 entry) and the model constants of the
 * schedule calls; returns the window count or -1 with an exception set. */
static int64_t schedule_args(PyObject *woobj, PyArrayObject **wo) {
    *wo = acc_py_array(woobj, NPY_INT64, 1, -1, -1, 0, "window_offsets");
    if (!*wo) return -1;
    const int64_t W = PyArray_DIM(*wo, 0) - 1;
    if (W < 0) {
        Py_CLEAR(*wo);
        PyErr_SetString(PyExc_ValueError, "window_offsets needs at least one entry");
    }
    return W;
}

static PyObject *py_schedule_build(PyObject *self, PyObject *args) {
    PyObject *woobj;
    long long cap, hint = -1;
    int warps;
    double c[5], sum = 0.0, max = 0.0;
    int64_t ntasks = 0, counts[3] = {0, 0, 0};
    PyArrayObject *wo = NULL, *tasks = NULL, *cost = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLi(ddddd)|L", &woobj, &cap, &warps, &c[0], &c[1], &c[2], &c[3], &c[4],
                          &hint))
        return NULL;
    const int64_t W = schedule_args(woobj, &wo);
    if (W < 0) return NULL;
    acc_status st = ACC_SUCCESS;
    /* the task count: the caller's (schedule_costs of the same offsets and cap counted it) or a
     * costs-only pass; the build checks that it made exactly that many rows */
    if (hint >= 0) {
        ntasks = hint;
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = acc_schedule_cost(PyArray_DATA(wo), W, cap, warps, c, &sum, &max, &ntasks);
        Py_END_ALLOW_THREADS
    }
    if (st != ACC_SUCCESS) goto fail;
    npy_intp dims[2] = {ntasks, 1 + 2 * (npy_intp)warps};
    tasks = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_INT32);
    cost = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    if (!tasks || !cost) goto fail;
    const int64_t capacity = ntasks;
    Py_BEGIN_ALLOW_THREADS
    if (ntasks >= 65536) { /* fresh pages mapped by the core's threads, not one by one by the pass */
        acc_prefault(PyArray_DATA(tasks), (size_t)PyArray_NBYTES(tasks));
        acc_prefault(PyArray_DATA(cost), (size_t)PyArray_NBYTES(cost));
    }
    st = acc_schedule_build(PyArray_DATA(wo), W, cap, warps, c, PyArray_DATA(tasks), PyArray_DATA(cost),
                            capacity, &sum, &max, &ntasks, counts);
    Py_END_ALLOW_THREADS
    /* a wrong count given: fewer rows built than allocated, or more (the build stopped writing) */
    if ((st == ACC_SUCCESS || hint >= 0) && ntasks != capacity) {
        PyErr_Format(PyExc_ValueError, "schedule_build: the schedule has %lld tasks, not the %lld given",
                     (long long)ntasks, (long long)capacity);
        goto fail;
    }
    if (st != ACC_SUCCESS) goto fail;
    Py_DECREF(wo);
    return Py_BuildValue("(NN(LLL))", (PyObject *)tasks, (PyObject *)cost, (long long)counts[0],
                         (long long)counts[1], (long long)counts[2]);
fail:
    if (st != ACC_SUCCESS && !PyErr_Occurred()) acc_py_raise(st, "schedule");
    Py_XDECREF(wo);
    Py_XDECREF(tasks);
    Py_XDECREF(cost);
    return NULL;
}

static PyObject *py_schedule_costs(PyObject *self, PyObject *args) {
    PyObject *woobj, *capsobj;
    int warps;
    double c[5];
    PyArrayObject *wo = NULL, *caps = NULL, *sums = NULL, *maxes = NULL, *ntasks = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOi(ddddd)", &woobj, &capsobj, &warps, &c[0], &c[1], &c[2], &c[3], &c[4]))
        return NULL;
    const int64_t W = schedule_args(woobj, &wo);
    if (W < 0) return NULL;
    acc_status st = ACC_SUCCESS;
    caps = acc_py_array(capsobj, NPY_INT64, 1, -1, -1, 0, "caps");
    if (!caps) goto fail;
    npy_intp n = PyArray_DIM(caps, 0);
    sums = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    maxes = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    ntasks = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    if (!sums || !maxes || !ntasks) goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = acc_schedule_costs(PyArray_DATA(wo), W, PyArray_DATA(caps), n, warps, c, PyArray_DATA(sums),
                            PyArray_DATA(maxes), PyArray_DATA(ntasks));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) goto fail;
    Py_DECREF(wo);
    Py_DECREF(caps);
    return Py_BuildValue("(NNN)", (PyObject *)sums, (PyObject *)maxes, (PyObject *)ntasks);
fail:
    if (st != ACC_SUCCESS && !PyErr_Occurred()) acc_py_raise(st, "schedule costs");
    Py_XDECREF(wo);
    Py_XDECREF(caps);
    Py_XDECREF(sums);
    Py_XDECREF(maxes);
    Py_XDECREF(ntasks);
    return NULL;
}

/* csr_long_parts(offsets: int64 [m + 1], long, part[, count[, parts]]) -> int64 [4 P] (acc_csr_long_parts);
 * with count=True (rows, parts, longest row) instead (acc_csr_long_count), no records; parts >= 0: the
 * records of that many parts, as a count of the same offsets gave (not counted again; ValueError where the
 * offsets make another number). */
static PyObject *py_csr_long_parts(PyObject *self, PyObject *args) {
    PyObject *oobj;
    long long long_len, part, known = -1;
    int count = 0;
    PyArrayObject *off = NULL, *out = NULL;
    int64_t rows = 0, parts = 0, longest = 0;
    acc_status st = ACC_SUCCESS;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLL|pL", &oobj, &long_len, &part, &count, &known)) return NULL;
    off = acc_py_array(oobj, NPY_INT64, 1, -1, -1, 0, "offsets");
    if (!off) return NULL;
    const int64_t m = PyArray_DIM(off, 0) - 1;
    if (m < 0) {
        PyErr_SetString(PyExc_ValueError, "csr_long_parts: offsets must hold m + 1 >= 1 entries");
        goto fail;
    }
    if (count || known < 0) {
        Py_BEGIN_ALLOW_THREADS
        st = acc_csr_long_count(PyArray_DATA(off), m, long_len, part, &rows, &parts, &longest);
        Py_END_ALLOW_THREADS
    } else if (long_len < 0 || part <= 0) {
        st = ACC_ERR_INVALID_ARGUMENT;
    } else {
        parts = known;
    }
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "csr_long_parts (long >= 0, part > 0)");
        goto fail;
    }
    if (count) {
        Py_DECREF(off);
        return Py_BuildValue("(LLL)", (long long)rows, (long long)parts, (long long)longest);
    }
    npy_intp n = (npy_intp)(4 * parts);
    out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    if (!out) goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = acc_csr_long_parts(PyArray_DATA(off), m, long_len, part, PyArray_DATA(out), parts);
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "csr_long_parts (the offsets make another number of parts)");
        goto fail;
    }
    Py_DECREF(off);
    return (PyObject *)out;
fail:
    Py_XDECREF(off);
    Py_XDECREF(out);
    return NULL;
}

/* lpt_rows(tasks: int32 [T, w], cost: float64 [T]) -> the rows in the order "longest predicted task
 * first" (stable: ties keep their order), a new array; lpt_order(cost) -> that order, int64 [T]. */
static PyObject *py_lpt_rows(PyObject *self, PyObject *args) {
    PyObject *tobj, *cobj;
    PyArrayObject *tasks = NULL, *cost = NULL, *out = NULL;
    acc_status st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &tobj, &cobj)) return NULL;
    tasks = acc_py_array(tobj, NPY_INT32, 2, -1, -1, 0, "tasks");
    if (!tasks) return NULL;
    const npy_intp T = PyArray_DIM(tasks, 0);
    cost = acc_py_array(cobj, NPY_FLOAT64, 1, T, -1, 0, "cost");
    if (!cost) goto fail;
    out = (PyArrayObject *)PyArray_SimpleNew(2, PyArray_DIMS(tasks), NPY_INT32);
    if (!out) goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = acc_lpt_rows(PyArray_DATA(tasks), T, PyArray_DIM(tasks, 1), PyArray_DATA(cost), PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    if (st != ACC_SUCCESS) {
        acc_py_raise(st, "lpt_rows (a NaN cost?)");
        goto fail;
    }
    Py_DECREF(tasks);
    Py_DECREF(cost);
    return (PyObject *)out;
fail:
    Py_XDECREF(tasks);
    Py_XDECREF(cost);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *py_lpt_order(PyObject *self, PyObject *arg) {
    (void)self;
    PyArrayObject *cost = acc_py_array(arg, NPY_FLOAT64, 1, -1, -1, 0, "cost");
    if (!cost) return NULL;
    npy_intp T = PyArray_DIM(cost, 0);
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &T, NPY_INT64);
    if (!out) {
        Py_DECREF(cost);
        return NULL;
    }
    acc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_lpt_order(PyArray_DATA(cost), T, PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    Py_DECREF(cost);
    if (st != ACC_SUCCESS) {
        Py_DECREF(out);
        return acc_py_raise(st, "lpt_order (a NaN cost?)");
    }
    return (PyObject *)out;
}

/* prefault(array): maps every page of a fresh (np.empty) writeable C-contiguous array in parallel;
 * its contents are undefined afterwards.  For large device-to-host copies. */
static PyObject *py_prefault(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyArray_Check(arg) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)arg) ||
        !PyArray_ISWRITEABLE((PyArrayObject *)arg)) {
        PyErr_SetString(PyExc_TypeError, "prefault needs a writeable C-contiguous ndarray");
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    void *data = PyArray_DATA(a);
    const size_t bytes = (size_t)PyArray_NBYTES(a);
    Py_BEGIN_ALLOW_THREADS
    acc_prefault(data, bytes);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_num_threads(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
#ifdef _OPENMP
    return PyLong_FromLong(omp_get_max_threads());
#else
    return PyLong_FromLong(1);
#endif
}

static PyMethodDef core_methods[] = {
    {"csr_check", py_csr_check, METH_VARARGS,
     "csr_check(m, k, indptr:int64, indices:int32) -> bool canonical; raises ValueError"},
    {"narrow_indices", py_narrow_indices, METH_VARARGS,
     "narrow_indices(indices:int64, k) -> int32 copy; raises ValueError when out of range"},
    {"csr_canonicalize", py_csr_canonicalize, METH_VARARGS,
     "csr_canonicalize(m, k, indptr, indices, data) -> (indptr, indices, data, nnz)"},
    {"perm_check", py_perm_check, METH_VARARGS, "perm_check(perm:int64, m)"},
    {"csr_spmm", py_csr_spmm, METH_VARARGS, "csr_spmm(m, k, indptr, indices, data, B, C): C = A @ B"},
    {"bittcf_build", py_bittcf_build, METH_VARARGS,
     "bittcf_build(m, k, indptr, indices, data, perm) -> dict of BitTCF arrays"},
    {"half_round", py_half_round, METH_VARARGS,
     "half_round(values:float32/64, fmt) -> (uint16 bits, index of the first out-of-range value or -1)"},
    {"half_widen", py_half_widen, METH_VARARGS, "half_widen(bits:uint16, fmt) -> float32 (exact)"},
    {"spgemm", py_spgemm, METH_VARARGS,
     "spgemm(m, k, indptrA, indicesA, dataA, n, indptrB, indicesB, dataB, drop_zeros, float64) -> "
     "(indptr, indices, data, products): C = A @ B on the CPU"},
    {"bsr16_count", py_bsr16_count, METH_VARARGS,
     "bsr16_count(m, k, indptr, indices, perm) -> brow_offsets (BSR16 blocks per block row, prefix sums)"},
    {"bsr16_build", py_bsr16_build, METH_VARARGS,
     "bsr16_build(m, k, indptr, indices, half_values:uint16, perm) -> dict of BSR16 arrays"},
    {"bittcf_stats", py_bittcf_stats, METH_O, "bittcf_stats(fmt) -> dict"},
    {"bittcf_spmm", py_bittcf_spmm, METH_VARARGS, "bittcf_spmm(fmt, B, C): C = A @ B"},
    {"reorder_degree", py_reorder_degree, METH_VARARGS,
     "reorder_degree(m, k, indptr, indices) -> perm (rows by nnz, descending)"},
    {"reorder_rcm", py_reorder_rcm, METH_VARARGS,
     "reorder_rcm(n, indptr, indices, seeds) -> perm (reverse Cuthill-McKee of a square pattern)"},
    {"reorder_affinity", py_reorder_affinity, METH_VARARGS,
     "reorder_affinity(m, k, indptr, indices, seed, max_scan, community, max_community, chunk_nnz, "
     "part_edges, progress, seconds) "
     "-> perm"},
    {"reorder_jaccard", py_reorder_jaccard, METH_VARARGS,
     "reorder_jaccard(m, k, indptr, indices, seed, tau, block_width, max_candidates, progress) -> perm"},
    {"schedule_build", py_schedule_build, METH_VARARGS,
     "schedule_build(window_offsets, cap, warps, (WB, FILL, REDUCE, TASK, MERGE)[, ntasks]) -> "
     "(tasks int32 [T, 1 + 2 warps], task_cost float64 [T], (workspace slots, multi-part splits, windows of "
     "more than cap blocks)); ntasks: the schedule's task count, known from schedule_costs (checked)"},
    {"schedule_costs", py_schedule_costs, METH_VARARGS,
     "schedule_costs(window_offsets, caps:int64, warps, (WB, FILL, REDUCE, TASK, MERGE)) -> (sums, maxes, "
     "ntasks) per cap"},
    {"bittcf_window_stats", py_bittcf_window_stats, METH_VARARGS,
     "bittcf_window_stats(m, k, nnz, window_offsets, float64) -> stats dict"},
    {"bittcf_count_stats", py_bittcf_count_stats, METH_VARARGS,
     "bittcf_count_stats(m, k, indptr, indices, perm, float64) -> stats dict (no format built)"},
    {"csr_long_parts", py_csr_long_parts, METH_VARARGS,
     "csr_long_parts(offsets int64 [m+1], long, part[, count]) -> int64 [4 P]: the CSR kernels' parts of the "
     "rows "
     "of more than long entries (row, first, end, j | parts << 32); count=True: (long rows, parts, longest "
     "row)"},
    {"lpt_rows", py_lpt_rows, METH_VARARGS,
     "lpt_rows(tasks int32 [T, w], cost float64 [T]) -> the rows, longest predicted task first (stable)"},
    {"lpt_order", py_lpt_order, METH_O,
     "lpt_order(cost float64 [T]) -> int64 order, cost descending (stable)"},
    {"num_threads", py_num_threads, METH_NOARGS, "OpenMP threads the core uses"},
    {"prefault", py_prefault, METH_O,
     "prefault(array): map a fresh array's pages in parallel (contents undefined)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "accspmm._core", "accspmm C core (CPU)", -1, core_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void) {
    import_array();
    return PyModule_Create(&core_module);
}
