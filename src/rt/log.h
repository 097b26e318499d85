/*
 * One logger for the whole daemon: levels and a module tag per line.  The
 * data path logs nothing at the default level (INFO); use DEBUG there.
 */
#ifndef RT_LOG_H
#define RT_LOG_H

#include <stdatomic.h>

/*
 * RT_LOG_OFF is a threshold only (no line has it): nothing is written.  For
 * harnesses that feed damaged input on purpose millions of times (fuzzers),
 * where every refusal's error line would fill the disk.
 */
enum rt_log_level {
        RT_LOG_OFF = -1,
        RT_LOG_ERR = 0,
        RT_LOG_WARN = 1,
        RT_LOG_INFO = 2,
        RT_LOG_DEBUG = 3
};

extern enum rt_log_level rt_log_threshold;

/*
 * Pick the line format once, before any thread logs: when stderr is the
 * journal's stream ($JOURNAL_STREAM names stderr's device and inode, as
 * systemd sets it for a service), each line starts with its syslog priority
 * as "<N>" (journald's SyslogLevelPrefix) and carries no timestamp (the
 * journal keeps its own); otherwise lines are "HH:MM:SS.mmm LEVEL module
 * text".  Returns 1 in journal mode.
 */
int rt_log_init(void);

void rt_log(enum rt_log_level lvl, const char *mod, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int rt_log_parse_level(const char *s, enum rt_log_level *out);

/*
 * A budget for lines a remote peer can cause (bad PDUs, refused logins,
 * connections closed for protocol errors): at most RT_LOG_BURST lines per
 * RT_LOG_WINDOW_MS for each limiter; the rest are counted and one line
 * "N similar lines suppressed" is written when the next window opens with
 * a line to write.  Shared by every reactor:
 * a static zero-initialised limiter per kind of message, lock-free and
 * approximate under races (a line more or less), never blocking.
 */
#define RT_LOG_BURST     10u
#define RT_LOG_WINDOW_MS 1000u
struct rt_log_ratelimit {
        _Atomic unsigned long long window; /* start of the current window, ms */
        _Atomic unsigned in_window;        /* lines allowed in it so far */
        _Atomic unsigned suppressed;       /* lines dropped since the last summary */
        const char *what;                  /* names the lines in the summary */
};
#define RT_LOG_RATELIMIT_INIT(w)                                                                   \
        {                                                                                          \
                .what = (w)                                                                        \
        }
/* Whether a line may be written now (false: counted as suppressed). */
int rt_log_ratelimit(struct rt_log_ratelimit *rl, const char *mod);

#define LOG_ERR(mod, ...)  rt_log(RT_LOG_ERR, mod, __VA_ARGS__)
#define LOG_WARN(mod, ...) rt_log(RT_LOG_WARN, mod, __VA_ARGS__)
#define LOG_INFO(mod, ...) rt_log(RT_LOG_INFO, mod, __VA_ARGS__)
#define LOG_DEBUG(mod, ...)                                                                        \
        do {                                                                                       \
                if (rt_log_threshold >= RT_LOG_DEBUG)                                              \
                        rt_log(RT_LOG_DEBUG, mod, __VA_ARGS__);                                    \
        } while (0)

#endif
