/*
 * cuda_launcher.c -- accspmm._cuda.Launcher: the steady-state call of a TF32 plan in one C function.
 *
 * The first call of a plan for a width n on a stream runs in Python (accspmm._tf32: schedule,
 * variant timing, split workspace) and registers the launch it chose here: (n, stream) ->
 * tasks, workspace, variant.  Every later call is Launcher.call(B, out, raw): it reads B's (and
 * out's) pointer, shape, strides, dtype and device straight from the PyTorch tensor or CuPy
 * array (no __cuda_array_interface__ dict), takes the library's current stream, allocates C
 * through the library's own allocator when out is None (PyTorch's DLPack allocator or
 * Tensor.new_empty, cupy.ndarray(shape, dtype): the caching allocator and CUDA-graph pools apply), and
 * launches.  No host synchronisation, no device allocation of ours, nothing a CUDA-graph capture refuses.
 *
 * Whatever it does not handle exactly returns None, and the Python layer takes the call: another
 * array type or dtype, a non-contiguous or empty array, another device, a tensor that requires
 * grad (unless raw: the autograd op's own kernel), an (n, stream) not registered yet, a closed
 * plan, a CUDA-graph capture of a launch with a split workspace (captures use their own).  The Python layer
 * then gives the result or the precise exception, so this file holds no error policy; it never raises except
 * for a failed launch.
 *
 * PyTorch tensors are read, their current stream found and C allocated through PyTorch's DLPack C
 * exchange API (torch.Tensor.__dlpack_c_exchange_api__, PyTorch >= 2.10: plain C calls, no Python
 * method calls) where the installed PyTorch has it, else through data_ptr(), stride() and friends,
 * torch._C._cuda_getCurrentRawStream and Tensor.new_empty.
 *
 * The libraries' types and functions are handed over by accspmm._device.register_interop the
 * first time the Python layer meets them (accspmm never imports torch or cupy itself).
 */
#include "glue.h"

#include "../cuda/accspmm_cuda.h"
#include "../cuda/half_spmm.h"
#include "../cuda/tf32_spmm.h"
#include "cuda_glue.h"
#include "dlpack_abi.h"

#include <structmember.h>

#define LAUNCH_SLOTS 16 /* cached (n, stream) launches per plan (the Python layer bounds streams to 4) */

/* The interop registry (set_interop): borrowed from nothing, owned here for the process. */
static struct {
    PyTypeObject *torch_tensor;    /* torch.Tensor (exact type: subclasses such as FakeTensor go to Python) */
    PyObject *torch_float32;       /* torch.float32 */
    PyObject *torch_stream;        /* torch._C._cuda_getCurrentRawStream(device) -> int */
    PyTypeObject *cupy_ndarray;    /* cupy.ndarray */
    PyObject *cupy_stream;         /* () -> int: the current CuPy stream's handle */
    PyObject *float32_descr;       /* numpy.dtype(numpy.float32) */
    const acc_dl_exchange_api *dl; /* PyTorch's DLPack C exchange API, or NULL */
    PyObject *dl_capsule;          /* keeps it alive */
} g;

static PyObject *s_requires_grad, *s_dtype, *s_get_device, *s_shape, *s_stride, *s_data_ptr, *s_new_empty,
    *s_is_neg, *s_strides, *s_data, *s_ptr, *s_device_id;

/* An element type the fast calls accept: DLPack code and bits, NumPy type (-1: none), bytes. */
typedef struct elem_type {
    int dl_code, dl_bits, npy, size;
} elem_type;

static const elem_type k_float32 = {ACC_DL_FLOAT, 32, NPY_FLOAT32, 4};
static const elem_type k_float16 = {ACC_DL_FLOAT, 16, NPY_FLOAT16, 2};
static const elem_type k_bfloat16 = {ACC_DL_BFLOAT, 16, -1, 2}; /* NumPy has no bfloat16 */

/* A dense GPU array as the kernel sees it. */
typedef struct gview {
    uintptr_t ptr;
    int64_t rows, cols; /* cols = 1 for a vector */
    int ndim;
    int device;
} gview;

typedef struct launch_entry {
    int64_t n;
    void *stream;
    const int32_t *tasks;
    int64_t num_tasks;
    float *workspace;
    int32_t *counters;
    acc_tf32_variant variant;
    acc_tf32_csr csr; /* narrow widths on A's CSR (csr.lanes > 0), else zeros */
} launch_entry;

typedef struct LauncherObject {
    PyObject_HEAD acc_tf32_args base; /* m, k, num_windows, elem and the format's device pointers */
    int device;
    elem_type et;    /* B's and C's element type: float32, or the half format of base.elem */
    int count, next; /* entries in use, next slot to overwrite when full */
    launch_entry entry[LAUNCH_SLOTS];
    unsigned long long fast_calls; /* calls completed here (tests check the steady state takes this path) */
} LauncherObject;

/* ---- reading arrays ------------------------------------------------------------------------ */

/* 1: *out = the int value of obj.name() (method) or obj.name (attribute); 0: not an int; -1: error. */
static int get_int(PyObject *obj, PyObject *name, int method, long long *out) {
    PyObject *o = method ? PyObject_CallMethodNoArgs(obj, name) : PyObject_GetAttr(obj, name);
    if (!o) return -1;
    int ok = PyLong_Check(o);
    if (ok) *out = PyLong_AsLongLong(o);
    Py_DECREF(o);
    if (ok && PyErr_Occurred()) return -1;
    return ok;
}

/* Shape and strides tuples (strides in units of `unit`) -> rows, cols, ndim; 1 when 1-D or 2-D and
 * C-contiguous. */
static int dense_layout(PyObject *shape, PyObject *strides, Py_ssize_t unit, gview *v) {
    if (!PyTuple_Check(shape) || !PyTuple_Check(strides)) return 0;
    const Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if ((nd != 1 && nd != 2) || PyTuple_GET_SIZE(strides) != nd) return 0;
    long long d[2] = {0, 1}, s[2] = {0, 0};
    for (Py_ssize_t i = 0; i < nd; i++) {
        d[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        s[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    }
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    v->ndim = (int)nd;
    v->rows = d[0];
    v->cols = nd == 2 ? d[1] : 1;
    if (v->rows <= 0 || v->cols <= 0) return 0; /* empty: the Python layer */
    const int inner_ok = nd == 1 || v->cols == 1 || s[1] == unit;
    const int outer_ok = v->rows == 1 || s[0] == unit * v->cols;
    return inner_ok && outer_ok;
}

/* PyTorch's DLPack exchange: 1 when t is a dense CUDA tensor of element type et, seen in *v. */
static int dl_view(PyObject *t, gview *v, const elem_type *et) {
    acc_dl_tensor d;
    if (g.dl->dltensor_from_py_object_no_sync(t, &d) != 0) {
        PyErr_Clear(); /* the attribute route decides */
        return 0;
    }
    if (d.device.device_type != ACC_DL_CUDA || d.dtype.code != et->dl_code || d.dtype.bits != et->dl_bits ||
        d.dtype.lanes != 1 || (d.ndim != 1 && d.ndim != 2))
        return 0;
    v->ndim = d.ndim;
    v->rows = d.shape[0];
    v->cols = d.ndim == 2 ? d.shape[1] : 1;
    if (v->rows <= 0 || v->cols <= 0) return 0;
    if (d.strides) {
        const int inner_ok = d.ndim == 1 || v->cols == 1 || d.strides[1] == 1;
        const int outer_ok = v->rows == 1 || d.strides[0] == (d.ndim == 2 ? v->cols : 1);
        if (!inner_ok || !outer_ok) return 0;
    }
    v->ptr = (uintptr_t)d.data + (uintptr_t)d.byte_offset;
    v->device = d.device.device_id;
    return 1;
}

static void dl_ignore_error(void *ctx, const char *kind, const char *message) {
    (void)ctx, (void)kind, (void)message; /* a failed allocation goes to Python, which reports it */
}

/* A new CUDA tensor of element type et, `ndim` dims (rows, cols), through PyTorch's allocator, via DLPack. */
static PyObject *dl_new(int device, int ndim, int64_t rows, int64_t cols, gview *vc, const elem_type *et) {
    int64_t shape[2] = {rows, cols};
    acc_dl_tensor proto = {
        NULL, {ACC_DL_CUDA, device}, ndim, {(uint8_t)et->dl_code, (uint8_t)et->dl_bits, 1}, shape, NULL, 0};
    acc_dl_managed *mt = NULL;
    void *obj = NULL;
    if (g.dl->managed_tensor_allocator(&proto, &mt, NULL, dl_ignore_error) != 0 || !mt) goto fail;
    vc->ptr = (uintptr_t)mt->dl_tensor.data + (uintptr_t)mt->dl_tensor.byte_offset;
    if (g.dl->managed_tensor_to_py_object_no_sync(mt, &obj) != 0 || !obj) {
        if (mt->deleter) mt->deleter(mt);
        goto fail;
    }
    vc->ndim = ndim;
    vc->rows = rows;
    vc->cols = ndim == 2 ? cols : 1;
    vc->device = device;
    return (PyObject *)obj;
fail:
    PyErr_Clear();
    return NULL;
}

/* 1 when obj.name (obj.name() with `method`) is `expected` (identity); 0 otherwise or on error. */
static int attr_is(PyObject *obj, PyObject *name, int method, PyObject *expected) {
    PyObject *o = method ? PyObject_CallMethodNoArgs(obj, name) : PyObject_GetAttr(obj, name);
    const int same = o == expected;
    Py_XDECREF(o);
    return same;
}

/* obj's shape and strides (PyTorch: stride(), in elements; CuPy: strides, in bytes) into *v;
 * 1 when 1-D or 2-D, C-contiguous and not empty. */
static int layout_of(PyObject *obj, int torch, gview *v, int itemsize) {
    PyObject *shape = PyObject_GetAttr(obj, s_shape);
    PyObject *strides = !shape  ? NULL
                        : torch ? PyObject_CallMethodNoArgs(obj, s_stride)
                                : PyObject_GetAttr(obj, s_strides);
    const int ok = strides ? dense_layout(shape, strides, torch ? 1 : itemsize, v) : 0;
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return ok;
}

/* 1: t is a contiguous float32 CUDA tensor (not needing grad unless `raw`) seen in *v; 0: not
 * handled here (no exception set). */
static int torch_view(PyObject *t, int raw, gview *v) {
    long long val;
    if (!raw && !attr_is(t, s_requires_grad, 0, Py_False)) goto fallback;
    if (!attr_is(t, s_is_neg, 1, Py_False)) goto fallback; /* a lazily negated view: Python resolves it */
    if (g.dl && dl_view(t, v, &k_float32)) return 1;
    if (!attr_is(t, s_dtype, 0, g.torch_float32)) goto fallback;
    if (get_int(t, s_get_device, 1, &val) <= 0 || val < 0) goto fallback; /* CPU tensors: -1 */
    v->device = (int)val;
    if (!layout_of(t, 1, v, 4) || get_int(t, s_data_ptr, 1, &val) <= 0) goto fallback;
    v->ptr = (uintptr_t)val;
    return 1;
fallback:
    PyErr_Clear();
    return 0;
}

/* The same for a CuPy array of element type et. */
static int cupy_view(PyObject *a, gview *v, const elem_type *et) {
    long long ptr = 0, dev = -1;
    PyObject *o = PyObject_GetAttr(a, s_dtype);
    int ok = o && et->npy >= 0 && PyArray_DescrCheck(o) && ((PyArray_Descr *)o)->type_num == et->npy &&
             PyArray_ISNBO(((PyArray_Descr *)o)->byteorder);
    Py_XDECREF(o);
    if (!ok || !layout_of(a, 0, v, et->size)) goto fallback;
    PyObject *mp = PyObject_GetAttr(a, s_data);
    ok = mp && get_int(mp, s_ptr, 0, &ptr) > 0 && get_int(mp, s_device_id, 0, &dev) > 0;
    Py_XDECREF(mp);
    if (!ok) goto fallback;
    v->ptr = (uintptr_t)ptr;
    v->device = (int)dev;
    return 1;
fallback:
    PyErr_Clear();
    return 0;
}

/* The library's current stream on `device` (NULL = legacy default); 0 when it cannot be read. */
static int current_stream(int torch, int device, void **stream) {
    PyObject *o;
    if (torch && g.dl && g.dl->current_work_stream(ACC_DL_CUDA, device, stream) == 0) return 1;
    if (torch) {
        PyErr_Clear();
        PyObject *d = PyLong_FromLong(device);
        if (!d) goto error;
        o = PyObject_CallOneArg(g.torch_stream, d);
        Py_DECREF(d);
    } else {
        o = PyObject_CallNoArgs(g.cupy_stream);
    }
    if (!o) goto error;
    *stream = PyLong_AsVoidPtr(o);
    Py_DECREF(o);
    if (PyErr_Occurred()) goto error;
    return 1;
error:
    PyErr_Clear();
    return 0;
}

/* A new C (m x n, or m for a vector) through the array library's allocator, or NULL (no exception). */
static PyObject *new_output(int torch, PyObject *B, const gview *vb, int64_t m, gview *vc) {
    if (torch && g.dl) return dl_new(vb->device, vb->ndim, m, vb->cols, vc, &k_float32);
    PyObject *shape = vb->ndim == 1 ? Py_BuildValue("(L)", (long long)m)
                                    : Py_BuildValue("(LL)", (long long)m, (long long)vb->cols);
    if (!shape) goto error;
    PyObject *C;
    if (torch) {
        PyObject *args[2] = {B, shape};
        C = PyObject_VectorcallMethod(s_new_empty, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    } else {
        C = PyObject_CallFunctionObjArgs((PyObject *)g.cupy_ndarray, shape, g.float32_descr, NULL);
    }
    Py_DECREF(shape);
    if (!C) goto error;
    if (!(torch ? torch_view(C, 1, vc)
                : cupy_view(C, vc, &k_float32))) { /* cannot happen for a fresh array */
        Py_DECREF(C);
        return NULL;
    }
    return C;
error:
    PyErr_Clear();
    return NULL;
}

/* 1 when out (seen in *vc) fits B (*vb): the plan's device, B's dimensions with m rows, no overlap
 * with B (elements of `size` bytes); otherwise the Python layer names what is wrong. */
static int out_fits(const gview *vb, const gview *vc, int device, int64_t m, int size) {
    const uintptr_t b_end = vb->ptr + (uintptr_t)(vb->rows * vb->cols * size);
    const uintptr_t c_end = vc->ptr + (uintptr_t)(vc->rows * vc->cols * size);
    return vc->device == device && vc->ndim == vb->ndim && vc->rows == m && vc->cols == vb->cols &&
           !(vc->ptr < b_end && vb->ptr < c_end);
}

/* 1: t is a contiguous CUDA tensor of type et that does not need grad, seen in *v (DLPack only). */
static int torch_half_view(PyObject *t, gview *v, const elem_type *et) {
    if (!g.dl || !attr_is(t, s_requires_grad, 0, Py_False) || !attr_is(t, s_is_neg, 1, Py_False) ||
        !dl_view(t, v, et)) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* A new array of the library (same device as vb): `ndim` dims (rows, cols) of type et. */
static PyObject *new_array(int torch, const gview *vb, int ndim, int64_t rows, int64_t cols,
                           const elem_type *et, gview *vc) {
    if (torch) return dl_new(vb->device, ndim, rows, cols, vc, et);
    PyObject *shape = ndim == 1 ? Py_BuildValue("(L)", (long long)rows)
                                : Py_BuildValue("(LL)", (long long)rows, (long long)cols);
    PyArray_Descr *descr = PyArray_DescrFromType(et->npy);
    PyObject *C =
        shape && descr ? PyObject_CallFunctionObjArgs((PyObject *)g.cupy_ndarray, shape, descr, NULL) : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(descr);
    if (C && !cupy_view(C, vc, et)) Py_CLEAR(C);
    if (!C) PyErr_Clear();
    return C;
}

/* ---- the Launcher type ------------------------------------------------------------------------ */

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    long long m, k, nw;
    unsigned long long perm, wo, meta, vals;
    int device, elem = ACC_TF32_ELEM_TF32;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args,
                          "LLLKKKKi|i;Launcher(m, k, num_windows, perm, window_offsets, block_meta, values, "
                          "device[, elem])",
                          &m, &k, &nw, &perm, &wo, &meta, &vals, &device, &elem))
        return NULL;
    if (m < 0 || k < 0 || nw != (m + 7) / 8 || elem < ACC_TF32_ELEM_TF32 || elem > ACC_TF32_ELEM_BF16) {
        PyErr_SetString(PyExc_ValueError, "Launcher: inconsistent sizes");
        return NULL;
    }
    LauncherObject *self = (LauncherObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    memset(&self->base, 0, sizeof self->base);
    self->base.m = m;
    self->base.k = k;
    self->base.num_windows = nw;
    self->base.perm = (const int64_t *)(uintptr_t)perm;
    self->base.window_offsets = (const int64_t *)(uintptr_t)wo;
    self->base.block_meta = (const int32_t *)(uintptr_t)meta;
    self->base.values = (const float *)(uintptr_t)vals;
    self->base.elem = elem;
    self->device = device;
    self->et = elem == ACC_TF32_ELEM_TF32 ? k_float32 : elem == ACC_TF32_ELEM_FP16 ? k_float16 : k_bfloat16;
    return (PyObject *)self;
}

/* register(n, stream, tasks, num_tasks, workspace, counters, variant5[, csr_offsets, csr_cols, csr_values,
 * csr_lanes, csr_long_parts, csr_num_parts, csr_parts_first]): the launch for (n, stream). */
static PyObject *launcher_register(LauncherObject *self, PyObject *args) {
    long long n, ntasks;
    unsigned long long stream, tasks, ws, cnt, csr_o = 0, csr_c = 0, csr_v = 0, csr_l = 0;
    long long csr_nl = 0;
    int csr_lanes = 0, csr_pf = 0;
    launch_entry e;
    memset(&e, 0, sizeof e);
    if (!PyArg_ParseTuple(
            args,
            "LKKLKK(iiiii)|KKKiKLi;register(n, stream, tasks, num_tasks, workspace, counters, "
            "variant[, csr_offsets, csr_cols, csr_values, csr_lanes, csr_long_parts, csr_num_parts, "
            "csr_parts_first])",
            &n, &stream, &tasks, &ntasks, &ws, &cnt, &e.variant.slice_s, &e.variant.depth,
            &e.variant.cache_l1, &e.variant.slice_major, &e.variant.staged, &csr_o, &csr_c, &csr_v,
            &csr_lanes, &csr_l, &csr_nl, &csr_pf))
        return NULL;
    e.csr = acc_tf32_csr_of(csr_o, csr_c, csr_v, csr_lanes, csr_l, csr_nl, csr_pf);
    if (n <= 0 || (e.csr.lanes <= 0 && (ntasks <= 0 || !tasks))) { /* the CSR kernel reads no tasks */
        PyErr_SetString(PyExc_ValueError, "register: n and num_tasks must be positive");
        return NULL;
    }
    e.n = n;
    e.stream = (void *)(uintptr_t)stream;
    e.tasks = (const int32_t *)(uintptr_t)tasks;
    e.num_tasks = ntasks;
    e.workspace = (float *)(uintptr_t)ws;
    e.counters = (int32_t *)(uintptr_t)cnt;
    int slot = -1;
    for (int i = 0; i < self->count; i++)
        if (self->entry[i].n == n && self->entry[i].stream == e.stream) slot = i;
    if (slot < 0 && self->count < LAUNCH_SLOTS) slot = self->count++;
    if (slot < 0) {
        slot = self->next;
        self->next = (self->next + 1) % LAUNCH_SLOTS;
    }
    self->entry[slot] = e;
    Py_RETURN_NONE;
}

/* clear(): forgets every registered launch (the Python layer freed or regrew a workspace, or closed). */
static PyObject *launcher_clear(LauncherObject *self, PyObject *noargs) {
    (void)noargs;
    self->count = self->next = 0;
    Py_RETURN_NONE;
}

/* B (or C) of a Launcher call in *v: float32 (TF32 plans) or the plan's half format (then never a
 * tensor that needs grad: autograd's op is in Python for half plans). */
static int launcher_view(const LauncherObject *self, int torch, PyObject *a, int raw, gview *v) {
    if (self->base.elem == ACC_TF32_ELEM_TF32)
        return torch ? torch_view(a, raw, v) : cupy_view(a, v, &k_float32);
    return torch ? torch_half_view(a, v, &self->et) : cupy_view(a, v, &self->et);
}

/* call(B, out[, raw]) -> C, or None where the Python layer must take the call (module comment). */
static PyObject *launcher_call(LauncherObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "call(B, out[, raw]) takes 2 or 3 arguments");
        return NULL;
    }
    PyObject *B = args[0], *out = args[1];
    const int raw = nargs == 3 && PyObject_IsTrue(args[2]) == 1;
    PyTypeObject *tp = Py_TYPE(B);
    int torch;
    if (g.torch_tensor && tp == g.torch_tensor)
        torch = 1;
    else if (g.cupy_ndarray && tp == g.cupy_ndarray)
        torch = 0;
    else
        Py_RETURN_NONE;
    if (self->count == 0) Py_RETURN_NONE;
    gview vb, vc;
    if (!launcher_view(self, torch, B, raw, &vb)) Py_RETURN_NONE;
    const acc_tf32_args *base = &self->base;
    if (vb.device != self->device || vb.rows != base->k || base->m == 0) Py_RETURN_NONE;
    int cur = -1;
    if (acc_cuda_get_device(&cur) != ACC_SUCCESS || cur != self->device) Py_RETURN_NONE;
    void *stream = NULL;
    if (!current_stream(torch, vb.device, &stream)) Py_RETURN_NONE;
    const launch_entry *e = NULL;
    for (int i = 0; i < self->count; i++)
        if (self->entry[i].n == vb.cols && self->entry[i].stream == stream) e = &self->entry[i];
    if (!e) Py_RETURN_NONE;
    if (e->workspace) { /* a capture must use the plan's capture workspace (accspmm._tf32._workspace) */
        int capturing = 1;
        if (acc_cuda_stream_capturing(stream, &capturing) != ACC_SUCCESS || capturing) Py_RETURN_NONE;
    }
    PyObject *C;
    if (out == Py_None) {
        C = base->elem == ACC_TF32_ELEM_TF32
                ? new_output(torch, B, &vb, base->m, &vc)
                : new_array(torch, &vb, vb.ndim, base->m, vb.cols, &self->et, &vc);
        if (!C) Py_RETURN_NONE;
    } else {
        if (Py_TYPE(out) != tp || !launcher_view(self, torch, out, 0, &vc)) Py_RETURN_NONE;
        if (!out_fits(&vb, &vc, self->device, base->m, self->et.size)) Py_RETURN_NONE;
        Py_INCREF(out);
        C = out;
    }
    acc_tf32_args a = *base;
    a.n = vb.cols;
    a.tasks = e->tasks;
    a.num_tasks = e->num_tasks;
    a.workspace = e->workspace;
    a.counters = e->counters;
    a.csr = e->csr;
    a.B = (const float *)vb.ptr;
    a.C = (float *)vc.ptr;
    /* The GIL stays held: a launch only enqueues (a few µs), and giving the GIL up would let the
     * call wait for another thread's whole switch interval to get it back (PyTorch's ops keep it
     * for their launches too). */
    const int st = acc_tf32_spmm(&a, &e->variant, stream);
    if (st) {
        Py_DECREF(C);
        return acc_py_cuda_raise(
            st, base->elem ? "half-precision SpMM launch failed" : "TF32 SpMM launch failed", 0);
    }
    self->fast_calls++;
    return C;
}

static PyMethodDef launcher_methods[] = {
    {"call", (PyCFunction)(void (*)(void))launcher_call, METH_FASTCALL,
     "call(B, out, raw) -> C, or None where the Python layer must take the call"},
    {"register", (PyCFunction)launcher_register, METH_VARARGS,
     "register(n, stream, tasks, num_tasks, workspace, counters, variant5[, csr_offsets, csr_cols, "
     "csr_values, csr_lanes, csr_long_parts, csr_num_parts, csr_parts_first])"},
    {"clear", (PyCFunction)launcher_clear, METH_NOARGS, "clear(): forget every registered launch"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef launcher_members[] = {
    {"fast_calls", T_ULONGLONG, offsetof(LauncherObject, fast_calls), READONLY, "calls completed in C"},
    {"registered", T_INT, offsetof(LauncherObject, count), READONLY, "registered (n, stream) launches"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "accspmm._cuda.Launcher",
    .tp_basicsize = sizeof(LauncherObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The steady-state call of a TF32 plan (csrc/cuda_launcher.c).",
    .tp_new = launcher_new,
    .tp_methods = launcher_methods,
    .tp_members = launcher_members,
};

/* ---- the HalfLauncher type: the whole call of an FP16/BF16 plan (accspmm._half) ----------------
 * A half plan decides nothing per width, so every call with a PyTorch tensor (through the DLPack
 * exchange API) or a CuPy array of the plan's half dtype, contiguous, on the plan's device, with out
 * None or of the same dtype, is launched here; the split rows' workspace, when the plan has any, is a
 * temporary of the library's allocator on the call's stream.  Everything else (float32 B, float32
 * out, autograd, errors) returns None: accspmm._half takes the call. */

/* A HalfLauncher `to` that takes the calls of min_n <= n <= max_n (max_n < 0: no bound), n a multiple of
 * step, and below sliced_n only widths that fill their last column slice (acc_half_fills_slices). */
typedef struct half_route {
    PyObject *to;
    int64_t min_n, max_n, step, sliced_n;
} half_route;

#define HALF_ROUTES 2 /* e.g. quads at narrow widths, then pairs at wide ones (accspmm._half) */

static int half_route_takes(const half_route *r, int64_t n) {
    return r->to && n >= r->min_n && (r->max_n < 0 || n <= r->max_n) && n % r->step == 0 &&
           (n >= r->sliced_n || acc_half_fills_slices(n));
}

typedef struct HalfLauncherObject {
    PyObject_HEAD acc_half_args base; /* the format and schedule (n, B, C, workspace per call) */
    int device;
    int64_t slots; /* workspace slots of ACC_HALF_WINDOW_ROWS(pairs) x max(n, 8) floats */
    elem_type et;
    unsigned long long fast_calls;
    half_route wide[HALF_ROUTES]; /* other layouts of the matrix that take some widths (set_wide): the first
                                   * route that takes n (half_route_takes) */
    PyObject *narrow; /* a Launcher that takes the calls of n <= narrow_max_n (set_narrow), or NULL: Python */
    int64_t narrow_max_n;
} HalfLauncherObject;

static PyObject *half_launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    long long m, k, ntasks, nsplits, slots, makespan, entries, longest;
    unsigned long long perm, bo, cols, vals, masks, tasks, splits, po, pc, pb;
    int fmt, device, pairs;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "HalfLauncher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(
            args,
            "LLKKKKKKLKLLiiiKKKLLL;HalfLauncher(m, k, perm, brow_offsets, block_cols, block_values, "
            "block_masks, tasks, num_tasks, splits, num_splits, slots, fmt, device, pairs, "
            "pair_offsets, pair_cols, pair_blocks, quad_makespan, pair_entries, pair_longest)",
            &m, &k, &perm, &bo, &cols, &vals, &masks, &tasks, &ntasks, &splits, &nsplits, &slots, &fmt,
            &device, &pairs, &po, &pc, &pb, &makespan, &entries, &longest))
        return NULL;
    if (m < 0 || k < 0 || ntasks < 0 || nsplits < 0 || slots < 0 ||
        (fmt != ACC_HALF_FP16 && fmt != ACC_HALF_BF16)) {
        PyErr_SetString(PyExc_ValueError, "HalfLauncher: inconsistent arguments");
        return NULL;
    }
    HalfLauncherObject *self = (HalfLauncherObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    acc_half_args *a = &self->base;
    memset(a, 0, sizeof *a);
    a->m = m;
    a->k = k;
    a->num_brows = (m + 15) / 16;
    a->perm = (const int64_t *)(uintptr_t)perm;
    a->brow_offsets = (const int64_t *)(uintptr_t)bo;
    a->block_cols = (const int32_t *)(uintptr_t)cols;
    a->block_values = (const uint16_t *)(uintptr_t)vals;
    a->block_masks = (const uint64_t *)(uintptr_t)masks;
    a->tasks = (const int64_t *)(uintptr_t)tasks;
    a->num_tasks = ntasks;
    a->splits = (const int64_t *)(uintptr_t)splits;
    a->num_splits = nsplits;
    a->fmt = fmt;
    a->pairs = pairs;
    acc_half_set_groups(a, (uintptr_t)po, (uintptr_t)pc, (uintptr_t)pb);
    a->quad_makespan = makespan;
    a->pair_entries = entries;
    a->pair_longest = longest;
    self->slots = slots;
    self->device = device;
    self->et = fmt == ACC_HALF_FP16 ? k_float16 : k_bfloat16;
    return (PyObject *)self;
}

/* The index of the first route of `self` that takes width n (set_wide), or -1: `self` takes it. */
static int half_route_of(const HalfLauncherObject *self, int64_t n) {
    for (int r = 0; r < HALF_ROUTES; r++)
        if (half_route_takes(&self->wide[r], n)) return r;
    return -1;
}

/* call(B, out) -> C, or None where the Python layer must take the call. */
static PyObject *half_launcher_call(HalfLauncherObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "call(B, out) takes 2 arguments");
        return NULL;
    }
    PyObject *B = args[0], *out = args[1];
    PyTypeObject *tp = Py_TYPE(B);
    int torch;
    if (g.torch_tensor && tp == g.torch_tensor)
        torch = 1;
    else if (g.cupy_ndarray && tp == g.cupy_ndarray)
        torch = 0;
    else
        Py_RETURN_NONE;
    gview vb, vc;
    if (!(torch ? torch_half_view(B, &vb, &self->et) : cupy_view(B, &vb, &self->et))) Py_RETURN_NONE;
    if (vb.cols <=
        self->narrow_max_n) /* the narrow widths' Launcher (its own counts), or Python until it is made */
        return self->narrow ? launcher_call((LauncherObject *)self->narrow, args, nargs) : Py_NewRef(Py_None);
    HalfLauncherObject *outer = self; /* counts the call */
    const int route = half_route_of(self, vb.cols);
    if (route >= 0) self = (HalfLauncherObject *)outer->wide[route].to;
    const acc_half_args *base = &self->base;
    if (vb.device != self->device || vb.rows != base->k || base->m == 0 || base->num_tasks == 0)
        Py_RETURN_NONE;
    int cur = -1;
    if (acc_cuda_get_device(&cur) != ACC_SUCCESS || cur != self->device) Py_RETURN_NONE;
    void *stream = NULL;
    if (!current_stream(torch, vb.device, &stream)) Py_RETURN_NONE;
    PyObject *C;
    if (out == Py_None) {
        C = new_array(torch, &vb, vb.ndim, base->m, vb.cols, &self->et, &vc);
        if (!C) Py_RETURN_NONE;
    } else {
        if (Py_TYPE(out) != tp ||
            !(torch ? torch_half_view(out, &vc, &self->et) : cupy_view(out, &vc, &self->et)))
            Py_RETURN_NONE;
        if (!out_fits(&vb, &vc, self->device, base->m, 2)) Py_RETURN_NONE;
        Py_INCREF(out);
        C = out;
    }
    int st;
    for (;;) {
        acc_half_args a = self->base;
        a.n = vb.cols;
        a.B = (const uint16_t *)vb.ptr;
        a.C = (void *)vc.ptr;
        PyObject *ws = NULL; /* the split rows' workspace: freed (stream-ordered) after the launch */
        if (a.num_splits > 0) {
            gview vw;
            /* padded widths (acc_half_spmm): the workspace too */
            ws = new_array(torch, &vb, 1,
                           self->slots * ACC_HALF_WINDOW_ROWS(a.pairs) * ACC_HALF_WS_COLS(a.pairs, a.n), 1,
                           &k_float32, &vw);
            if (!ws) {
                Py_DECREF(C);
                Py_RETURN_NONE;
            }
            a.workspace = (float *)vw.ptr;
        }
        st = acc_half_spmm(&a, stream);
        Py_XDECREF(ws);
        /* quads where this device or the pool cannot take them (nothing launched): the base layout */
        if (st != ACC_ERR_UNSUPPORTED || self == outer) break;
        self = outer;
    }
    if (st) {
        Py_DECREF(C);
        return acc_py_cuda_raise(st, "half-precision SpMM launch failed", 0);
    }
    outer->fast_calls++;
    return C;
}

/* set_wide(launcher, min_n, step=1, sliced_n=0, max_n=-1, route=0): calls of min_n <= n <= max_n (max_n < 0:
 * no bound), n a multiple of step and, below sliced_n, a width that fills its thread blocks' column slices
 * (acc_half_fills_slices), go to `launcher` (another plan layout of the same matrix, e.g. BSR16 on pairs of
 * block rows), unless an earlier route takes them; None detaches route `route`. */
static PyObject *half_launcher_set_wide(HalfLauncherObject *self, PyObject *args) {
    PyObject *wide;
    long long min_n, step = 1, sliced_n = 0, max_n = -1;
    int route = 0;
    if (!PyArg_ParseTuple(args, "OL|LLLi", &wide, &min_n, &step, &sliced_n, &max_n, &route)) return NULL;
    if (step < 1 || route < 0 || route >= HALF_ROUTES) {
        PyErr_SetString(PyExc_ValueError, "set_wide's step must be at least 1 and its route 0 or 1");
        return NULL;
    }
    int own = 0; /* whether `wide` has routes of its own */
    if (wide != Py_None && Py_TYPE(wide) == Py_TYPE((PyObject *)self))
        for (int r = 0; r < HALF_ROUTES; r++)
            own |= ((HalfLauncherObject *)wide)->wide[r].to != NULL;
    if (wide != Py_None && (Py_TYPE(wide) != Py_TYPE((PyObject *)self) || wide == (PyObject *)self || own)) {
        PyErr_SetString(PyExc_TypeError, "set_wide takes another HalfLauncher without one of its own");
        return NULL;
    }
    half_route *r = &self->wide[route];
    Py_XSETREF(r->to, wide == Py_None ? NULL : Py_NewRef(wide));
    r->min_n = min_n;
    r->max_n = max_n;
    r->step = step;
    r->sliced_n = sliced_n;
    Py_RETURN_NONE;
}

/* set_narrow(launcher, max_n): calls of n <= max_n go to `launcher` (a Launcher of the same matrix: the
 * TF32 kernel's narrow widths on half operands), or with None to the Python layer (which makes that
 * launcher at the first such call); max_n 0 keeps every width here. */
static PyObject *half_launcher_set_narrow(HalfLauncherObject *self, PyObject *args) {
    PyObject *narrow;
    long long max_n;
    if (!PyArg_ParseTuple(args, "OL", &narrow, &max_n)) return NULL;
    if (narrow != Py_None && Py_TYPE(narrow) != &LauncherType) {
        PyErr_SetString(PyExc_TypeError, "set_narrow takes a Launcher or None");
        return NULL;
    }
    Py_XSETREF(self->narrow, narrow == Py_None ? NULL : Py_NewRef(narrow));
    self->narrow_max_n = max_n;
    Py_RETURN_NONE;
}

static void half_launcher_dealloc(HalfLauncherObject *self) {
    Py_CLEAR(self->narrow);
    for (int r = 0; r < HALF_ROUTES; r++)
        Py_CLEAR(self->wide[r].to);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* route_for(n): the index of the route (set_wide) that takes a call of width n, or -1 (this launcher). */
static PyObject *half_launcher_route_for(HalfLauncherObject *self, PyObject *args) {
    long long n;
    if (!PyArg_ParseTuple(args, "L", &n)) return NULL;
    return PyLong_FromLong(half_route_of(self, n));
}

static PyObject *half_launcher_fills_slices(PyObject *Py_UNUSED(cls), PyObject *args) {
    long long n;
    if (!PyArg_ParseTuple(args, "L", &n)) return NULL;
    return PyBool_FromLong(acc_half_fills_slices(n));
}

static PyMethodDef half_launcher_methods[] = {
    {"call", (PyCFunction)(void (*)(void))half_launcher_call, METH_FASTCALL,
     "call(B, out) -> C, or None where the Python layer must take the call"},
    {"set_wide", (PyCFunction)(void (*)(void))half_launcher_set_wide, METH_VARARGS,
     "set_wide(launcher, min_n, step=1, sliced_n=0, max_n=-1, route=0): calls of min_n <= n <= max_n "
     "(max_n < 0: no bound), a multiple of step and, below sliced_n, filling their column slices, go to "
     "launcher unless an earlier route takes them"},
    {"route_for", (PyCFunction)half_launcher_route_for, METH_VARARGS,
     "route_for(n): the index of the route (set_wide) that takes a call of width n, or -1 (this launcher)"},
    {"fills_slices", (PyCFunction)half_launcher_fills_slices, METH_VARARGS | METH_STATIC,
     "fills_slices(n): whether width n runs the thread-block pair kernel with its last column slice over "
     "half full"},
    {"set_narrow", (PyCFunction)(void (*)(void))half_launcher_set_narrow, METH_VARARGS,
     "set_narrow(launcher, max_n): calls of n <= max_n go to a (TF32-kernel) Launcher"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef half_launcher_members[] = {
    {"fast_calls", T_ULONGLONG, offsetof(HalfLauncherObject, fast_calls), READONLY, "calls completed in C"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject HalfLauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "accspmm._cuda.HalfLauncher",
    .tp_basicsize = sizeof(HalfLauncherObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The call of an FP16/BF16 plan (csrc/cuda_launcher.c).",
    .tp_new = half_launcher_new,
    .tp_dealloc = (destructor)half_launcher_dealloc,
    .tp_methods = half_launcher_methods,
    .tp_members = half_launcher_members,
};

/* set_interop("torch", torch.Tensor, torch.float32, raw_stream_fn[, exchange_api_capsule]) or
 * set_interop("cupy", cupy.ndarray, current_stream_ptr_fn, numpy.dtype("float32")). */
static PyObject *py_set_interop(PyObject *self, PyObject *args) {
    const char *lib;
    PyObject *type, *a, *b, *c = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "sO!OO|O", &lib, &PyType_Type, &type, &a, &b, &c)) return NULL;
    if (!PyCallable_Check(strcmp(lib, "torch") == 0 ? b : a)) {
        PyErr_SetString(PyExc_TypeError, "set_interop: the stream getter must be callable");
        return NULL;
    }
    if (strcmp(lib, "torch") == 0) {
        const acc_dl_exchange_api *api = NULL;
        if (c && c != Py_None) { /* torch.Tensor.__dlpack_c_exchange_api__ */
            api = PyCapsule_GetPointer(c, "dlpack_exchange_api");
            if (!api) return NULL;
            if (api->version.major != 1) api = NULL; /* an ABI we do not know: the attribute route */
        }
        Py_XINCREF(c);
        Py_XSETREF(g.dl_capsule, c);
        g.dl = api;
        Py_INCREF(type), Py_INCREF(a), Py_INCREF(b);
        Py_XSETREF(g.torch_float32, a);
        Py_XSETREF(g.torch_stream, b);
        Py_XSETREF(g.torch_tensor, (PyTypeObject *)type);
    } else if (strcmp(lib, "cupy") == 0 && PyArray_DescrCheck(b)) {
        Py_INCREF(type), Py_INCREF(a), Py_INCREF(b);
        Py_XSETREF(g.cupy_stream, a);
        Py_XSETREF(g.float32_descr, b);
        Py_XSETREF(g.cupy_ndarray, (PyTypeObject *)type);
    } else {
        PyErr_Format(PyExc_ValueError, "set_interop: unknown library or arguments for %s", lib);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef interop_method = {
    "set_interop", py_set_interop, METH_VARARGS,
    "set_interop(lib, array type, ...): hands a library's types to the fast call"};

int acc_launcher_add(PyObject *module) {
#define INTERN(var, text)                                                                                    \
    if (!(var = PyUnicode_InternFromString(text))) return -1;
    INTERN(s_requires_grad, "requires_grad")
    INTERN(s_dtype, "dtype")
    INTERN(s_get_device, "get_device")
    INTERN(s_shape, "shape")
    INTERN(s_stride, "stride")
    INTERN(s_data_ptr, "data_ptr")
    INTERN(s_new_empty, "new_empty")
    INTERN(s_is_neg, "is_neg")
    INTERN(s_strides, "strides")
    INTERN(s_data, "data")
    INTERN(s_ptr, "ptr")
    INTERN(s_device_id, "device_id")
#undef INTERN
    if (PyType_Ready(&LauncherType) < 0 || PyType_Ready(&HalfLauncherType) < 0) return -1;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(module, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        return -1;
    }
    Py_INCREF(&HalfLauncherType);
    if (PyModule_AddObject(module, "HalfLauncher", (PyObject *)&HalfLauncherType) < 0) {
        Py_DECREF(&HalfLauncherType);
        return -1;
    }
    PyObject *fn = PyCFunction_NewEx(&interop_method, NULL, NULL);
    if (!fn || PyModule_AddObject(module, "set_interop", fn) < 0) {
        Py_XDECREF(fn);
        return -1;
    }
    return 0;
}
