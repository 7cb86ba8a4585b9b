/*
 * cuda_spgemm.c -- the accspmm._cuda functions of the GPU SpGEMM (cuda/spgemm.h): argument
 * parsing, the GIL released around each call, status codes mapped to exceptions.  Device memory
 * is passed as integer addresses; the Python layer (accspmm._spgemm_gpu) owns every lifetime and
 * allocates the results in the caller's array library.
 */
#include "cuda_glue.h" /* Python.h first */

#include "../cuda/accspmm_cuda.h"
#include "../cuda/spgemm.h"

#define SPGEMM_CAPSULE "accspmm.spgemm_gpu"

static void *addr(PyObject *obj) { return obj == Py_None ? NULL : PyLong_AsVoidPtr(obj); }

static void spgemm_capsule_free(PyObject *cap) {
    acc_spgemm_gpu_destroy(PyCapsule_GetPointer(cap, SPGEMM_CAPSULE));
}

/* (m, k, nnz, d_row_offsets, d_column_indices, index_bits, canonical) -> acc_spgemm_gpu_csr */
static int parse_csr(PyObject *tup, acc_spgemm_gpu_csr *c) {
    long long m, k, nnz;
    PyObject *rp, *ci;
    int bits, canonical;
    if (!PyArg_ParseTuple(tup, "LLLOOii;device CSR (m, k, nnz, row_offsets, columns, index_bits, canonical)",
                          &m, &k, &nnz, &rp, &ci, &bits, &canonical))
        return -1;
    c->canonical = canonical;
    c->m = m;
    c->k = k;
    c->nnz = nnz;
    c->d_row_offsets = addr(rp);
    c->d_column_indices = addr(ci);
    c->index_bits = bits;
    return PyErr_Occurred() ? -1 : 0;
}

/* A status of the checks as the ValueError a user understands. */
static PyObject *raise_check(int st, const char *name) {
    if (st == ACC_ERR_ROW_OFFSETS)
        PyErr_Format(PyExc_ValueError,
                     "%s.indptr is invalid: it must start at 0, never decrease and end at nnz", name);
    else if (st == ACC_ERR_COLUMN_INDEX)
        PyErr_Format(PyExc_ValueError, "%s.indices holds a column index outside [0, %s.shape[1])", name,
                     name);
    else
        acc_py_cuda_raise(st, "CSR check failed", 0);
    return NULL;
}

/* spgemm_check_csr((csr7, ...), (name, ...), stream) -> tuple of canonical flags (one synchronisation) */
static PyObject *py_check_csr(PyObject *self, PyObject *args) {
    PyObject *tups, *names, *s;
    acc_spgemm_gpu_csr c[2];
    int canonical[2] = {0, 0}, bad = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyTuple_Type, &tups, &PyTuple_Type, &names, &s)) return NULL;
    const Py_ssize_t count = PyTuple_GET_SIZE(tups);
    if (count < 1 || count > 2 || PyTuple_GET_SIZE(names) != count) {
        PyErr_SetString(PyExc_ValueError, "spgemm_check_csr takes one or two operands and their names");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (parse_csr(PyTuple_GET_ITEM(tups, i), &c[i]) < 0) return NULL;
    void *stream = addr(s);
    if (PyErr_Occurred()) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_spgemm_gpu_check_csr(c, (int)count, canonical, &bad, stream);
    Py_END_ALLOW_THREADS
    if (st) {
        PyObject *name = PyTuple_GET_ITEM(names, bad);
        return raise_check(st, PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : "A");
    }
    return count == 1
               ? Py_BuildValue("(O)", canonical[0] ? Py_True : Py_False)
               : Py_BuildValue("(OO)", canonical[0] ? Py_True : Py_False, canonical[1] ? Py_True : Py_False);
}

static PyObject *py_trim_pool(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    int st = acc_spgemm_gpu_trim_pool();
    if (st) return acc_py_cuda_raise(st, "trimming the SpGEMM memory pool failed", 0);
    Py_RETURN_NONE;
}

/* spgemm_analyse(csrA7, csrB7, chunk_pairs, keep_pairs, path, same, algorithm, validate, sort_small_rows,
 *                a_values, b_values, values_dtype, out_dtype, stream) -> capsule
 * a_values, b_values: the addresses the numeric call to follow passes (a one-shot product), or None */
static PyObject *py_analyse(PyObject *self, PyObject *args) {
    PyObject *ta, *tb, *av, *bv, *s;
    long long chunk;
    int keep, path, same, algorithm, validate, sort_small, vdtype, odtype, bad = 0;
    acc_spgemm_gpu_csr a, b;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!LpipippOOiiO", &PyTuple_Type, &ta, &PyTuple_Type, &tb, &chunk, &keep,
                          &path, &same, &algorithm, &validate, &sort_small, &av, &bv, &vdtype, &odtype, &s) ||
        parse_csr(ta, &a) < 0 || parse_csr(tb, &b) < 0)
        return NULL;
    void *stream = addr(s);
    const void *pa = addr(av), *pb = addr(bv);
    if (PyErr_Occurred()) return NULL;
    acc_spgemm_gpu_options opt = {chunk,      keep, path, same,   algorithm, validate,
                                  sort_small, pa,   pb,   vdtype, odtype};
    acc_spgemm_gpu *plan = NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_spgemm_gpu_analyse(&a, &b, &opt, &plan, &bad, stream);
    Py_END_ALLOW_THREADS
    if (st == ACC_ERR_ROW_OFFSETS || st == ACC_ERR_COLUMN_INDEX) return raise_check(st, bad ? "B" : "A");
    if (st) {
        if (st == ACC_ERR_DEVICE_MEMORY) {
            PyErr_Format(PyExc_MemoryError, "out of GPU memory in the SpGEMM symbolic phase [%s]",
                         acc_cuda_last_error());
            return NULL;
        }
        return acc_py_cuda_raise(st, "GPU SpGEMM symbolic phase failed", 0);
    }
    PyObject *cap = PyCapsule_New(plan, SPGEMM_CAPSULE, spgemm_capsule_free);
    if (!cap) acc_spgemm_gpu_destroy(plan);
    return cap;
}

static acc_spgemm_gpu *plan_of(PyObject *cap) { return PyCapsule_GetPointer(cap, SPGEMM_CAPSULE); }

static PyObject *py_info(PyObject *self, PyObject *cap) {
    (void)self;
    acc_spgemm_gpu *p = plan_of(cap);
    if (!p) return NULL;
    acc_spgemm_gpu_info i;
    acc_spgemm_gpu_get_info(p, &i);
    PyObject *phases = Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "check", i.phase_ms[0], "tile",
                                     i.phase_ms[1], "pairs", i.phase_ms[2], "structure", i.phase_ms[3],
                                     "values", i.phase_ms[4], "numeric", i.phase_ms[5], "rows_count",
                                     i.phase_ms[6], "rows_small", i.phase_ms[7], "rows_large", i.phase_ms[8]);
    if (!phases) return NULL;
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:O,s:K,s:K,s:s,s:d,s:d,s:L,s:L,s:L,s:L,s:"
        "L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,"
        "s:d,s:d,s:N}",
        "m", (long long)i.m, "k", (long long)i.k, "n", (long long)i.n, "tiles_a", (long long)i.tiles_a,
        "tiles_b", (long long)i.tiles_b, "values_a", (long long)i.values_a, "values_b", (long long)i.values_b,
        "tiles_c", (long long)i.tiles_c, "raw_pairs", (long long)i.raw_pairs, "pairs", (long long)i.pairs,
        "products", (long long)i.products, "nnz_structural", (long long)i.nnz_structural, "chunks",
        (long long)i.chunks, "segments", (long long)i.segments, "pairs_kept",
        i.pairs_kept ? Py_True : Py_False, "plan_bytes", (unsigned long long)i.plan_bytes, "peak_bytes",
        (unsigned long long)i.peak_bytes, "algorithm",
        i.algorithm == ACC_SPGEMM_ALGO_TILES ? "tiles" : "rows", "density_a", i.density_a, "density_b",
        i.density_b, "large_rows", (long long)i.large_rows, "row_groups", (long long)i.row_groups,
        "max_row_products", (long long)i.max_row_products, "large_products", (long long)i.large_products,
        "large_entries", (long long)i.large_entries, "tiny_products", (long long)i.tiny_products,
        "hashed_products", (long long)i.hashed_products, "hashed_rows", (long long)i.hashed_rows, "fused_cap",
        (long long)i.fused_cap, "fused_reserved", (long long)i.fused_reserved, "hash_places",
        (long long)i.hash_places, "tiny_places", (long long)i.tiny_places, "model_ms_tiles", i.model_ms_tiles,
        "model_ms_rows", i.model_ms_rows, "phase_ms", phases);
}

/* spgemm_tiles(capsule) -> dict of the device addresses of C's tiles (tests) */
static PyObject *py_tiles(PyObject *self, PyObject *cap) {
    (void)self;
    acc_spgemm_gpu *p = plan_of(cap);
    if (!p) return NULL;
    acc_spgemm_gpu_tiles t;
    acc_spgemm_gpu_get_tiles(p, &t);
    return Py_BuildValue("{s:L,s:N,s:N,s:N,s:N}", "tiles_c", (long long)t.tiles_c, "tile_row_offsets",
                         PyLong_FromVoidPtr((void *)t.d_tile_row_offsets), "tile_cols",
                         PyLong_FromVoidPtr((void *)t.d_tile_cols), "tile_masks",
                         PyLong_FromVoidPtr((void *)t.d_tile_masks), "row_offsets",
                         PyLong_FromVoidPtr((void *)t.d_row_offsets));
}

/* spgemm_numeric(capsule, a_values, b_values, in_dtype, row_offsets, columns, index_bits, values,
 *                out_dtype, stream) -> zeros */
static PyObject *py_numeric(PyObject *self, PyObject *args) {
    PyObject *cap, *av, *bv, *rp, *ci, *vv, *s;
    int in_dtype, bits, out_dtype;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOiOOiOiO", &cap, &av, &bv, &in_dtype, &rp, &ci, &bits, &vv, &out_dtype,
                          &s))
        return NULL;
    acc_spgemm_gpu *p = plan_of(cap);
    void *pa = addr(av), *pb = addr(bv), *prp = addr(rp), *pci = addr(ci), *pv = addr(vv), *stream = addr(s);
    if (!p || PyErr_Occurred()) return NULL;
    int64_t zeros = 0;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_spgemm_gpu_numeric(p, pa, pb, (acc_dtype)in_dtype, prp, pci, bits, pv, (acc_dtype)out_dtype,
                                &zeros, stream);
    Py_END_ALLOW_THREADS
    if (st) {
        if (st == ACC_ERR_DEVICE_MEMORY) {
            PyErr_Format(PyExc_MemoryError, "out of GPU memory in the SpGEMM numeric phase [%s]",
                         acc_cuda_last_error());
            return NULL;
        }
        return acc_py_cuda_raise(st, "GPU SpGEMM numeric phase failed", 0);
    }
    return PyLong_FromLongLong(zeros);
}

/* spgemm_compact(m, nnz_in, row_offsets, columns, values, index_bits, dtype, row_offsets_out,
 *                columns_out, values_out, stream) */
static PyObject *py_compact(PyObject *self, PyObject *args) {
    long long m, nnz;
    PyObject *rp, *ci, *vv, *rpo, *cio, *vvo, *s;
    int bits, dtype;
    (void)self;
    if (!PyArg_ParseTuple(args, "LLOOOiiOOOO", &m, &nnz, &rp, &ci, &vv, &bits, &dtype, &rpo, &cio, &vvo, &s))
        return NULL;
    void *a[7] = {addr(rp), addr(ci), addr(vv), addr(rpo), addr(cio), addr(vvo), addr(s)};
    if (PyErr_Occurred()) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_spgemm_gpu_compact(m, nnz, a[0], a[1], a[2], bits, (acc_dtype)dtype, a[3], a[4], a[5], a[6]);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "dropping the zeros of the GPU SpGEMM failed", 0);
    Py_RETURN_NONE;
}

/* cusparse_spgemm(m, k, n, nnz_a, a_rows, a_cols, a_vals, nnz_b, b_rows, b_cols, b_vals, dtype, alg,
 *                 chunk_fraction, reuse, reps, stream) -> dict (the benchmark's baseline) */
static PyObject *py_cusparse_spgemm(PyObject *self, PyObject *args) {
    long long m, k, n, nnza, nnzb;
    PyObject *ar, *ac, *av, *br, *bc, *bv, *s;
    int dtype, alg, reuse, reps;
    float frac;
    (void)self;
    if (!PyArg_ParseTuple(args, "LLLLOOOLOOOiifiiO", &m, &k, &n, &nnza, &ar, &ac, &av, &nnzb, &br, &bc, &bv,
                          &dtype, &alg, &frac, &reuse, &reps, &s))
        return NULL;
    void *a[7] = {addr(ar), addr(ac), addr(av), addr(br), addr(bc), addr(bv), addr(s)};
    if (PyErr_Occurred()) return NULL;
    acc_cusparse_spgemm_result r;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_cusparse_spgemm_run(m, k, n, nnza, a[0], a[1], a[2], nnzb, a[3], a[4], a[5], (acc_dtype)dtype,
                                 alg, frac, reuse, reps, &r, a[6]);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "cuSPARSE SpGEMM failed", 1);
    return Py_BuildValue("{s:d,s:d,s:L,s:K}", "ms_total", (double)r.ms_total, "ms_reuse", (double)r.ms_reuse,
                         "nnz_c", (long long)r.nnz_c, "buffer_bytes", (unsigned long long)r.buffer_bytes);
}

static PyMethodDef spgemm_methods[] = {
    {"spgemm_check_csr", py_check_csr, METH_VARARGS,
     "spgemm_check_csr((csr7, ...), (name, ...), stream) -> canonical flags; ValueError if invalid"},
    {"spgemm_trim_pool", py_trim_pool, METH_NOARGS,
     "spgemm_trim_pool(): the SpGEMM pool's unused memory back"},
    {"spgemm_analyse", py_analyse, METH_VARARGS,
     "spgemm_analyse(csrA7, csrB7, chunk_pairs, keep_pairs, path, same, algorithm, validate, "
     "sort_small_rows, "
     "stream) -> "
     "capsule"},
    {"spgemm_info", py_info, METH_O, "spgemm_info(capsule) -> dict"},
    {"spgemm_tiles", py_tiles, METH_O, "spgemm_tiles(capsule) -> dict of device addresses of C's tiles"},
    {"spgemm_numeric", py_numeric, METH_VARARGS,
     "spgemm_numeric(capsule, a_values, b_values, in_dtype, row_offsets, columns, index_bits, values, "
     "out_dtype, "
     "stream) -> zeros"},
    {"spgemm_compact", py_compact, METH_VARARGS,
     "spgemm_compact(m, nnz_in, row_offsets, columns, values, index_bits, dtype, row_offsets_out, "
     "columns_out, "
     "values_out, stream)"},
    {"cusparse_spgemm", py_cusparse_spgemm, METH_VARARGS,
     "cusparse_spgemm(m, k, n, nnz_a, a_rows, a_cols, a_vals, nnz_b, b_rows, b_cols, b_vals, dtype, alg, "
     "chunk_fraction, reuse, reps, stream) -> dict"},
    {NULL, NULL, 0, NULL}};

int acc_spgemm_add(PyObject *module) {
    if (PyModule_AddIntConstant(module, "SPGEMM_PATH_MODEL", ACC_SPGEMM_PATH_MODEL) < 0 ||
        PyModule_AddIntConstant(module, "SPGEMM_PATH_TENSOR", ACC_SPGEMM_PATH_TENSOR) < 0 ||
        PyModule_AddIntConstant(module, "SPGEMM_PATH_SCALAR", ACC_SPGEMM_PATH_SCALAR) < 0 ||
        PyModule_AddIntConstant(module, "SPGEMM_ALGO_AUTO", ACC_SPGEMM_ALGO_AUTO) < 0 ||
        PyModule_AddIntConstant(module, "SPGEMM_ALGO_TILES", ACC_SPGEMM_ALGO_TILES) < 0 ||
        PyModule_AddIntConstant(module, "SPGEMM_ALGO_ROWS", ACC_SPGEMM_ALGO_ROWS) < 0)
        return -1;
    return PyModule_AddFunctions(module, spgemm_methods);
}
