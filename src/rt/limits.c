/* Connection limits (rt/limits.h). */
#include "rt/limits.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "rt/crc.h"
#include "rt/log.h"

struct rt_limits rt_limits = {
    .login_timeout_ms = RT_LOGIN_TIMEOUT_DEFAULT_MS,
    .idle_timeout_ms = RT_IDLE_TIMEOUT_DEFAULT_MS,
    .max_connections = RT_MAX_CONNECTIONS_DEFAULT,
    .max_connections_per_host = RT_MAX_CONNECTIONS_PER_HOST_DEFAULT,
    .nop_interval_ms = RT_NOP_INTERVAL_DEFAULT_MS,
    .nop_timeout_ms = RT_NOP_TIMEOUT_DEFAULT_MS,
    .rpc_idle_timeout_ms = RT_RPC_IDLE_DEFAULT_MS,
};

/*
 * Per-source counts: an open-addressing table keyed by the peer's address
 * (IPv4 mapped into IPv6 form), probed linearly from its CRC32C.  Entries
 * whose count falls to 0 are reused, never removed, so a probe stops only
 * at a never-used entry.  Accept path only (a mutex, not the data path).
 */
#define HOST_BUCKETS 8192
#define HOST_PROBE   64
struct host_bucket {
        uint8_t addr[16];
        bool used;
        uint32_t count;
};
static struct host_bucket hosts[HOST_BUCKETS];
static unsigned total;
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;

static void peer_key(int fd, uint8_t key[16])
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        memset(key, 0, 16);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
                return;
        if (ss.ss_family == AF_INET) {
                key[10] = key[11] = 0xff;
                memcpy(key + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        } else if (ss.ss_family == AF_INET6) {
                memcpy(key, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        }
}

int rt_conn_admit(int fd, struct rt_conn_slot *slot, char *why, size_t whylen)
{
        uint8_t key[16];
        peer_key(fd, key);
        uint32_t max = atomic_load(&rt_limits.max_connections);
        uint32_t per = atomic_load(&rt_limits.max_connections_per_host);
        slot->bucket = -1;
        pthread_mutex_lock(&conn_lock);
        if (max && total >= max) {
                pthread_mutex_unlock(&conn_lock);
                snprintf(why, whylen, "%u connections open (options.max_connections)", max);
                return -EUSERS;
        }
        uint32_t h = rt_crc32c(key, sizeof(key)) % HOST_BUCKETS;
        int found = -1, free_b = -1;
        for (unsigned i = 0; i < HOST_PROBE; i++) {
                unsigned b = (h + i) % HOST_BUCKETS;
                if (hosts[b].used && memcmp(hosts[b].addr, key, 16) == 0) {
                        found = (int)b;
                        break;
                }
                if (free_b < 0 && (!hosts[b].used || hosts[b].count == 0))
                        free_b = (int)b;
                if (!hosts[b].used)
                        break;
        }
        if (found < 0 && free_b >= 0) {
                found = free_b;
                memcpy(hosts[found].addr, key, 16);
                hosts[found].used = true;
                hosts[found].count = 0;
        }
        if (found >= 0 && per && hosts[found].count >= per) {
                pthread_mutex_unlock(&conn_lock);
                snprintf(why, whylen,
                         "%u connections open from this host (options.max_connections_per_host)",
                         per);
                return -EMFILE;
        }
        if (found >=
            0) /* no room in the table (65536 hosts crowding one place): counted in all only */
                hosts[found].count++;
        total++;
        slot->bucket = found >= 0 ? found : HOST_BUCKETS;
        pthread_mutex_unlock(&conn_lock);
        return 0;
}

void rt_conn_release(struct rt_conn_slot *slot)
{
        if (slot->bucket < 0)
                return;
        pthread_mutex_lock(&conn_lock);
        if (slot->bucket < HOST_BUCKETS && hosts[slot->bucket].count)
                hosts[slot->bucket].count--;
        if (total)
                total--;
        pthread_mutex_unlock(&conn_lock);
        slot->bucket = -1;
}

unsigned rt_conn_count(void)
{
        pthread_mutex_lock(&conn_lock);
        unsigned n = total;
        pthread_mutex_unlock(&conn_lock);
        return n;
}

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
