/* Connection limits (rt/limits.h). */
#include "rt/limits.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "rt/log.h"

struct rt_limits rt_limits = {
    .login_timeout_ms = RT_LOGIN_TIMEOUT_DEFAULT_MS,
    .idle_timeout_ms = RT_IDLE_TIMEOUT_DEFAULT_MS,
};

unsigned long rt_limits_raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur < rl.rlim_max) {
                rlim_t old = rl.rlim_cur;
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
                        LOG_WARN("main", "raising the open-file limit from %llu to %llu: %s",
                                 (unsigned long long)old, (unsigned long long)rl.rlim_max,
                                 strerror(errno));
                        rl.rlim_cur = old;
                } else {
                        LOG_INFO("main", "open-file limit raised from %llu to %llu",
                                 (unsigned long long)old, (unsigned long long)rl.rlim_cur);
                }
        }
        return (unsigned long)rl.rlim_cur;
}
