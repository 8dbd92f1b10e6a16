/* FOLD's loops for one accumulator type, included by fold.c once per type with FOLD_SUFFIX (name suffix), FOLD_T
 * (accumulator), for floating-point sums FOLD_NAN (FOLD_T's canonical quiet NaN, stored for every NaN sum) and, where
 * FOLD_T is not the element's type, FOLD_ES (bytes per element), FOLD_LOAD(p) (the input element at p as FOLD_T),
 * FOLD_STORE(p, v) (v rounded and stored as the output element at p) and FOLD_SAME 0; else the elements are FOLD_T,
 * moved through memcpy (a contiguous row with one). Design: fold.c. */

#define FOLD_CAT2(a, b) a##b
#define FOLD_CAT(a, b) FOLD_CAT2(a, b)
#define FN(name) FOLD_CAT(name, FOLD_SUFFIX)

#ifndef FOLD_LOAD
#define FOLD_ES ((int64_t)sizeof(FOLD_T))
static inline FOLD_T FN(fold_load)(const char *p) { FOLD_T v; memcpy(&v, p, sizeof v); return v; }
#define FOLD_LOAD(p) FN(fold_load)(p)
#define FOLD_STORE(p, v) memcpy((p), &(v), sizeof(FOLD_T))
#define FOLD_SAME 1
#endif

#define FOLD_BLK (64 / (int)sizeof(FOLD_T))       /* accumulators kept in registers: 64 bytes */

/* Add the batch's runs into acc, run after run (each element's sum keeps increasing window order). Contiguous runs
 * (stride 1, contiguous input) are fused over the positions all of them cover: there each block of FOLD_BLK
 * accumulators stays in registers while every run of the batch is added, in order; elsewhere the runs go one by one. */
static void FN(fold_apply)(const fold_job *j, FOLD_T *restrict acc, fold_batch *bt) {
    const int64_t st = j->st[j->D - 1], ic = j->in_col, es = j->es;
    const int nr = bt->n;
    int64_t L = 0, R = 0;
    bt->n = 0;
    if (st == 1 && ic == es && nr > 1) {
        L = bt->run[0].a; R = bt->run[0].a + bt->run[0].n;
        for (int r = 1; r < nr; r++) {
            if (bt->run[r].a > L) L = bt->run[r].a;
            if (bt->run[r].a + bt->run[r].n < R) R = bt->run[r].a + bt->run[r].n;
        }
        if (R - L < 8) L = R = 0;                   /* too short to gain from fusing */
    }
    for (int r = 0; r < nr; r++) {
        const fold_run *u = &bt->run[r];
        FOLD_T *restrict a = acc + u->a;
        const char *restrict s = u->s;
        if (R > L) {                                  /* the parts outside [L, R) */
            for (int64_t i = 0; i < L - u->a; i++) a[i] += FOLD_LOAD(s + i * FOLD_ES);
            for (int64_t i = R - u->a; i < u->n; i++) a[i] += FOLD_LOAD(s + i * FOLD_ES);
        } else if (st == 1 && ic == es) {
            for (int64_t i = 0; i < u->n; i++) a[i] += FOLD_LOAD(s + i * FOLD_ES);
        } else if (st == 1) {
            for (int64_t i = 0; i < u->n; i++) a[i] += FOLD_LOAD(s + i * ic);
        } else {
            for (int64_t i = 0; i < u->n; i++) a[i * st] += FOLD_LOAD(s + i * ic);
        }
    }
    if (R > L) {
        /* run r's input element for position x is at base[r] + x * FOLD_ES (integers: base may precede the input) */
        uintptr_t base[FOLD_BATCH];
        for (int r = 0; r < nr; r++) base[r] = (uintptr_t)bt->run[r].s - (uintptr_t)(bt->run[r].a * FOLD_ES);
        int64_t x = L;
        /* W accumulators from x on, held in t while every run is added */
#define FOLD_FUSED(W)                                                                        \
        {                                                                                    \
            FOLD_T t[W];                                                                     \
            memcpy(t, acc + x, sizeof t);                                                    \
            for (int r = 0; r < nr; r++) {                                                   \
                const char *restrict s = (const char *)(base[r] + (uintptr_t)(x * FOLD_ES)); \
                for (int i = 0; i < (W); i++) t[i] += FOLD_LOAD(s + i * FOLD_ES);            \
            }                                                                                \
            memcpy(acc + x, t, sizeof t);                                                    \
        }
        for (; x + FOLD_BLK <= R; x += FOLD_BLK) FOLD_FUSED(FOLD_BLK)
        if (FOLD_BLK >= 8 && x + FOLD_BLK / 2 <= R) {           /* half a block */
            FOLD_FUSED(FOLD_BLK / 2)
            x += FOLD_BLK / 2;
        }
#undef FOLD_FUSED
        for (; x < R; x++) {
            FOLD_T v = acc[x];
            for (int r = 0; r < nr; r++) v += FOLD_LOAD((const char *)(base[r] + (uintptr_t)(x * FOLD_ES)));
            acc[x] = v;
        }
    }
}

/* Innermost dimension: for every window index kd whose element can land in output positions [x0, x1), in increasing
 * order, queue the contributing input run (fold_apply adds it into acc[0, x1 - x0)). `in` points at the input element
 * of window row kflat_outer (kd = 0) and column bflat_outer (b = 0). */
static void FN(fold_inner)(const fold_job *j, FOLD_T *restrict acc, int64_t x0, int64_t x1, const char *in,
                           fold_batch *bt) {
    const int d = j->D - 1;
    const int64_t st = j->st[d], dil = j->dil[d], pad = j->pad[d], B = j->blocks[d];
    const int64_t ic = j->in_col, ir = j->in_row;
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
        fold_run *u = &bt->run[bt->n++];
        u->a = lo * st + shift - x0;
        u->n = hi - lo;
        u->s = in + kd * ir + lo * ic;
        if (bt->n == FOLD_BATCH) FN(fold_apply)(j, acc, bt);
    }
}

/* Outer dimension d at output position p[d]: every window index kd (in increasing order) whose block index
 * (p + pad - kd*dil) / st is whole and in range admits the next dimension. */
static void FN(fold_outer)(const fold_job *j, FOLD_T *acc, int64_t x0, int64_t x1, const int64_t *p, int d,
                           const char *in, fold_batch *bt) {
    if (d == j->D - 1) {
        FN(fold_inner)(j, acc, x0, x1, in, bt);
        return;
    }
    const int64_t st = j->st[d], dil = j->dil[d], B = j->blocks[d], t0 = p[d] + j->pad[d];
    int64_t k_lo = odml_ceil_div(t0 - (B - 1) * st, dil), k_hi = odml_floor_div(t0, dil);
    if (k_lo < 0) k_lo = 0;
    if (k_hi > j->win[d] - 1) k_hi = j->win[d] - 1;
    for (int64_t kd = k_lo; kd <= k_hi; kd++) {
        const int64_t t = t0 - kd * dil;           /* b * st */
        if (st > 1 && t % st != 0) continue;
        FN(fold_outer)(j, acc, x0, x1, p, d + 1, in + kd * j->kstr[d] * j->in_row + (t / st) * j->bstr[d] * j->in_col,
                       bt);
    }
}

/* Units [u0, u1): unit u is tile u % ntiles of output row u / ntiles, the rows (n, c, p[0], ..., p[D-2]) row-major. */
static void FN(fold_units)(const void *vjob, int64_t u0, int64_t u1, int part) {
    const fold_job *j = (const fold_job *)vjob;
    const int last = j->D - 1;
    FOLD_T *acc = (FOLD_T *)(void *)(j->scratch + (size_t)part * (size_t)j->tile * sizeof(FOLD_T));
    int64_t p[ODML_MAX_SPATIAL];
    fold_batch bt;
    bt.n = 0;
    int64_t t = u0 % j->ntiles, rem = u0 / j->ntiles;
    for (int d = last - 1; d >= 0; d--) { p[d] = rem % j->size[d]; rem /= j->size[d]; }
    int64_t c = rem % j->channels, n = rem / j->channels;
    const int64_t os = j->os[last], es = j->es;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t x0 = t * j->tile, x1 = x0 + j->tile < j->size[last] ? x0 + j->tile : j->size[last];
        const int64_t len = x1 - x0;
        memset(acc, 0, (size_t)len * sizeof(FOLD_T));     /* +0 in every accumulator type */
        FN(fold_outer)(j, acc, x0, x1, p, 0, j->src + n * j->in_n + c * j->K * j->in_row, &bt);
        FN(fold_apply)(j, acc, &bt);
#ifdef FOLD_NAN
        /* the one canonical NaN: which payload an addition of NaNs keeps is the processor's (and the compiler's
         * operand order's) choice, so only this gives the same bytes everywhere */
        for (int64_t i = 0; i < len; i++)
            if (acc[i] != acc[i]) acc[i] = FOLD_NAN;
#endif
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
#undef FOLD_BLK
#undef FOLD_T
#undef FOLD_SUFFIX
#undef FOLD_LOAD
#undef FOLD_STORE
#undef FOLD_SAME
#undef FOLD_ES
#undef FOLD_NAN
