/* The daemon's logger: timestamped, levelled lines on stderr with a module tag. */
#include "rt/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum rt_log_level rt_log_threshold = RT_LOG_INFO;

static const char *const level_names[] = {"ERR", "WARN", "INFO", "DEBUG"};

void rt_log(enum rt_log_level lvl, const char *mod, const char *fmt, ...)
{
        if (lvl > rt_log_threshold)
                return;
        char line[1024];
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s %-6s ", tm.tm_hour,
                         tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_names[lvl], mod);
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
