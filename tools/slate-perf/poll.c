/*
 * slate-perf --poll: how a worker waits for its socket when it has nothing
 * to do (perf.h enum perf_poll).  off sleeps in poll() at once; always looks
 * again without sleeping, forever; adaptive looks again for poll_us after
 * the last completion or send (a bounded spin, as slated's reactor_poll
 * adaptive), then sleeps.  The transports' loops ask perf_poll_spin() each
 * time their socket came back empty; the spins and sleeps are counted per
 * worker for the report.  No standard section.
 */
#include "perf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool perf_poll_spin(struct perf_worker *w, bool worked, uint64_t now_ns)
{
        bool spin;
        if (worked)
                w->last_work_ns = now_ns;
        switch (w->o->poll) {
        case PERF_POLL_ALWAYS:
                spin = true;
                break;
        case PERF_POLL_ADAPTIVE:
                spin = now_ns - w->last_work_ns < (uint64_t)w->o->poll_us * 1000u;
                break;
        default:
                spin = false;
        }
        if (spin)
                w->st.spins++;
        else
                w->st.sleeps++;
        return spin;
}

int perf_poll_parse(const char *s, struct perf_opts *o)
{
        if (!s || !strcmp(s, "always") || !strcmp(s, "busy")) {
                o->poll = PERF_POLL_ALWAYS;
                return 0;
        }
        if (!strcmp(s, "off") || !strcmp(s, "sleep")) {
                o->poll = PERF_POLL_OFF;
                return 0;
        }
        if (strncmp(s, "adaptive", 8) || (s[8] && s[8] != ':'))
                return -EINVAL;
        uint32_t us = PERF_POLL_US_DEFAULT;
        if (s[8]) {
                char *end;
                errno = 0;
                unsigned long v = strtoul(s + 9, &end, 10);
                if (errno || end == s + 9 || *end || v < 1 || v > 1000000)
                        return -EINVAL;
                us = (uint32_t)v;
        }
        o->poll = PERF_POLL_ADAPTIVE;
        o->poll_us = us;
        return 0;
}

const char *perf_poll_name(enum perf_poll p)
{
        return p == PERF_POLL_ALWAYS ? "always" : p == PERF_POLL_ADAPTIVE ? "adaptive" : "off";
}
