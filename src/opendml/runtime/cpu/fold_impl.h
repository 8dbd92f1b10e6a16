/* FOLD's loops for one accumulator type: included by fold.c once per type
 * with FOLD_SUFFIX (name suffix), FOLD_T (accumulator), FOLD_LOAD(p) (one
 * input element at p as FOLD_T), FOLD_STORE(p, v) (v rounded/stored as one
 * output element at p) and FOLD_SAME (1 when FOLD_T is the element's own
 * type, so a contiguous row is stored with memcpy). See fold.c. */

#define FOLD_CAT2(a, b) a##b
#define FOLD_CAT(a, b) FOLD_CAT2(a, b)
#define FN(name) FOLD_CAT(name, FOLD_SUFFIX)

/* Innermost dimension: for every window index kd whose window element can
 * land in output positions [x0, x1), in increasing order, add the
 * contributing input run into acc[0, x1 - x0). `in` points at the input
 * element of window row kflat_outer (kd = 0) and column bflat_outer (b = 0). */
static void FN(fold_inner)(const fold_job *j, FOLD_T *restrict acc, int64_t x0, int64_t x1,
                           const char *restrict in) {
    const int d = j->D - 1;
    const int64_t st = j->st[d], dil = j->dil[d], pad = j->pad[d], B = j->blocks[d];
    const int64_t ic = j->in_col, ir = j->in_row, es = j->es;
    int64_t k_lo = odml_ceil_div(x0 + pad - (B - 1) * st, dil), k_hi = odml_floor_div(x1 - 1 + pad, dil);
    if (k_lo < 0) k_lo = 0;
    if (k_hi > j->win[d] - 1) k_hi = j->win[d] - 1;
    for (int64_t kd = k_lo; kd <= k_hi; kd++) {
        const int64_t shift = kd * dil - pad;      /* output position of block 0 */
        int64_t lo, hi;
        if (st == 1) {
            lo = x0 - shift; hi = x1 - shift;
        } else {
            lo = odml_ceil_div(x0 - shift, st); hi = odml_ceil_div(x1 - shift, st);
        }
        if (lo < 0) lo = 0;
        if (hi > B) hi = B;
        if (hi <= lo) continue;
        FOLD_T *restrict a = acc + (lo * st + shift - x0);
        const char *restrict s = in + kd * ir + lo * ic;
        const int64_t n = hi - lo;
        if (st == 1 && ic == es) {
            for (int64_t i = 0; i < n; i++) a[i] += FOLD_LOAD(s + i * es);
        } else if (st == 1) {
            for (int64_t i = 0; i < n; i++) a[i] += FOLD_LOAD(s + i * ic);
        } else {
            for (int64_t i = 0; i < n; i++) a[i * st] += FOLD_LOAD(s + i * ic);
        }
    }
}

/* Outer dimension d at output position p[d]: every window index kd (in
 * increasing order) whose block index (p + pad - kd*dil) / st is whole and in
 * range admits the next dimension. */
static void FN(fold_outer)(const fold_job *j, FOLD_T *acc, int64_t x0, int64_t x1, const int64_t *p, int d,
                           const char *in) {
    if (d == j->D - 1) {
        FN(fold_inner)(j, acc, x0, x1, in);
        return;
    }
    const int64_t st = j->st[d], dil = j->dil[d], B = j->blocks[d], t0 = p[d] + j->pad[d];
    int64_t k_lo = odml_ceil_div(t0 - (B - 1) * st, dil), k_hi = odml_floor_div(t0, dil);
    if (k_lo < 0) k_lo = 0;
    if (k_hi > j->win[d] - 1) k_hi = j->win[d] - 1;
    for (int64_t kd = k_lo; kd <= k_hi; kd++) {
        const int64_t t = t0 - kd * dil;           /* b * st */
        if (st > 1 && t % st != 0) continue;
        FN(fold_outer)(j, acc, x0, x1, p, d + 1, in + kd * j->kstr[d] * j->in_row + (t / st) * j->bstr[d] * j->in_col);
    }
}

/* Units [u0, u1): unit u is tile u % ntiles of output row u / ntiles, rows
 * being (n, c, p[0], ..., p[D-2]) row-major. */
static void FN(fold_units)(const void *vjob, int64_t u0, int64_t u1, int part) {
    const fold_job *j = (const fold_job *)vjob;
    const int last = j->D - 1;
    FOLD_T *acc = (FOLD_T *)(void *)(j->scratch + (size_t)part * (size_t)j->tile * sizeof(FOLD_T));
    int64_t p[ODML_MAX_SPATIAL];
    int64_t t = u0 % j->ntiles, rem = u0 / j->ntiles;
    for (int d = last - 1; d >= 0; d--) { p[d] = rem % j->size[d]; rem /= j->size[d]; }
    int64_t c = rem % j->channels, n = rem / j->channels;
    const int64_t os = j->os[last], es = j->es;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t x0 = t * j->tile, x1 = x0 + j->tile < j->size[last] ? x0 + j->tile : j->size[last];
        const int64_t len = x1 - x0;
        memset(acc, 0, (size_t)len * sizeof(FOLD_T));     /* +0 in every accumulator type */
        FN(fold_outer)(j, acc, x0, x1, p, 0, j->src + n * j->in_n + c * j->K * j->in_row);
        char *out = j->dst + n * j->on + c * j->oc + x0 * os;
        for (int d = 0; d < last; d++) out += p[d] * j->os[d];
        if (FOLD_SAME && os == es) {
            memcpy(out, acc, (size_t)len * sizeof(FOLD_T));
        } else {
            for (int64_t i = 0; i < len; i++) FOLD_STORE(out + i * os, acc[i]);
        }
        if (++t < j->ntiles) continue;
        t = 0;
        int d = last - 1;
        for (; d >= 0; d--) {
            if (++p[d] < j->size[d]) break;
            p[d] = 0;
        }
        if (d < 0 && ++c == j->channels) { c = 0; n++; }
    }
}

#undef FN
#undef FOLD_T
#undef FOLD_SUFFIX
#undef FOLD_LOAD
#undef FOLD_STORE
#undef FOLD_SAME
