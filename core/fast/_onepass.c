/* One pass over a float32 activation: min, max, sum, sum of squares, and the
 * histogram sample (copied, or binned over [min, max]), read once.
 *
 * Why this exists: torch has no CPU kernel that returns min, max and the two
 * moments together, so the pure-torch path (core/stats.py, _moments) reads
 * every activation three times (aminmax, sum, dot) and pays the dispatcher
 * four times a layer, plus a NumPy gather for the sample. With every leaf of
 * a ResNet-50 summarised that was 2-4x the cost of the one-aminmax floor.
 *
 * Threads: the loop is split with OpenMP. Built with -fopenmp it needs
 * libgomp.so.1, the soname torch's own wheels load, so the loader hands it
 * torch's copy: the same worker threads torch's ops just used, no second
 * pool fighting them for the cores. core/onepass.py checks that (THREADED)
 * and its callers pass nthreads = 1 where it does not hold.
 *
 * NaN and infinity: the vector min/max do not propagate NaN reliably, but any
 * NaN or infinity makes the sum or the sum of squares non-finite, and so does
 * a finite value whose square overflows float32. The caller treats a
 * non-finite result as "not summarised here" and takes the exact torch path,
 * which counts them. Finite results are exact for min and max; the sums add
 * 8 values per lane in float32, then in double, closer than torch's own
 * float32 sum.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define HS_X86 1
#endif

/* Values a thread takes at least: below this a parallel region's start
 * (~2 us) costs more than it saves (measured on 2 cores: the split pays from
 * about 64k float32, 256 KiB). */
#define PAR_MIN (1 << 16)
/* Values per float32 partial sum block, 8 lanes x 4 accumulators x 8 steps. */
#define CHUNK 256
/* The same for pair_sums, lower: the model diff calls it in a forward hook, between
 * two of torch's parallel ops, while torch's OpenMP workers still spin, so a region
 * starts at once. On ResNet-18 in bfloat16 against float32 (2 threads), splitting from
 * 16k values instead of 128k took the 60 in-hook calls from 2.3 to 1.4-1.6 ms. */
#ifndef PAIR_PAR_MIN
#define PAIR_PAR_MIN (1 << 13)
#endif

typedef struct { double mn, mx, sum, sumsq; } moments_t;

static void moments_scalar(const float *p, int64_t n, moments_t *m) {
    float mn = INFINITY, mx = -INFINITY;
    double s = 0.0, q = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float x = p[i];
        mn = x < mn ? x : mn;
        mx = x > mx ? x : mx;
        s += x;
        q += (double)x * x;
    }
    m->mn = mn; m->mx = mx; m->sum = s; m->sumsq = q;
}

#ifdef HS_X86
__attribute__((target("avx2,fma")))
static inline __m256d widen_add(__m256d acc, __m256 v) {
    return _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                                            _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
}

__attribute__((target("avx2,fma")))
static void moments_avx2(const float *p, int64_t n, moments_t *m) {
    __m256 mn0 = _mm256_set1_ps(INFINITY), mn1 = mn0;
    __m256 mx0 = _mm256_set1_ps(-INFINITY), mx1 = mx0;
    __m256d s = _mm256_setzero_pd(), q = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + CHUNK <= n; i += CHUNK) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int64_t j = i; j < i + CHUNK; j += 32) {
            __m256 x0 = _mm256_loadu_ps(p + j), x1 = _mm256_loadu_ps(p + j + 8);
            __m256 x2 = _mm256_loadu_ps(p + j + 16), x3 = _mm256_loadu_ps(p + j + 24);
            mn0 = _mm256_min_ps(mn0, _mm256_min_ps(x0, x1));
            mn1 = _mm256_min_ps(mn1, _mm256_min_ps(x2, x3));
            mx0 = _mm256_max_ps(mx0, _mm256_max_ps(x0, x1));
            mx1 = _mm256_max_ps(mx1, _mm256_max_ps(x2, x3));
            a0 = _mm256_add_ps(a0, x0); a1 = _mm256_add_ps(a1, x1);
            a2 = _mm256_add_ps(a2, x2); a3 = _mm256_add_ps(a3, x3);
            b0 = _mm256_fmadd_ps(x0, x0, b0); b1 = _mm256_fmadd_ps(x1, x1, b1);
            b2 = _mm256_fmadd_ps(x2, x2, b2); b3 = _mm256_fmadd_ps(x3, x3, b3);
        }
        s = widen_add(s, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        q = widen_add(q, _mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
    }
    float mnv[8], mxv[8];
    double sv[4], qv[4];
    _mm256_storeu_ps(mnv, _mm256_min_ps(mn0, mn1));
    _mm256_storeu_ps(mxv, _mm256_max_ps(mx0, mx1));
    _mm256_storeu_pd(sv, s);
    _mm256_storeu_pd(qv, q);
    moments_t tail;
    moments_scalar(p + i, n - i, &tail);
    float mn = (float)tail.mn, mx = (float)tail.mx;
    for (int k = 0; k < 8; k++) {
        mn = mnv[k] < mn ? mnv[k] : mn;
        mx = mxv[k] > mx ? mxv[k] : mx;
    }
    m->mn = mn; m->mx = mx;
    m->sum = sv[0] + sv[1] + sv[2] + sv[3] + tail.sum;
    m->sumsq = qv[0] + qv[1] + qv[2] + qv[3] + tail.sumsq;
}
#endif

static int simd_ok(void) {
#ifdef HS_X86
    static int ok = -1;
    if (ok < 0) {
        __builtin_cpu_init();
        ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return ok;
#else
    return 0;
#endif
}

static void moments_range(const float *p, int64_t n, moments_t *m) {
#ifdef HS_X86
    if (simd_ok()) { moments_avx2(p, n, m); return; }
#endif
    moments_scalar(p, n, m);
}

#define MAX_THREADS 256

static void moments_parallel(const float *p, int64_t n, int nthreads, moments_t *out) {
    moments_t part[MAX_THREADS];
    int used = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    if (nthreads > 1 && n >= 2 * (int64_t)PAR_MIN) {
        int64_t by_size = n / PAR_MIN;
        if (by_size < nthreads) nthreads = (int)by_size;
#ifdef _OPENMP
        #pragma omp parallel num_threads(nthreads)
        {
            int t = omp_get_thread_num(), k = omp_get_num_threads();
            /* contiguous slices on CHUNK boundaries: each thread streams its own part */
            int64_t chunks = (n + CHUNK - 1) / CHUNK;
            int64_t lo = chunks * t / k * CHUNK, hi = chunks * (t + 1) / k * CHUNK;
            if (hi > n) hi = n;
            moments_range(p + lo, hi - lo, &part[t]);
            #pragma omp single
            used = k;
        }
#else
        moments_range(p, n, &part[0]);
#endif
    } else {
        moments_range(p, n, &part[0]);
    }
    moments_t r = part[0];
    for (int t = 1; t < used; t++) {
        r.mn = part[t].mn < r.mn ? part[t].mn : r.mn;
        r.mx = part[t].mx > r.mx ? part[t].mx : r.mx;
        r.sum += part[t].sum;
        r.sumsq += part[t].sumsq;
    }
    *out = r;
}

/* The histogram range of values spanning [mn, mx]: stats.py's _hist_range. */
static void hist_range(double mn, double mx, double *lo, double *hi) {
    if (mx > mn) { *lo = mn; *hi = mx; return; }
    double pad = fabs(mn) * 1e-6;
    if (pad < 0.5) pad = 0.5;  /* a constant tensor still gets a visible bar */
    *lo = mn - pad; *hi = mx + pad;
}

/* Adds the counts of x in `bins` equal bins over [lo, hi], the top edge in the
 * last bin: hist_sample.histogram_np's arithmetic (float64, truncation, then
 * the edges), so both paths put every value in the same bin. */
static void bin_scalar(const float *x, int64_t n, double lo, double scale, int64_t bins, int32_t *counts) {
    for (int64_t i = 0; i < n; i++) {
        int64_t k = (int64_t)(((double)x[i] - lo) * scale);
        k = k < bins - 1 ? k : bins - 1;
        k = k > 0 ? k : 0;
        counts[k]++;
    }
}

/* Sub-histograms of the vector loop, one per lane: most activations pile up in
 * a few bins, and an increment that waits on the same counter's last one
 * stalls; eight apart, they overlap (measured: 8 ~1.4x faster than 4). */
#define SUB_HISTS 8
#define SUB_BINS_MAX 256

#ifdef HS_X86
/* The same arithmetic, 8 values at a time: float64 (cvtps_pd), truncation
 * (cvttpd), the edges; the values lie in [lo, hi], so every index fits int32.
 * Bins `segs` segments of `len` values, `step` apart (the sample's runs) into
 * one set of sub-histograms. ~4x the scalar loop, which cost more than the
 * moments themselves on a 100k-value tensor. */
__attribute__((target("avx2,fma")))
static void bin_avx2(const float *x, int64_t segs, int64_t step, int64_t len, double lo, double scale,
                     int64_t bins, int32_t *counts) {
    int32_t sub[SUB_HISTS][SUB_BINS_MAX];
    memset(sub, 0, sizeof(sub));
    const __m256d vlo = _mm256_set1_pd(lo), vscale = _mm256_set1_pd(scale);
    const __m128i top = _mm_set1_epi32((int)bins - 1), zero = _mm_setzero_si128();
    int32_t k[8];
    for (int64_t s = 0; s < segs; s++) {
        const float *seg = x + s * step;
        int64_t i = 0;
        for (; i + 8 <= len; i += 8) {
            __m256 v = _mm256_loadu_ps(seg + i);
            __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
            __m128i ka = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_sub_pd(a, vlo), vscale));
            __m128i kb = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_sub_pd(b, vlo), vscale));
            _mm_storeu_si128((__m128i *)k, _mm_max_epi32(_mm_min_epi32(ka, top), zero));
            _mm_storeu_si128((__m128i *)(k + 4), _mm_max_epi32(_mm_min_epi32(kb, top), zero));
            sub[0][k[0]]++; sub[1][k[1]]++; sub[2][k[2]]++; sub[3][k[3]]++;
            sub[4][k[4]]++; sub[5][k[5]]++; sub[6][k[6]]++; sub[7][k[7]]++;
        }
        bin_scalar(seg + i, len - i, lo, scale, bins, counts);
    }
    for (int64_t j = 0; j < bins; j++)
        for (int h = 0; h < SUB_HISTS; h++)
            counts[j] += sub[h][j];
}
#endif

/* Bins `segs` segments of `len` values, `step` apart, over [lo, hi]. */
static void bin_values(const float *x, int64_t segs, int64_t step, int64_t len, double lo, double hi,
                       int64_t bins, int32_t *counts) {
    double scale = (double)bins / (hi - lo);
#ifdef HS_X86
    if (simd_ok() && bins <= SUB_BINS_MAX) { bin_avx2(x, segs, step, len, lo, scale, bins, counts); return; }
#endif
    for (int64_t s = 0; s < segs; s++)
        bin_scalar(x + s * step, len, lo, scale, bins, counts);
}

/* Binning split over threads (each its own counts, summed after): with the
 * moments on both cores, a single-threaded binning of the 16k-value sample
 * was half of the call on a 100k-value tensor. */
#define BIN_PAR_MIN 8192
#define BIN_THREADS_MAX 8

static void bin_parallel(const float *x, int64_t segs, int64_t step, int64_t len, double lo, double hi,
                         int64_t bins, int32_t *counts, int nthreads) {
    if (nthreads > BIN_THREADS_MAX) nthreads = BIN_THREADS_MAX;
#ifdef _OPENMP
    if (nthreads > 1 && segs * len >= BIN_PAR_MIN && bins <= SUB_BINS_MAX) {
        int32_t part[BIN_THREADS_MAX][SUB_BINS_MAX];
        int used = 1;
        #pragma omp parallel num_threads(nthreads)
        {
            int t = omp_get_thread_num(), k = omp_get_num_threads();
            memset(part[t], 0, (size_t)bins * sizeof(int32_t));
            if (segs == 1) {  /* one segment (a small tensor): split its values */
                int64_t a = len * t / k, b = len * (t + 1) / k;
                bin_values(x + a, 1, 0, b - a, lo, hi, bins, part[t]);
            } else {  /* the sample's runs: split the runs */
                int64_t a = segs * t / k, b = segs * (t + 1) / k;
                bin_values(x + a * step, b - a, step, len, lo, hi, bins, part[t]);
            }
            #pragma omp single
            used = k;
        }
        for (int t = 0; t < used; t++)
            for (int64_t j = 0; j < bins; j++)
                counts[j] += part[t][j];
        return;
    }
#endif
    (void)nthreads;
    bin_values(x, segs, step, len, lo, hi, bins, counts);
}

static void copy_sample(const float *p, int64_t n, int64_t runs, int64_t step, int64_t run_len, float *dst) {
    if (runs == 0) {
        if (n) memcpy(dst, p, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < runs; r++)
        memcpy(dst + r * run_len, p + r * step, (size_t)run_len * sizeof(float));
}

/* summary_f32(data, n, nthreads, runs, step, run_len, bins)
 *     -> (min, max, sum, sum of squares, bytes)
 *   data     address of n contiguous float32 values (tensor.data_ptr(): no
 *            torch or NumPy headers needed at build time)
 *   the sample: the n values when runs == 0, else runs runs of run_len
 *            values, run r starting at data + r * step
 *   bins == 0: bytes is the sample, float32, for the caller to bin over a
 *            range it chooses;
 *   bins > 0:  bytes is the sample's histogram, `bins` int32 counts over
 *            [min, max] (padded when constant); then nothing but these few
 *            numbers outlives the call. Only valid when the sums are finite.
 *            (int32: a sample is at most 2^31 values, and 64 counts in 256
 *            bytes stay in Python's small-object arenas instead of malloc's
 *            heap, where they would sit between the activations.)
 * The GIL is released while it reads: the window's thread runs meanwhile. */
static PyObject *summary_f32(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "summary_f32 takes 7 arguments");
        return NULL;
    }
    const float *p = (const float *)PyLong_AsVoidPtr(args[0]);
    int64_t n = PyLong_AsLongLong(args[1]);
    long nthreads = PyLong_AsLong(args[2]);
    int64_t runs = PyLong_AsLongLong(args[3]);
    int64_t step = PyLong_AsLongLong(args[4]);
    int64_t run_len = PyLong_AsLongLong(args[5]);
    int64_t bins = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    if (n < 0 || runs < 0 || run_len < 0 || step < 0 || bins < 0 || bins > (1 << 20)
            || (runs > 0 && (runs - 1) * step + run_len > n)) {
        PyErr_SetString(PyExc_ValueError, "summary_f32: sample runs fall outside the data");
        return NULL;
    }
    int64_t size = runs == 0 ? n : runs * run_len;
    Py_ssize_t nbytes = (Py_ssize_t)(bins > 0 ? bins * (int64_t)sizeof(int32_t) : size * (int64_t)sizeof(float));
    PyObject *result = PyByteArray_FromStringAndSize(NULL, nbytes);
    if (result == NULL) return NULL;
    moments_t m;
    Py_BEGIN_ALLOW_THREADS
    moments_parallel(p, n, (int)nthreads, &m);
    if (bins == 0) {
        copy_sample(p, n, runs, step, run_len, (float *)PyByteArray_AS_STRING(result));
    } else {
        int32_t *counts = (int32_t *)PyByteArray_AS_STRING(result);
        memset(counts, 0, (size_t)bins * sizeof(int32_t));
        if (isfinite(m.mn) && isfinite(m.mx) && isfinite(m.sum) && isfinite(m.sumsq)) {
            double lo, hi;
            hist_range(m.mn, m.mx, &lo, &hi);
            if (runs == 0)  /* a small tensor is its own sample */
                bin_parallel(p, 1, 0, n, lo, hi, bins, counts, (int)nthreads);
            else  /* the runs where they lie: no copy of the sample */
                bin_parallel(p, runs, step, run_len, lo, hi, bins, counts, (int)nthreads);
        }
    }
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(ddddN)", m.mn, m.mx, m.sum, m.sumsq, result);
}

/* ---- Two tensors compared in one pass (the model diff's per-layer comparison) ----
 *
 * A model diff compares every leaf's output in model A with model B's: the
 * largest |a - b| and the sums of (a - b)^2, a^2, b^2 and a*b. In torch that is
 * a widening copy of B's output, the difference, amax, amin and three dots:
 * six reads of each layer plus a write; here one read of each operand. Each
 * operand is float32 or bfloat16 (widened exactly: its 16 bits are the top of
 * a float32), the difference taken in float32 as torch's path takes it, so the
 * largest |a - b| is the same number. Sums as in moments_avx2: float32 within
 * a block of CHUNK values, then double. NaN or infinity make a sum non-finite:
 * the caller then takes the torch path, which handles them. */
typedef struct { double worst, dsq, asq, bsq, ab; } pair_t;

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float load_one(const void *p, int64_t i, int bf16) {
    return bf16 ? bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void pair_scalar(const void *a, int abf, const void *b, int bbf, int64_t n, pair_t *r) {
    float worst = 0.0f;
    double dsq = 0.0, asq = 0.0, bsq = 0.0, ab = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float x = load_one(a, i, abf), y = load_one(b, i, bbf);
        float d = y - x, ad = fabsf(d);
        worst = ad > worst ? ad : worst;
        dsq += (double)d * d; asq += (double)x * x; bsq += (double)y * y; ab += (double)x * y;
    }
    r->worst = worst; r->dsq = dsq; r->asq = asq; r->bsq = bsq; r->ab = ab;
}

#ifdef HS_X86
__attribute__((target("avx2,fma")))
static inline __m256 load8(const void *p, int64_t i, int bf16) {
    if (bf16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)p + i);
}

/* One block's float32 partials of the four sums; `abf`/`bbf` are constants at
 * each call site below, so the compiler builds one loop per pair of dtypes. */
__attribute__((target("avx2,fma"), always_inline))
static inline void pair_avx2_body(const void *a, int abf, const void *b, int bbf, int64_t n,
                                  pair_t *r) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 w0 = _mm256_setzero_ps(), w1 = w0;
    __m256d dsq = _mm256_setzero_pd(), asq = dsq, bsq = dsq, ab = dsq;
    int64_t i = 0;
    for (; i + CHUNK <= n; i += CHUNK) {
        __m256 d0 = _mm256_setzero_ps(), d1 = d0, a0 = d0, a1 = d0, b0 = d0, b1 = d0;
        __m256 c0 = d0, c1 = d0;
        for (int64_t j = i; j < i + CHUNK; j += 16) {
            __m256 x0 = load8(a, j, abf), x1 = load8(a, j + 8, abf);
            __m256 y0 = load8(b, j, bbf), y1 = load8(b, j + 8, bbf);
            __m256 e0 = _mm256_sub_ps(y0, x0), e1 = _mm256_sub_ps(y1, x1);
            w0 = _mm256_max_ps(w0, _mm256_andnot_ps(sign, e0));
            w1 = _mm256_max_ps(w1, _mm256_andnot_ps(sign, e1));
            d0 = _mm256_fmadd_ps(e0, e0, d0); d1 = _mm256_fmadd_ps(e1, e1, d1);
            a0 = _mm256_fmadd_ps(x0, x0, a0); a1 = _mm256_fmadd_ps(x1, x1, a1);
            b0 = _mm256_fmadd_ps(y0, y0, b0); b1 = _mm256_fmadd_ps(y1, y1, b1);
            c0 = _mm256_fmadd_ps(x0, y0, c0); c1 = _mm256_fmadd_ps(x1, y1, c1);
        }
        dsq = widen_add(dsq, _mm256_add_ps(d0, d1));
        asq = widen_add(asq, _mm256_add_ps(a0, a1));
        bsq = widen_add(bsq, _mm256_add_ps(b0, b1));
        ab = widen_add(ab, _mm256_add_ps(c0, c1));
    }
    float wv[8];
    double v[4][4];
    _mm256_storeu_ps(wv, _mm256_max_ps(w0, w1));
    _mm256_storeu_pd(v[0], dsq); _mm256_storeu_pd(v[1], asq);
    _mm256_storeu_pd(v[2], bsq); _mm256_storeu_pd(v[3], ab);
    const char *at = (const char *)a + i * (abf ? 2 : 4);
    const char *bt = (const char *)b + i * (bbf ? 2 : 4);
    pair_scalar(at, abf, bt, bbf, n - i, r);
    float worst = (float)r->worst;
    for (int k = 0; k < 8; k++) worst = wv[k] > worst ? wv[k] : worst;
    r->worst = worst;
    r->dsq += v[0][0] + v[0][1] + v[0][2] + v[0][3];
    r->asq += v[1][0] + v[1][1] + v[1][2] + v[1][3];
    r->bsq += v[2][0] + v[2][1] + v[2][2] + v[2][3];
    r->ab += v[3][0] + v[3][1] + v[3][2] + v[3][3];
}

__attribute__((target("avx2,fma")))
static void pair_avx2(const void *a, int abf, const void *b, int bbf, int64_t n, pair_t *r) {
    if (abf && bbf) pair_avx2_body(a, 1, b, 1, n, r);
    else if (abf) pair_avx2_body(a, 1, b, 0, n, r);
    else if (bbf) pair_avx2_body(a, 0, b, 1, n, r);
    else pair_avx2_body(a, 0, b, 0, n, r);
}
#endif

static void pair_range(const void *a, int abf, const void *b, int bbf, int64_t n, pair_t *r) {
#ifdef HS_X86
    if (simd_ok()) { pair_avx2(a, abf, b, bbf, n, r); return; }
#endif
    pair_scalar(a, abf, b, bbf, n, r);
}

static void pair_parallel(const void *a, int abf, const void *b, int bbf, int64_t n, int nthreads,
                          pair_t *out) {
    pair_t part[MAX_THREADS];
    int used = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    if (nthreads > 1 && n >= 2 * (int64_t)PAIR_PAR_MIN) {
        int64_t by_size = n / PAIR_PAR_MIN;
        if (by_size < nthreads) nthreads = (int)by_size;
#ifdef _OPENMP
        #pragma omp parallel num_threads(nthreads)
        {
            int t = omp_get_thread_num(), k = omp_get_num_threads();
            int64_t chunks = (n + CHUNK - 1) / CHUNK;
            int64_t lo = chunks * t / k * CHUNK, hi = chunks * (t + 1) / k * CHUNK;
            if (hi > n) hi = n;
            pair_range((const char *)a + lo * (abf ? 2 : 4), abf,
                       (const char *)b + lo * (bbf ? 2 : 4), bbf, hi - lo, &part[t]);
            #pragma omp single
            used = k;
        }
#else
        pair_range(a, abf, b, bbf, n, &part[0]);
#endif
    } else {
        pair_range(a, abf, b, bbf, n, &part[0]);
    }
    pair_t r = part[0];
    for (int t = 1; t < used; t++) {
        r.worst = part[t].worst > r.worst ? part[t].worst : r.worst;
        r.dsq += part[t].dsq; r.asq += part[t].asq; r.bsq += part[t].bsq; r.ab += part[t].ab;
    }
    *out = r;
}

/* pair_sums(a, a_bf16, b, b_bf16, n, nthreads)
 *     -> (max |a - b|, sum (a - b)^2, sum a^2, sum b^2, sum a*b)
 *   a, b     addresses of n contiguous values each (tensor.data_ptr()), float32,
 *            or bfloat16 where the flag after it is true
 * Only meaningful when the four sums are finite. The GIL is released while it reads. */
static PyObject *pair_sums(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "pair_sums takes 6 arguments");
        return NULL;
    }
    const void *a = PyLong_AsVoidPtr(args[0]);
    int abf = PyObject_IsTrue(args[1]);
    const void *b = PyLong_AsVoidPtr(args[2]);
    int bbf = PyObject_IsTrue(args[3]);
    int64_t n = PyLong_AsLongLong(args[4]);
    long nthreads = PyLong_AsLong(args[5]);
    if (PyErr_Occurred() || abf < 0 || bbf < 0) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "pair_sums: a negative length");
        return NULL;
    }
    pair_t r;
    Py_BEGIN_ALLOW_THREADS
    pair_parallel(a, abf, b, bbf, n, (int)nthreads, &r);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(ddddd)", r.worst, r.dsq, r.asq, r.bsq, r.ab);
}

static PyObject *uses_simd(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyBool_FromLong(simd_ok());
}

static PyObject *has_openmp(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
#ifdef _OPENMP
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"summary_f32", (PyCFunction)(void (*)(void))summary_f32, METH_FASTCALL,
     "min, max, sum, sum of squares and the histogram sample of float32 data, one pass"},
    {"pair_sums", (PyCFunction)(void (*)(void))pair_sums, METH_FASTCALL,
     "max |a - b| and the sums of (a - b)^2, a^2, b^2, a*b of two float32/bfloat16 arrays, one pass"},
    {"uses_simd", uses_simd, METH_NOARGS, "True when the AVX2 loop runs on this CPU"},
    {"has_openmp", has_openmp, METH_NOARGS, "True when built with OpenMP"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_onepass", "One-pass float32 activation summary (see _onepass.c).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__onepass(void) { return PyModule_Create(&module); }
