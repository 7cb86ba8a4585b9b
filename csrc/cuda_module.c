/*
 * cuda_module.c -- accspmm._cuda: CPython glue over the CUDA layer's C ABI.
 *
 * Device memory is handled as integer addresses: the Python layer owns
 * lifetimes (accspmm._device.DeviceArray) and policy; this module only
 * converts arguments, releases the GIL around each call and maps status
 * codes to exceptions.  It is private: the public API never hands raw
 * addresses to users.
 */
#define ACC_NUMPY_IMPORT
#include "glue.h"

#include "../cuda/accspmm_cuda.h"
#include "../cuda/half_spmm.h"
#include "../cuda/tf32_spmm.h"
#include "../cuda/timing.h"
#include "cuda_glue.h"

/* Raises for a CUDA-layer status, with the layer's own last message (cuda_glue.h). */
PyObject *acc_py_cuda_raise(int st, const char *context, int cusparse) {
    const char *detail = cusparse ? acc_cusparse_last_error() : acc_cuda_last_error();
    PyObject *type = PyExc_RuntimeError;
    if (st == ACC_ERR_DEVICE_MEMORY || st == ACC_ERR_OUT_OF_MEMORY)
        type = PyExc_MemoryError;
    else if (st == ACC_ERR_UNSUPPORTED)
        type = PyExc_NotImplementedError;
    else if (st == ACC_ERR_INVALID_ARGUMENT || st == ACC_ERR_TOO_LARGE)
        type = PyExc_ValueError;
    PyErr_Format(type, "%s: %s [%s]", context, acc_status_string(st), detail);
    return NULL;
}

static void *as_ptr(PyObject *obj) { return PyLong_AsVoidPtr(obj); }

static PyObject *py_probe(PyObject *self, PyObject *noargs) {
    int drv = 0, rt = 0, count = 0, st;
    (void)self;
    (void)noargs;
    Py_BEGIN_ALLOW_THREADS
    st = acc_cuda_probe(&drv, &rt, &count);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:s}", "status", st, "driver_version", drv, "runtime_version", rt,
                         "device_count", count, "message", st ? acc_cuda_last_error() : "");
}

static PyObject *py_device_info(PyObject *self, PyObject *args) {
    int dev, st;
    acc_cuda_device_info info;
    (void)self;
    if (!PyArg_ParseTuple(args, "i", &dev)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_cuda_get_device_info(dev, &info);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "device query failed", 0);
    return Py_BuildValue("{s:s,s:(ii),s:i,s:i,s:i,s:K,s:K}", "name", info.name, "compute_capability",
                         info.major, info.minor, "multiprocessors", info.multiprocessors, "l2_bytes",
                         info.l2_bytes, "max_shared_per_block", info.max_shared_per_block, "total_memory",
                         (unsigned long long)info.total_memory, "free_memory",
                         (unsigned long long)info.free_memory);
}

static PyObject *py_set_device(PyObject *self, PyObject *args) {
    int dev, st;
    (void)self;
    if (!PyArg_ParseTuple(args, "i", &dev)) return NULL;
    st = acc_cuda_set_device(dev);
    if (st) return acc_py_cuda_raise(st, "cudaSetDevice failed", 0);
    Py_RETURN_NONE;
}

static PyObject *py_get_device(PyObject *self, PyObject *noargs) {
    int dev = 0, st;
    (void)self;
    (void)noargs;
    st = acc_cuda_get_device(&dev);
    if (st) return acc_py_cuda_raise(st, "cudaGetDevice failed", 0);
    return PyLong_FromLong(dev);
}

/* The address of a successful allocation, or its error (MemoryError when out of device memory). */
static PyObject *allocated(int st, void *p, unsigned long long bytes) {
    if (st) {
        if (st == ACC_ERR_DEVICE_MEMORY) {
            PyErr_Format(PyExc_MemoryError, "out of GPU memory allocating %llu bytes [%s]", bytes,
                         acc_cuda_last_error());
            return NULL;
        }
        return acc_py_cuda_raise(st, "cudaMalloc failed", 0);
    }
    return PyLong_FromVoidPtr(p);
}

static PyObject *py_malloc(PyObject *self, PyObject *args) {
    unsigned long long bytes;
    void *p = NULL;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &bytes)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_cuda_malloc(&p, (size_t)bytes);
    Py_END_ALLOW_THREADS
    return allocated(st, p, bytes);
}

/* malloc_ordered(nbytes, stream) and upload(ndarray, stream): pool memory in the order of `stream`,
 * no host synchronisation (accspmm_cuda.h). */
static PyObject *py_malloc_ordered(PyObject *self, PyObject *args) {
    unsigned long long bytes;
    PyObject *s;
    void *p = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "KO", &bytes, &s)) return NULL;
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    const int st = acc_cuda_malloc_ordered(&p, (size_t)bytes, stream);
    return allocated(st, p, bytes);
}

static PyObject *py_upload(PyObject *self, PyObject *args) {
    PyObject *a, *s;
    void *p = NULL;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &a, &s)) return NULL;
    if (!PyArray_Check(a) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)) {
        PyErr_SetString(PyExc_TypeError, "host array must be a C-contiguous ndarray");
        return NULL;
    }
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    const unsigned long long bytes = (unsigned long long)PyArray_NBYTES((PyArrayObject *)a);
    Py_BEGIN_ALLOW_THREADS
    st = acc_cuda_upload(&p, PyArray_DATA((PyArrayObject *)a), (size_t)bytes, stream);
    Py_END_ALLOW_THREADS
    return allocated(st, p, bytes);
}

/* host_slot() -> address; host_slot_free(address); host_slot_read(address, count) -> [int64 x count]
 * (accspmm_cuda.h: mapped pinned memory that kernels write to; the caller synchronises first). */
static PyObject *py_host_slot(PyObject *self, PyObject *noargs) {
    void *p = NULL;
    (void)self;
    (void)noargs;
    const int st = acc_cuda_host_slot(&p);
    if (st) return acc_py_cuda_raise(st, "host slot", 0);
    return PyLong_FromVoidPtr(p);
}

static PyObject *py_host_slot_free(PyObject *self, PyObject *obj) {
    (void)self;
    void *p = as_ptr(obj);
    if (PyErr_Occurred()) return NULL;
    acc_cuda_host_slot_free(p);
    Py_RETURN_NONE;
}

static PyObject *py_host_slot_read(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t count;
    (void)self;
    if (!PyArg_ParseTuple(args, "On", &obj, &count)) return NULL;
    const int64_t *p = as_ptr(obj);
    if (PyErr_Occurred()) return NULL;
    if (!p || count < 0 || (size_t)count > 1024 / sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "host_slot_read: a slot holds at most 128 int64");
        return NULL;
    }
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out && i < count; i++) {
        PyObject *v = PyLong_FromLongLong((long long)((const volatile int64_t *)p)[i]);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *py_side_stream(PyObject *self, PyObject *noargs) {
    void *s = NULL;
    (void)self;
    (void)noargs;
    const int st = acc_cuda_side_stream(&s);
    if (st) return acc_py_cuda_raise(st, "side stream", 0);
    return PyLong_FromVoidPtr(s);
}

static PyObject *py_free(PyObject *self, PyObject *obj) {
    (void)self;
    void *p = as_ptr(obj);
    if (PyErr_Occurred()) return NULL;
    int st = acc_cuda_free(p);
    if (st) return acc_py_cuda_raise(st, "cudaFree failed", 0);
    Py_RETURN_NONE;
}

/* memcpy_htod(d_ptr, ndarray, stream) / memcpy_dtoh(ndarray, d_ptr, stream):
 * the host array must be contiguous (writeable for dtoh); size = its nbytes. */
static PyObject *py_memcpy(PyObject *args, int to_device) {
    PyObject *a, *b, *s;
    if (!PyArg_ParseTuple(args, "OOO", &a, &b, &s)) return NULL;
    PyObject *host_obj = to_device ? b : a;
    PyObject *dev_obj = to_device ? a : b;
    if (!PyArray_Check(host_obj) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)host_obj) ||
        (!to_device && !PyArray_ISWRITEABLE((PyArrayObject *)host_obj))) {
        PyErr_SetString(PyExc_TypeError, "host array must be a C-contiguous (writeable) ndarray");
        return NULL;
    }
    PyArrayObject *h = (PyArrayObject *)host_obj;
    void *d = as_ptr(dev_obj);
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    size_t bytes = (size_t)PyArray_NBYTES(h);
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = to_device ? acc_cuda_memcpy_htod(d, PyArray_DATA(h), bytes, stream)
                   : acc_cuda_memcpy_dtoh(PyArray_DATA(h), d, bytes, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "memcpy failed", 0);
    Py_RETURN_NONE;
}
static PyObject *py_memcpy_htod(PyObject *self, PyObject *args) {
    (void)self;
    return py_memcpy(args, 1);
}
static PyObject *py_memcpy_dtoh(PyObject *self, PyObject *args) {
    (void)self;
    return py_memcpy(args, 0);
}

static PyObject *py_memcpy_dtod(PyObject *self, PyObject *args) {
    PyObject *d, *sobj, *s;
    unsigned long long bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOKO", &d, &sobj, &bytes, &s)) return NULL;
    void *dst = as_ptr(d), *src = as_ptr(sobj), *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    int st = acc_cuda_memcpy_dtod(dst, src, (size_t)bytes, stream);
    if (st) return acc_py_cuda_raise(st, "memcpy failed", 0);
    Py_RETURN_NONE;
}

static PyObject *py_memset(PyObject *self, PyObject *args) {
    PyObject *d, *s;
    int byte;
    unsigned long long bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiKO", &d, &byte, &bytes, &s)) return NULL;
    void *p = as_ptr(d), *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    int st = acc_cuda_memset(p, byte, (size_t)bytes, stream);
    if (st) return acc_py_cuda_raise(st, "memset failed", 0);
    Py_RETURN_NONE;
}

/* wait(handle) without the GIL (None: NULL); raises `what` with the CUDA error. */
static PyObject *blocking_wait(PyObject *obj, int (*wait)(void *), const char *what) {
    void *handle = obj == Py_None ? NULL : as_ptr(obj);
    if (PyErr_Occurred()) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = wait(handle);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, what, 0);
    Py_RETURN_NONE;
}

static PyObject *py_synchronize(PyObject *self, PyObject *s) {
    (void)self;
    return blocking_wait(s, acc_cuda_stream_synchronize, "stream synchronize failed");
}

static PyObject *py_stream_capturing(PyObject *self, PyObject *s) {
    (void)self;
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    int capturing = 0;
    int st = acc_cuda_stream_capturing(stream, &capturing);
    if (st) return acc_py_cuda_raise(st, "cudaStreamIsCapturing failed", 0);
    return PyBool_FromLong(capturing);
}

static PyObject *py_cusparse_load(PyObject *self, PyObject *args) {
    const char *path;
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    int st = acc_cusparse_load(path);
    if (st) return acc_py_cuda_raise(st, "cannot load cuSPARSE", 1);
    Py_RETURN_NONE;
}

#define CUSPARSE_CAPSULE "accspmm.cusparse_spmm"

static void cusparse_capsule_free(PyObject *cap) {
    acc_cusparse_spmm_destroy(PyCapsule_GetPointer(cap, CUSPARSE_CAPSULE));
}

/* cusparse_spmm_create(m, k, nnz, d_rowptr, d_cols, d_vals, index_bits,
 *                      dtype(0/1), n, alg, d_B, d_C, stream) -> capsule */
static PyObject *py_cusparse_create(PyObject *self, PyObject *args) {
    long long m, k, nnz, n;
    int index_bits, dtype, alg, st;
    PyObject *rp, *ci, *v, *B, *C, *s;
    acc_cusparse_spmm *plan = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "LLLOOOiiLiOOO", &m, &k, &nnz, &rp, &ci, &v, &index_bits, &dtype, &n, &alg,
                          &B, &C, &s))
        return NULL;
    void *prp = as_ptr(rp), *pci = as_ptr(ci), *pv = as_ptr(v), *pB = as_ptr(B), *pC = as_ptr(C);
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    if (dtype != ACC_FLOAT32 && dtype != ACC_FLOAT64) {
        PyErr_SetString(PyExc_ValueError, "dtype must be 0 (float32) or 1 (float64)");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = acc_cusparse_spmm_create(&plan, m, k, nnz, prp, pci, pv, index_bits, (acc_dtype)dtype, n, alg, pB,
                                  pC, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "cuSPARSE SpMM setup failed", 1);
    PyObject *cap = PyCapsule_New(plan, CUSPARSE_CAPSULE, cusparse_capsule_free);
    if (!cap) acc_cusparse_spmm_destroy(plan);
    return cap;
}

static PyObject *py_cusparse_run(PyObject *self, PyObject *args) {
    PyObject *cap, *B, *C, *s;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &cap, &B, &C, &s)) return NULL;
    acc_cusparse_spmm *plan = PyCapsule_GetPointer(cap, CUSPARSE_CAPSULE);
    if (!plan) return NULL;
    void *pB = as_ptr(B), *pC = as_ptr(C), *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_cusparse_spmm_run(plan, pB, pC, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "cuSPARSE SpMM failed", 1);
    Py_RETURN_NONE;
}

/* Parses the 16- to 23-tuple of acc_tf32_args (sizes as ints, device pointers as ints, 0 = NULL; the
 * last seven, optional: csr_offsets, csr_cols, csr_values, csr_lanes, csr_long_parts, csr_num_parts,
 * csr_parts_first) and the 5-tuple of acc_tf32_variant. */
typedef struct tf32_call {
    acc_tf32_args args;
    acc_tf32_variant variant;
} tf32_call;

static int parse_tf32(PyObject *tup, PyObject *vtup, tf32_call *c) {
    unsigned long long perm, wo, meta, vals, tasks, ws, cnt, B, C, csr_o = 0, csr_c = 0, csr_v = 0, csr_l = 0;
    long long m, k, n, nw, ntasks, csr_nl = 0;
    int elem = ACC_TF32_ELEM_TF32, out_f32 = 0, csr_lanes = 0, csr_pf = 0;
    acc_tf32_args *a = &c->args;
    acc_tf32_variant *v = &c->variant;
    memset(c, 0, sizeof(*c));
    if (!PyArg_ParseTuple(tup, "LLLLKKKKKLKKKK|iiKKKiKLi;tf32 args", &m, &k, &n, &nw, &perm, &wo, &meta,
                          &vals, &tasks, &ntasks, &ws, &cnt, &B, &C, &elem, &out_f32, &csr_o, &csr_c, &csr_v,
                          &csr_lanes, &csr_l, &csr_nl, &csr_pf))
        return -1;
    a->csr = acc_tf32_csr_of(csr_o, csr_c, csr_v, csr_lanes, csr_l, csr_nl, csr_pf);
    a->elem = elem;
    a->out_f32 = out_f32;
    if (!PyArg_ParseTuple(vtup, "iiiii;tf32 variant", &v->slice_s, &v->depth, &v->cache_l1, &v->slice_major,
                          &v->staged))
        return -1;
    a->m = m;
    a->k = k;
    a->n = n;
    a->num_windows = nw;
    a->perm = (const int64_t *)(uintptr_t)perm;
    a->window_offsets = (const int64_t *)(uintptr_t)wo;
    a->block_meta = (const int32_t *)(uintptr_t)meta;
    a->values = (const float *)(uintptr_t)vals;
    a->tasks = (const int32_t *)(uintptr_t)tasks;
    a->num_tasks = ntasks;
    a->workspace = (float *)(uintptr_t)ws;
    a->counters = (int32_t *)(uintptr_t)cnt;
    a->B = (const float *)(uintptr_t)B;
    a->C = (float *)(uintptr_t)C;
    return 0;
}

static PyObject *time_runs(acc_run_fn fn, void *ctx, int reps, PyObject *flush,
                           unsigned long long flush_bytes, PyObject *s, int cusparse, int chain);

/* half_spmm((m, k, n, num_brows, perm, brow_offsets, block_cols, block_values, block_masks, tasks,
 * num_tasks, splits, num_splits, workspace, B, C, fmt, out_f32, pairs, pair_offsets, pair_cols,
 * pair_blocks, quad_makespan, pair_entries, pair_longest), stream): device addresses as ints (A in BSR16;
 * cuda/half_spmm.h). */
static int parse_half(PyObject *tup, acc_half_args *a) {
    unsigned long long perm, bo, cols, vals, masks, tasks, splits, ws, B, C, po, pc, pb;
    long long m, k, n, nbr, ntasks, nsplits, makespan, entries, longest;
    int fmt, out_f32, pairs;
    memset(a, 0, sizeof(*a));
    if (!PyArg_ParseTuple(tup, "LLLLKKKKKKLKLKKKiiiKKKLLL;half args", &m, &k, &n, &nbr, &perm, &bo, &cols,
                          &vals, &masks, &tasks, &ntasks, &splits, &nsplits, &ws, &B, &C, &fmt, &out_f32,
                          &pairs, &po, &pc, &pb, &makespan, &entries, &longest))
        return -1;
    a->pairs = pairs;
    a->quad_makespan = makespan;
    a->pair_entries = entries;
    a->pair_longest = longest;
    acc_half_set_groups(a, (uintptr_t)po, (uintptr_t)pc, (uintptr_t)pb);
    a->m = m;
    a->k = k;
    a->n = n;
    a->num_brows = nbr;
    a->perm = (const int64_t *)(uintptr_t)perm;
    a->brow_offsets = (const int64_t *)(uintptr_t)bo;
    a->block_cols = (const int32_t *)(uintptr_t)cols;
    a->block_values = (const uint16_t *)(uintptr_t)vals;
    a->block_masks = (const uint64_t *)(uintptr_t)masks;
    a->tasks = (const int64_t *)(uintptr_t)tasks;
    a->num_tasks = ntasks;
    a->splits = (const int64_t *)(uintptr_t)splits;
    a->num_splits = nsplits;
    a->workspace = (float *)(uintptr_t)ws;
    a->B = (const uint16_t *)(uintptr_t)B;
    a->C = (void *)(uintptr_t)C;
    a->fmt = fmt;
    a->out_f32 = out_f32;
    return 0;
}

static PyObject *py_half_spmm(PyObject *self, PyObject *args) {
    PyObject *tup, *s;
    acc_half_args a;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &tup, &s) || parse_half(tup, &a) < 0) return NULL;
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_half_spmm(&a, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "half-precision SpMM launch failed", 0);
    Py_RETURN_NONE;
}

static int run_half(void *ctx, void *stream) { return acc_half_spmm((const acc_half_args *)ctx, stream); }

/* half_pair_cols(args) -> int: the pair kernel's thread-block columns for these arguments (256, 128, or 0:
 * the warp kernel or not pairs; acc_half_pair_cta_cols) */
static PyObject *py_half_pair_cols(PyObject *self, PyObject *args) {
    PyObject *tup;
    acc_half_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &tup) || parse_half(tup, &a) < 0) return NULL;
    return PyLong_FromLong(acc_half_pair_cta_cols(&a));
}

/* half_quads_usable() -> bool: whether the current device runs the BSR16 quad kernels (warpgroup MMA) */
static PyObject *py_half_quads_usable(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyBool_FromLong(acc_half_quads_usable());
}

/* time_half(args, reps, flush, flush_bytes, stream) -> [ms] */
static PyObject *py_time_half(PyObject *self, PyObject *args) {
    PyObject *tup, *flush, *s;
    int reps;
    unsigned long long flush_bytes;
    acc_half_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!iOKO", &PyTuple_Type, &tup, &reps, &flush, &flush_bytes, &s) ||
        parse_half(tup, &a) < 0)
        return NULL;
    return time_runs(run_half, &a, reps, flush, flush_bytes, s, 0, 1);
}

/* half_tiles(block_meta, values, num_blocks, tiles, fmt, stream): BITTCF dense tiles on the device. */
static PyObject *py_half_tiles(PyObject *self, PyObject *args) {
    PyObject *meta, *vals, *tiles, *s;
    long long nb;
    int fmt, st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLOiO", &meta, &vals, &nb, &tiles, &fmt, &s)) return NULL;
    void *d_meta = as_ptr(meta), *d_vals = as_ptr(vals), *d_tiles = as_ptr(tiles),
         *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_half_tiles(d_meta, d_vals, nb, d_tiles, fmt, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "building the half tiles failed", 0);
    Py_RETURN_NONE;
}

/* bittcf_bsr16_count(block_meta, window_offsets, W, num_blocks, counts, stream): BSR16 blocks per block row.
 */
static PyObject *py_bittcf_bsr16_count(PyObject *self, PyObject *args) {
    PyObject *meta, *wo, *counts, *s;
    long long W, nb;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLLOO", &meta, &wo, &W, &nb, &counts, &s)) return NULL;
    void *d_meta = as_ptr(meta), *d_wo = as_ptr(wo), *d_counts = as_ptr(counts),
         *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_bittcf_bsr16_count(d_meta, d_wo, W, nb, d_counts, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "counting BSR16 blocks on the device failed", 0);
    Py_RETURN_NONE;
}

/* half_pack_groups(blocks, slots, block_values, num_blocks, out, stream): the quad kernel's group values. */
static PyObject *py_half_pack_groups(PyObject *self, PyObject *args) {
    PyObject *blocks, *vals, *out, *s;
    long long slots, nb;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLOLOO", &blocks, &slots, &vals, &nb, &out, &s)) return NULL;
    void *d_blocks = as_ptr(blocks), *d_vals = as_ptr(vals), *d_out = as_ptr(out),
         *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_half_pack_groups(d_blocks, slots, d_vals, nb, d_out, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "packing the quad kernel's blocks failed", 0);
    Py_RETURN_NONE;
}

/* half_round(src, dst, count, fmt, stream): float32 -> half bits on the device. */
static PyObject *py_half_round(PyObject *self, PyObject *args) {
    PyObject *src, *dst, *s;
    long long count;
    int fmt, st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLiO", &src, &dst, &count, &fmt, &s)) return NULL;
    void *d_src = as_ptr(src), *d_dst = as_ptr(dst), *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_half_round_device(d_src, d_dst, count, fmt, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "rounding B to half precision failed", 0);
    Py_RETURN_NONE;
}

/* tf32_round_values(values, count, stream): float32 values rounded to TF32 in place (acc_tf32_round_values).
 */
static PyObject *py_tf32_round_values(PyObject *self, PyObject *args) {
    PyObject *v, *s;
    long long count;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLO", &v, &count, &s)) return NULL;
    void *d_v = as_ptr(v), *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = acc_tf32_round_values((float *)d_v, count, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "rounding values to TF32 failed", 0);
    Py_RETURN_NONE;
}

/* A C-contiguous ndarray of `type` and `count` elements, for a host input of the GPU build. */
static const void *host_input(PyObject *a, int type, long long count, const char *what) {
    if (!PyArray_Check(a) || PyArray_TYPE((PyArrayObject *)a) != type ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a) || PyArray_SIZE((PyArrayObject *)a) < count) {
        PyErr_Format(PyExc_TypeError, "bittcf_gpu_build: %s must be a C-contiguous ndarray of %lld elements",
                     what, count);
        return NULL;
    }
    return PyArray_DATA((PyArrayObject *)a);
}

/* bittcf_gpu_build(m, k, nnz, indptr, indices, values, d_perm or None, d_window_offsets,
 * h_window_offsets, keep_blocks, stream[, defer[, method[, identity_perm[, validate[, keep_csr]]]]]) -> dict
 * of the allocated device addresses ("csr": the build's upload of a host CSR, kept with keep_csr, else 0; the
 * caller owns them: pool memory, for free()), num_blocks, method (the method that ran: 1 sort, 2 ranks;
 * the argument: 0 auto, 1, 2) and ready (with defer: an event handle
 * for event_wait / event_destroy, or 0; the build returns without synchronising its last steps).  The CSR is
 * three device addresses, or three host ndarrays (int64 indptr [m+1], int32 indices and float32 values
 * [nnz]), which the build uploads itself; h_window_offsets: writeable C-contiguous int64 ndarray [W+1]. */
static PyObject *py_bittcf_gpu_build(PyObject *self, PyObject *args) {
    long long m, k, nnz;
    PyObject *ip, *ix, *iv, *pp, *wo, *h, *s, *idp = Py_None;
    int keep, defer = 0, method = ACC_BITTCF_GPU_AUTO, validate = 0, keep_csr = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "LLLOOOOOOpO|piOpp", &m, &k, &nnz, &ip, &ix, &iv, &pp, &wo, &h, &keep, &s,
                          &defer, &method, &idp, &validate, &keep_csr))
        return NULL;
    if (idp != Py_None && pp != Py_None) {
        PyErr_SetString(PyExc_ValueError,
                        "bittcf_gpu_build: identity_perm is for builds without a permutation");
        return NULL;
    }
    if (method < ACC_BITTCF_GPU_AUTO || method > ACC_BITTCF_GPU_RANKS) {
        PyErr_SetString(PyExc_ValueError, "bittcf_gpu_build: method must be 0 (auto), 1 (sort) or 2 (ranks)");
        return NULL;
    }
    const long long W = (m + 7) / 8;
    if (!PyArray_Check(h) || PyArray_TYPE((PyArrayObject *)h) != NPY_INT64 ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)h) || !PyArray_ISWRITEABLE((PyArrayObject *)h) ||
        PyArray_SIZE((PyArrayObject *)h) != W + 1) {
        PyErr_SetString(PyExc_TypeError, "h_window_offsets must be a writeable int64 ndarray of ceil(m/8)+1");
        return NULL;
    }
    acc_bittcf_gpu_input in;
    memset(&in, 0, sizeof in);
    in.m = m;
    in.k = k;
    in.nnz = nnz;
    in.d_perm = pp == Py_None ? NULL : as_ptr(pp);
    in.method = method;
    in.validate = validate;
    if (validate && !PyArray_Check(ip)) {
        PyErr_SetString(PyExc_ValueError, "bittcf_gpu_build: validate takes a host CSR");
        return NULL;
    }
    if (PyArray_Check(ip)) {
        in.h_row_offsets = host_input(ip, NPY_INT64, m + 1, "indptr");
        if (in.h_row_offsets) in.h_column_indices = host_input(ix, NPY_INT32, nnz, "indices");
        if (in.h_column_indices) in.h_values = host_input(iv, NPY_FLOAT32, nnz, "values");
        if (!in.h_values) return NULL;
    } else {
        in.d_row_offsets = as_ptr(ip);
        in.d_column_indices = as_ptr(ix);
        in.d_values = as_ptr(iv);
    }
    acc_bittcf_gpu_output out;
    memset(&out, 0, sizeof out);
    out.d_window_offsets = as_ptr(wo);
    out.h_window_offsets = PyArray_DATA((PyArrayObject *)h);
    out.keep_blocks = keep;
    out.defer_sync = defer;
    out.d_identity_perm = idp == Py_None ? NULL : as_ptr(idp);
    out.keep_csr = keep_csr;
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_bittcf_gpu_build(&in, &out, stream);
    Py_END_ALLOW_THREADS
    if (st) {
        if (st == ACC_ERR_NOT_CANONICAL) {
            PyErr_SetString(PyExc_ValueError,
                            "BitTCF GPU build: the CSR has duplicate entries (canonicalise it)");
            return NULL;
        }
        if (st == ACC_ERR_ROW_OFFSETS || st == ACC_ERR_COLUMN_INDEX) { /* validate: the device's check */
            PyErr_Format(PyExc_ValueError, "BitTCF GPU build: %s", acc_status_string(st));
            return NULL;
        }
        return acc_py_cuda_raise(st, "BitTCF GPU build failed", 0);
    }
    PyObject *res = Py_BuildValue(
        "{s:L,s:i,s:i,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}", "num_blocks", (long long)out.num_blocks, "method",
        out.method_used, "canonical", out.canonical, "block_meta", PyLong_FromVoidPtr(out.d_block_meta),
        "values_tf32", PyLong_FromVoidPtr(out.d_values_tf32), "block_cols",
        PyLong_FromVoidPtr(out.d_block_cols), "block_mask", PyLong_FromVoidPtr(out.d_block_mask),
        "block_value_offsets", PyLong_FromVoidPtr(out.d_block_value_offsets), "values",
        PyLong_FromVoidPtr(out.d_values), "ready", PyLong_FromVoidPtr(out.ready), "csr",
        PyLong_FromVoidPtr(out.d_csr));
    if (!res) { /* the outputs leak (as for any failed result dict); the event must not be waited on */
        acc_cuda_event_destroy(out.ready);
    }
    return res;
}

/* event_wait(handle): waits for an event of bittcf_gpu_build(defer=True) and destroys it; raises
 * the CUDA error of the work it marks. */
static PyObject *py_event_wait(PyObject *self, PyObject *arg) {
    (void)self;
    return blocking_wait(arg, acc_cuda_event_wait, "BitTCF GPU build failed");
}

/* event_destroy(handle): destroys such an event without waiting. */
static PyObject *py_event_destroy(PyObject *self, PyObject *arg) {
    (void)self;
    void *ev = as_ptr(arg);
    if (PyErr_Occurred()) return NULL;
    acc_cuda_event_destroy(ev);
    Py_RETURN_NONE;
}

static PyObject *py_fill_identity(PyObject *self, PyObject *args) {
    PyObject *d, *s;
    long long n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLO", &d, &n, &s)) return NULL;
    void *ptr = as_ptr(d), *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    int st = acc_cuda_fill_identity(ptr, n, stream);
    if (st) return acc_py_cuda_raise(st, "fill_identity failed", 0);
    Py_RETURN_NONE;
}

/* tf32_spmm(args14[+ elem, out_f32], variant5, stream[, workspace_floats, counters]): with the last two (>
 * 0), the split workspace is allocated in stream order around the launch (acc_tf32_spmm_ordered). */
static PyObject *py_tf32_spmm(PyObject *self, PyObject *args) {
    PyObject *tup, *vtup, *s;
    unsigned long long ws_floats = 0, counters = 0;
    tf32_call c;
    int st;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O|KK", &PyTuple_Type, &tup, &PyTuple_Type, &vtup, &s, &ws_floats,
                          &counters))
        return NULL;
    if (parse_tf32(tup, vtup, &c) < 0) return NULL;
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ws_floats ? acc_tf32_spmm_ordered(&c.args, &c.variant, stream, (size_t)ws_floats, (size_t)counters)
                   : acc_tf32_spmm(&c.args, &c.variant, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "TF32 SpMM launch failed", 0);
    Py_RETURN_NONE;
}

static PyObject *py_tf32_narrow_max(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyLong_FromLong(acc_tf32_narrow_max());
}

static PyObject *py_tf32_shared_bytes(PyObject *self, PyObject *vtup) {
    acc_tf32_variant v;
    (void)self;
    if (!PyArg_ParseTuple(vtup, "iiiii;tf32 variant", &v.slice_s, &v.depth, &v.cache_l1, &v.slice_major,
                          &v.staged))
        return NULL;
    return PyLong_FromLong(acc_tf32_shared_bytes(&v));
}

/* tf32_schedule_price(window_offsets, num_windows, caps, (WB, FILL, REDUCE, TASK, MERGE), out, stream) and
 * tf32_schedule_rows(window_offsets, num_windows, cap, constants, ntasks, max_cost, lpt, tasks, out, stream):
 * the device schedule (tf32_spmm.h), queued on `stream` (out: None for no totals). */
static int schedule_stream(PyObject *s, void **stream) {
    *stream = s == Py_None ? NULL : as_ptr(s);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *py_tf32_schedule_price(PyObject *self, PyObject *args) {
    PyObject *wo, *caps_obj, *out, *s;
    long long W;
    int64_t c[5], caps[16];
    void *stream;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLO(LLLLL)OO", &wo, &W, &caps_obj, &c[0], &c[1], &c[2], &c[3], &c[4], &out,
                          &s))
        return NULL;
    PyObject *seq = PySequence_Fast(caps_obj, "caps must be a sequence of integers");
    if (!seq) return NULL;
    const Py_ssize_t ncaps = PySequence_Fast_GET_SIZE(seq);
    if (ncaps < 1 || ncaps > 16) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "1 to 16 caps");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ncaps; i++)
        caps[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    void *d_wo = as_ptr(wo), *d_out = as_ptr(out);
    if (PyErr_Occurred() || schedule_stream(s, &stream) < 0) return NULL;
    const int st = acc_tf32_schedule_price(d_wo, W, caps, (int)ncaps, c, d_out, stream);
    if (st) return acc_py_cuda_raise(st, "TF32 schedule pricing", 0);
    Py_RETURN_NONE;
}

static PyObject *py_tf32_schedule_rows(PyObject *self, PyObject *args) {
    PyObject *wo, *tasks, *out, *s;
    long long W, cap, ntasks, max_cost;
    int64_t c[5];
    int lpt;
    void *stream;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLL(LLLLL)LLpOOO", &wo, &W, &cap, &c[0], &c[1], &c[2], &c[3], &c[4], &ntasks,
                          &max_cost, &lpt, &tasks, &out, &s))
        return NULL;
    void *d_wo = as_ptr(wo), *d_tasks = as_ptr(tasks), *d_out = out == Py_None ? NULL : as_ptr(out);
    if (PyErr_Occurred() || schedule_stream(s, &stream) < 0) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_tf32_schedule_rows(d_wo, W, cap, c, ntasks, max_cost, lpt, d_tasks, d_out, stream);
    Py_END_ALLOW_THREADS
    if (st) return acc_py_cuda_raise(st, "TF32 schedule rows", 0);
    Py_RETURN_NONE;
}

static int run_tf32(void *ctx, void *stream) {
    const tf32_call *c = ctx;
    return acc_tf32_spmm(&c->args, &c->variant, stream);
}

typedef struct cusparse_ctx {
    acc_cusparse_spmm *plan;
    const void *B;
    void *C;
} cusparse_ctx;

static int run_cusparse(void *ctx, void *stream) {
    cusparse_ctx *c = ctx;
    return acc_cusparse_spmm_run(c->plan, c->B, c->C, stream);
}

/* `n` back-to-back launches of one launcher, as one timed run (the time per call of a loop of calls,
 * where each launch follows the last with no event between them). */
typedef struct chain_ctx {
    acc_run_fn fn;
    void *ctx;
    int n;
} chain_ctx;

static int run_chain(void *ctx, void *stream) {
    const chain_ctx *c = ctx;
    for (int i = 0; i < c->n; i++) {
        const int st = c->fn(c->ctx, stream);
        if (st) return st;
    }
    return ACC_SUCCESS;
}

/* Times `reps` runs of `chain` back-to-back launches each; returns a list of milliseconds per launch. */
static PyObject *time_runs(acc_run_fn fn, void *ctx, int reps, PyObject *flush,
                           unsigned long long flush_bytes, PyObject *s, int cusparse, int chain) {
    void *d_flush = flush == Py_None ? NULL : as_ptr(flush);
    void *stream = s == Py_None ? NULL : as_ptr(s);
    if (PyErr_Occurred()) return NULL;
    if (reps <= 0 || reps > 100000) {
        PyErr_SetString(PyExc_ValueError, "reps must be in 1..100000");
        return NULL;
    }
    if (chain <= 0 || chain > 100000) {
        PyErr_SetString(PyExc_ValueError, "chain must be in 1..100000");
        return NULL;
    }
    chain_ctx cc = {fn, ctx, chain};
    if (chain > 1) {
        fn = run_chain;
        ctx = &cc;
    }
    float *ms = PyMem_Malloc(sizeof(float) * (size_t)reps);
    if (!ms) return PyErr_NoMemory();
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = acc_time_runs(fn, ctx, reps, d_flush, (size_t)flush_bytes, stream, ms);
    Py_END_ALLOW_THREADS
    if (st) {
        PyMem_Free(ms);
        return acc_py_cuda_raise(st, "timed run failed", cusparse);
    }
    PyObject *list = PyList_New(reps);
    for (int i = 0; list && i < reps; i++)
        PyList_SET_ITEM(list, i, PyFloat_FromDouble((double)ms[i] / chain));
    PyMem_Free(ms);
    return list;
}

static PyObject *py_time_tf32(PyObject *self, PyObject *args) {
    PyObject *tup, *vtup, *flush, *s;
    int reps;
    unsigned long long flush_bytes;
    int chain = 1;
    tf32_call c;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!iOKO|i", &PyTuple_Type, &tup, &PyTuple_Type, &vtup, &reps, &flush,
                          &flush_bytes, &s, &chain))
        return NULL;
    if (parse_tf32(tup, vtup, &c) < 0) return NULL;
    return time_runs(run_tf32, &c, reps, flush, flush_bytes, s, 0, chain);
}

static PyObject *py_time_cusparse(PyObject *self, PyObject *args) {
    PyObject *cap, *B, *C, *flush, *s;
    int reps, chain = 1;
    unsigned long long flush_bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOiOKO|i", &cap, &B, &C, &reps, &flush, &flush_bytes, &s, &chain))
        return NULL;
    cusparse_ctx ctx = {PyCapsule_GetPointer(cap, CUSPARSE_CAPSULE), as_ptr(B), as_ptr(C)};
    if (!ctx.plan || PyErr_Occurred()) return NULL;
    return time_runs(run_cusparse, &ctx, reps, flush, flush_bytes, s, 1, chain);
}

static PyMethodDef cuda_methods[] = {
    {"probe", py_probe, METH_NOARGS, "probe() -> dict(status, driver/runtime version, devices)"},
    {"device_info", py_device_info, METH_VARARGS, "device_info(dev) -> dict"},
    {"set_device", py_set_device, METH_VARARGS, "set_device(dev)"},
    {"get_device", py_get_device, METH_NOARGS, "get_device() -> int"},
    {"malloc", py_malloc, METH_VARARGS, "malloc(nbytes) -> device address"},
    {"free", py_free, METH_O, "free(address)"},
    {"malloc_ordered", py_malloc_ordered, METH_VARARGS,
     "malloc_ordered(nbytes, stream) -> device address in the order of stream (no synchronisation)"},
    {"upload", py_upload, METH_VARARGS,
     "upload(ndarray, stream) -> device address of a copy made in the order of stream (no synchronisation)"},
    {"host_slot", py_host_slot, METH_NOARGS, "host_slot() -> address of 1 KiB of mapped pinned memory"},
    {"host_slot_free", py_host_slot_free, METH_O, "host_slot_free(address)"},
    {"host_slot_read", py_host_slot_read, METH_VARARGS, "host_slot_read(address, count) -> [int64]"},
    {"side_stream", py_side_stream, METH_NOARGS,
     "side_stream() -> the library's side stream of the current device"},
    {"memcpy_htod", py_memcpy_htod, METH_VARARGS, "memcpy_htod(dst, ndarray, stream)"},
    {"memcpy_dtoh", py_memcpy_dtoh, METH_VARARGS, "memcpy_dtoh(ndarray, src, stream)"},
    {"memcpy_dtod", py_memcpy_dtod, METH_VARARGS, "memcpy_dtod(dst, src, nbytes, stream)"},
    {"memset", py_memset, METH_VARARGS, "memset(address, byte, nbytes, stream)"},
    {"synchronize", py_synchronize, METH_O, "synchronize(stream)"},
    {"stream_capturing", py_stream_capturing, METH_O,
     "stream_capturing(stream) -> bool (a CUDA-graph capture is under way)"},
    {"cusparse_load", py_cusparse_load, METH_VARARGS, "cusparse_load(path)"},
    {"cusparse_spmm_create", py_cusparse_create, METH_VARARGS, "-> capsule"},
    {"cusparse_spmm_run", py_cusparse_run, METH_VARARGS, "cusparse_spmm_run(plan, B, C, stream)"},
    {"fill_identity", py_fill_identity, METH_VARARGS, "fill_identity(d_int64, n, stream): d[i] = i"},
    {"bittcf_gpu_build", py_bittcf_gpu_build, METH_VARARGS,
     "bittcf_gpu_build(m, k, nnz, indptr, indices, values, perm|None, window_offsets, h_window_offsets, "
     "keep_blocks, stream[, defer[, method[, identity_perm[, validate[, keep_csr]]]]]) -> dict of device "
     "addresses, num_blocks, method, canonical, ready (identity_perm: a device int64 [m] that gets 0..m-1, "
     "with "
     "perm None; validate: a host CSR not checked on the host, checked on the device: ValueError if "
     "malformed; "
     "keep_csr: the build's upload of a host CSR kept, 'csr', offsets int64, columns int32, values float32)"},
    {"event_wait", py_event_wait, METH_O,
     "event_wait(handle): wait for a deferred build and destroy its event"},
    {"event_destroy", py_event_destroy, METH_O, "event_destroy(handle): destroy a deferred build's event"},
    {"half_spmm", py_half_spmm, METH_VARARGS, "half_spmm(args, stream): launch the FP16/BF16 BSR16 kernel"},
    {"time_half", py_time_half, METH_VARARGS, "time_half(args, reps, flush, flush_bytes, stream) -> [ms]"},
    {"half_pair_cols", py_half_pair_cols, METH_VARARGS,
     "half_pair_cols(args) -> int: the pair kernel's thread-block columns for these arguments (0: warps)"},
    {"half_quads_usable", py_half_quads_usable, METH_NOARGS,
     "half_quads_usable() -> bool: the current device runs BSR16 on quads of block rows (wgmma)"},
    {"half_tiles", py_half_tiles, METH_VARARGS,
     "half_tiles(block_meta, values, num_blocks, tiles, fmt, stream): BitTCF dense half tiles"},
    {"bittcf_bsr16_count", py_bittcf_bsr16_count, METH_VARARGS,
     "bittcf_bsr16_count(block_meta, window_offsets, W, num_blocks, counts, stream): BSR16 blocks per block "
     "row"},
    {"half_pack_groups", py_half_pack_groups, METH_VARARGS,
     "half_pack_groups(blocks, slots, block_values, num_blocks, out, stream): the quad kernel's group "
     "values"},
    {"half_round", py_half_round, METH_VARARGS,
     "half_round(src, dst, count, fmt, stream): float32 -> half bits"},
    {"tf32_round_values", py_tf32_round_values, METH_VARARGS,
     "tf32_round_values(values, count, stream): float32 values rounded to TF32 in place"},
    {"tf32_spmm", py_tf32_spmm, METH_VARARGS,
     "tf32_spmm(args14, variant5, stream[, workspace_floats, counters]): launch the TF32 BitTCF kernel"},
    {"tf32_schedule_price", py_tf32_schedule_price, METH_VARARGS,
     "tf32_schedule_price(window_offsets, W, caps, constants5, out, stream): every cap's schedule costs (8 "
     "int64 each)"},
    {"tf32_schedule_rows", py_tf32_schedule_rows, METH_VARARGS,
     "tf32_schedule_rows(window_offsets, W, cap, constants5, ntasks, max_cost, lpt, tasks, out, stream): one "
     "cap's rows"},
    {"tf32_shared_bytes", py_tf32_shared_bytes, METH_O, "tf32_shared_bytes(variant5) -> bytes (-1: invalid)"},
    {"tf32_narrow_max", py_tf32_narrow_max, METH_NOARGS,
     "tf32_narrow_max() -> the widest n the TF32 and BitTCF half launches run on CUDA cores"},
    {"time_tf32", py_time_tf32, METH_VARARGS,
     "time_tf32(args14, variant5, reps, flush, flush_bytes, stream[, chain]) -> [ms per launch]"},
    {"time_cusparse", py_time_cusparse, METH_VARARGS,
     "time_cusparse(plan, B, C, reps, flush, flush_bytes, stream[, chain]) -> [ms per launch]"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef cuda_module = {
    PyModuleDef_HEAD_INIT, "accspmm._cuda", "accspmm CUDA layer", -1, cuda_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cuda(void) {
    import_array();
    PyObject *m = PyModule_Create(&cuda_module);
    /* the schedule's encoding (accspmm._tf32 checks it against its own) */
    if (m && (PyModule_AddIntConstant(m, "TF32_WARPS", ACC_TF32_WARPS) < 0 ||
              PyModule_AddIntConstant(m, "TF32_TASK_WORDS", ACC_TF32_TASK_WORDS) < 0 ||
              PyModule_AddIntConstant(m, "TF32_CSR_LONG", ACC_TF32_CSR_LONG) < 0 ||
              PyModule_AddIntConstant(m, "TF32_CSR_WIDE_LONG", ACC_TF32_CSR_WIDE_LONG) < 0 ||
              acc_launcher_add(m) < 0 || acc_spgemm_add(m) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
