/*
 * Log-linear latency histogram (see hist.h): bucket index arithmetic,
 * merging and percentile lookup.  Part of the slate-perf load generator;
 * implements no standard.
 */
#include "hist.h"

#include <math.h>
#include <string.h>

void perf_hist_init(struct perf_hist *h)
{
        memset(h, 0, sizeof(*h));
        h->min = UINT64_MAX;
}

unsigned perf_hist_index(uint64_t v)
{
        if (v < PERF_HIST_SUB)
                return (unsigned)v;
        unsigned e = 63u - (unsigned)__builtin_clzll(v); /* e >= SUB_BITS */
        unsigned shift = e - PERF_HIST_SUB_BITS;
        /* Row (shift + 1) holds [2^e, 2^(e+1)) in SUB steps of 2^shift. */
        return ((shift + 1) << PERF_HIST_SUB_BITS) + (unsigned)((v >> shift) & (PERF_HIST_SUB - 1));
}

uint64_t perf_hist_bucket_lo(unsigned i)
{
        if (i < PERF_HIST_SUB)
                return i;
        unsigned row = i >> PERF_HIST_SUB_BITS; /* >= 1 */
        unsigned shift = row - 1;
        uint64_t sub = i & (PERF_HIST_SUB - 1);
        return (PERF_HIST_SUB + sub) << shift;
}

uint64_t perf_hist_bucket_hi(unsigned i)
{
        if (i < PERF_HIST_SUB)
                return i;
        unsigned shift = (i >> PERF_HIST_SUB_BITS) - 1;
        return perf_hist_bucket_lo(i) + ((UINT64_C(1) << shift) - 1);
}

void perf_hist_merge(struct perf_hist *dst, const struct perf_hist *src)
{
        if (!src->count)
                return;
        dst->count += src->count;
        dst->sum += src->sum;
        if (src->min < dst->min)
                dst->min = src->min;
        if (src->max > dst->max)
                dst->max = src->max;
        for (unsigned i = 0; i < PERF_HIST_BUCKETS; i++)
                dst->bucket[i] += src->bucket[i];
}

uint64_t perf_hist_percentile(const struct perf_hist *h, double p)
{
        if (!h->count)
                return 0;
        if (p <= 0)
                return h->min;
        if (p >= 100)
                return h->max;
        uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
        if (rank < 1)
                rank = 1;
        uint64_t seen = 0;
        for (unsigned i = 0; i < PERF_HIST_BUCKETS; i++) {
                seen += h->bucket[i];
                if (seen >= rank) {
                        uint64_t lo = perf_hist_bucket_lo(i), hi = perf_hist_bucket_hi(i);
                        uint64_t v = lo + (hi - lo) / 2;
                        if (v < h->min)
                                v = h->min;
                        if (v > h->max)
                                v = h->max;
                        return v;
                }
        }
        return h->max;
}

double perf_hist_mean(const struct perf_hist *h)
{
        return h->count ? (double)h->sum / (double)h->count : 0.0;
}
