/* app.core.sampling._topk: the k largest values of a float32 row, in one pass over the row.
 *
 * Why C: sampling reads the logits row llama.cpp has just written, 262,144 floats (1 MB) for Gemma's
 * vocabulary, once per generated token. numpy needs a max, a compare, a nonzero and a partition: four
 * passes and a dozen calls, each slow on caches the decode step has just flushed (~0.45 ms a token on the
 * 2-core test machine, 3 % of a decode step). This does one pass (~0.1 ms): it takes the maximum of each
 * block of 256 values, and since the k largest block maxima are k distinct values, the k-th largest value of
 * the row is at least the smallest of them, t. Only blocks whose maximum reaches t can hold a top-k value,
 * and only those (usually about k blocks) are read again, through a k-entry min-heap.
 *
 * NaN values are never returned. Ties at the k-th value keep the lower token ids. Results are sorted by
 * value, largest first (ties: lower id first). app/core/sampling/chain.py uses this when it is built and falls
 * back to numpy otherwise (a machine without a C compiler); the tests compare the two.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SSE__) || defined(_M_X64) || defined(_M_AMD64)
#include <xmmintrin.h>
#define TOPK_SSE 1
#endif

#define BLOCK 256

/* Maximum of p[0..len), NaNs ignored (-inf if all are NaN). */
static float block_max(const float *p, Py_ssize_t len)
{
    Py_ssize_t i = 0;
    float m = -INFINITY;
#ifdef TOPK_SSE
    if (len >= 16) {
        /* _mm_max_ps(a, b) returns b where a is NaN: with the data first, NaNs never enter the maxima. */
        __m128 m0 = _mm_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
        for (; i + 16 <= len; i += 16) {
            m0 = _mm_max_ps(_mm_loadu_ps(p + i), m0);
            m1 = _mm_max_ps(_mm_loadu_ps(p + i + 4), m1);
            m2 = _mm_max_ps(_mm_loadu_ps(p + i + 8), m2);
            m3 = _mm_max_ps(_mm_loadu_ps(p + i + 12), m3);
        }
        m0 = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));
        float lanes[4];
        _mm_storeu_ps(lanes, m0);
        for (int j = 0; j < 4; j++)
            if (lanes[j] > m)
                m = lanes[j];
    }
#endif
    for (; i < len; i++)
        if (p[i] > m)
            m = p[i];
    return m;
}

/* Min-heap on (value, then higher id = smaller, so that ties keep lower ids). */
static int heap_less(float va, int64_t ia, float vb, int64_t ib)
{
    return va < vb || (va == vb && ia > ib);
}

static void sift_down(float *v, int64_t *id, Py_ssize_t n, Py_ssize_t i)
{
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_less(v[l], id[l], v[m], id[m]))
            m = l;
        if (r < n && heap_less(v[r], id[r], v[m], id[m]))
            m = r;
        if (m == i)
            return;
        float tv = v[i];
        v[i] = v[m];
        v[m] = tv;
        int64_t ti = id[i];
        id[i] = id[m];
        id[m] = ti;
        i = m;
    }
}

/* Offer (value, id) to a heap of capacity k holding *h entries. */
static void heap_offer(float *v, int64_t *id, Py_ssize_t k, Py_ssize_t *h, float value, int64_t ident)
{
    if (*h < k) {
        v[*h] = value;
        id[*h] = ident;
        (*h)++;
        if (*h == k)
            for (Py_ssize_t j = k / 2 - 1; j >= 0; j--)
                sift_down(v, id, k, j);
    } else if (heap_less(v[0], id[0], value, ident)) {
        v[0] = value;
        id[0] = ident;
        sift_down(v, id, k, 0);
    }
}

/* The k largest of x[0..n) into (vals, ids), unsorted; returns how many (< k only if x has fewer non-NaN). */
static Py_ssize_t top_k_unsorted(const float *x, Py_ssize_t n, Py_ssize_t k, float *bmax, float *vals,
                                 int64_t *ids)
{
    Py_ssize_t nb = (n + BLOCK - 1) / BLOCK, h = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        Py_ssize_t len = b == nb - 1 ? n - b * BLOCK : BLOCK;
        bmax[b] = block_max(x + b * BLOCK, len);
    }
    /* t: the k-th largest block maximum, a lower bound of the k-th largest value. With fewer than k blocks
       there is no such bound: every value is a candidate. */
    float t = -INFINITY;
    if (nb >= k) {
        for (Py_ssize_t b = 0; b < nb; b++)
            heap_offer(vals, ids, k, &h, bmax[b], (int64_t)b);
        t = vals[0];
        h = 0;
    }
    for (Py_ssize_t b = 0; b < nb; b++) {
        if (!(bmax[b] >= t))
            continue;
        const float *p = x + b * BLOCK;
        Py_ssize_t len = b == nb - 1 ? n - b * BLOCK : BLOCK;
        for (Py_ssize_t i = 0; i < len; i++)
            if (p[i] >= t)  /* false for NaN */
                heap_offer(vals, ids, k, &h, p[i], (int64_t)(b * BLOCK + i));
    }
    return h;
}

/* "f", or "f" with a native byte-order prefix: numpy exports a view of llama.cpp's logits (made through
   ctypes) as "<f". */
static int is_native_float(const char *fmt)
{
    if (fmt == NULL)
        return 0;
    if (fmt[0] == '@' || fmt[0] == '=' || (fmt[0] == (PY_LITTLE_ENDIAN ? '<' : '>')))
        fmt++;
    return fmt[0] == 'f' && fmt[1] == '\0';
}

static PyObject *py_top_k(PyObject *self, PyObject *args)
{
    PyObject *obj;
    Py_ssize_t k;
    (void)self;
    if (!PyArg_ParseTuple(args, "On:top_k", &obj, &k))
        return NULL;
    if (k < 0) {
        PyErr_SetString(PyExc_ValueError, "k must be >= 0");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *result = NULL;
    if (view.itemsize != 4 || !is_native_float(view.format)) {
        PyErr_SetString(PyExc_TypeError, "top_k needs a contiguous float32 buffer");
        goto done;
    }
    Py_ssize_t n = view.len / 4;
    if (k > n)
        k = n;
    Py_ssize_t nb = (n + BLOCK - 1) / BLOCK;
    float *bmax = PyMem_Malloc(sizeof(float) * (size_t)(nb + 1));
    float *vals = PyMem_Malloc(sizeof(float) * (size_t)(k + 1));
    int64_t *ids = PyMem_Malloc(sizeof(int64_t) * (size_t)(k + 1));
    if (!bmax || !vals || !ids) {
        PyErr_NoMemory();
        goto free_all;
    }
    Py_ssize_t h = 0;
    if (k > 0) {
        const float *x = (const float *)view.buf;
        Py_BEGIN_ALLOW_THREADS
        h = top_k_unsorted(x, n, k, bmax, vals, ids);
        Py_END_ALLOW_THREADS
    }
    /* a heap that never filled up is not a heap yet */
    if (h < k)
        for (Py_ssize_t j = h / 2 - 1; j >= 0; j--)
            sift_down(vals, ids, h, j);
    /* heap order -> largest first: pop the min-heap from the back */
    for (Py_ssize_t end = h - 1; end > 0; end--) {
        float tv = vals[0];
        vals[0] = vals[end];
        vals[end] = tv;
        int64_t ti = ids[0];
        ids[0] = ids[end];
        ids[end] = ti;
        sift_down(vals, ids, end, 0);
    }
    PyObject *id_list = PyList_New(h), *val_list = PyList_New(h);
    if (!id_list || !val_list) {
        Py_XDECREF(id_list);
        Py_XDECREF(val_list);
        goto free_all;
    }
    for (Py_ssize_t i = 0; i < h; i++) {
        PyObject *a = PyLong_FromLongLong((long long)ids[i]), *v = PyFloat_FromDouble((double)vals[i]);
        if (!a || !v) {
            Py_XDECREF(a);
            Py_XDECREF(v);
            Py_DECREF(id_list);
            Py_DECREF(val_list);
            goto free_all;
        }
        PyList_SET_ITEM(id_list, i, a);
        PyList_SET_ITEM(val_list, i, v);
    }
    result = Py_BuildValue("(NN)", id_list, val_list);
free_all:
    PyMem_Free(bmax);
    PyMem_Free(vals);
    PyMem_Free(ids);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"top_k", py_top_k, METH_VARARGS,
     "top_k(row, k) -> (ids, values): the k largest values of a contiguous float32 buffer, largest first "
     "(ties: lower id first; NaNs never returned)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_topk", "One-pass top-k over a float32 row (see app/core/sampling/_topk.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__topk(void)
{
    return PyModule_Create(&module);
}
