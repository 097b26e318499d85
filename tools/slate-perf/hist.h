/*
 * Latency histogram for slate-perf: a fixed array of log-linear buckets (the
 * HdrHistogram layout: each power of two split into 2^PERF_HIST_SUB_BITS equal
 * sub-buckets), so recording is a few instructions, needs no allocation, and
 * any percentile is known to within 1/2^PERF_HIST_SUB_BITS (about 3%) of the
 * true value.  Values are in nanoseconds.  Not tied to any standard.
 */
#ifndef SLATE_PERF_HIST_H
#define SLATE_PERF_HIST_H

#include <stdint.h>

#define PERF_HIST_SUB_BITS 5
#define PERF_HIST_SUB      (1u << PERF_HIST_SUB_BITS)
/* Values below PERF_HIST_SUB are exact; each power of two above has its row. */
#define PERF_HIST_BUCKETS ((64 - PERF_HIST_SUB_BITS + 1) * PERF_HIST_SUB)

struct perf_hist {
        uint64_t count;
        uint64_t sum;
        uint64_t min;
        uint64_t max;
        uint64_t bucket[PERF_HIST_BUCKETS];
};

void perf_hist_init(struct perf_hist *h);
/* Index of the bucket holding value v. */
unsigned perf_hist_index(uint64_t v);
/* Smallest and largest value that land in bucket i. */
uint64_t perf_hist_bucket_lo(unsigned i);
uint64_t perf_hist_bucket_hi(unsigned i);

static inline void perf_hist_record(struct perf_hist *h, uint64_t v)
{
        h->count++;
        h->sum += v;
        if (v < h->min)
                h->min = v;
        if (v > h->max)
                h->max = v;
        h->bucket[perf_hist_index(v)]++;
}

/* Add every sample of src into dst. */
void perf_hist_merge(struct perf_hist *dst, const struct perf_hist *src);
/*
 * Value at percentile p (0 < p <= 100): the middle of the bucket holding the
 * sample of rank ceil(p/100 * count), clamped to [min, max].  0 when empty.
 */
uint64_t perf_hist_percentile(const struct perf_hist *h, double p);
/* Mean of the recorded values (exact, from the running sum); 0 when empty. */
double perf_hist_mean(const struct perf_hist *h);

#endif
