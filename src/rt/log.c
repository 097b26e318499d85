/*
 * The daemon's logger: levelled lines on stderr with a module tag,
 * timestamped on a terminal or file, syslog-priority-prefixed when stderr is
 * the systemd journal (rt_log_init).
 */
#include "rt/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

enum rt_log_level rt_log_threshold = RT_LOG_INFO;

static const char *const level_names[] = {"ERR", "WARN", "INFO", "DEBUG"};
/* syslog(3) priorities of our levels: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
static const int level_prio[] = {3, 4, 6, 7};
static int journal_mode;

int rt_log_init(void)
{
        /* systemd.exec(5): JOURNAL_STREAM is "DEV:INODE" of the stream it connected. */
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        char tail;
        journal_mode = js && sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) == 2 &&
                       fstat(2, &st) == 0 && (unsigned long long)st.st_dev == dev &&
                       (unsigned long long)st.st_ino == ino;
        return journal_mode;
}

void rt_log(enum rt_log_level lvl, const char *mod, const char *fmt, ...)
{
        if (lvl > rt_log_threshold)
                return;
        char line[1024];
        int n;
        if (journal_mode) {
                n = snprintf(line, sizeof(line), "<%d>%-6s ", level_prio[lvl], mod);
        } else {
                struct timespec ts;
                struct tm tm;
                clock_gettime(CLOCK_REALTIME, &ts);
                gmtime_r(&ts.tv_sec, &tm);
                n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s %-6s ", tm.tm_hour,
                             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_names[lvl], mod);
        }
        va_list ap;
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < sizeof(line))
                vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
        /* One write per line so lines from several reactors do not interleave. */
        fprintf(stderr, "%s\n", line);
}

int rt_log_parse_level(const char *s, enum rt_log_level *out)
{
        for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
                if (strcasecmp(s, level_names[i]) == 0) {
                        *out = (enum rt_log_level)i;
                        return 0;
                }
        }
        if (strcasecmp(s, "error") == 0) {
                *out = RT_LOG_ERR;
                return 0;
        }
        return -1;
}

int rt_log_ratelimit(struct rt_log_ratelimit *rl, const char *mod)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned long long now =
            (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
        unsigned long long w = atomic_load_explicit(&rl->window, memory_order_relaxed);
        if (now - w >= RT_LOG_WINDOW_MS && atomic_compare_exchange_strong(&rl->window, &w, now)) {
                atomic_store(&rl->in_window, 0);
                unsigned n = atomic_exchange(&rl->suppressed, 0);
                if (n)
                        rt_log(RT_LOG_WARN, mod,
                               "%u similar lines suppressed (%s; at most %u a second)", n,
                               rl->what ? rl->what : "rate limit", RT_LOG_BURST);
        }
        if (atomic_fetch_add(&rl->in_window, 1) < RT_LOG_BURST)
                return 1;
        atomic_fetch_add(&rl->suppressed, 1);
        return 0;
}
