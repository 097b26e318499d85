/*
 * Reservation state shared by the gateways that export one data file
 * (namespace option shared_reservations, issue 14): what the rbd backend
 * keeps in a RADOS object, kept in files next to the data file, which
 * every gateway must see at the same path (one machine, or one shared file
 * system with working fcntl locks and inotify; inotify sees no change made
 * on another NFS client, so that is one machine in practice).
 *
 *   <data>.slate-pr        "<version>\n<state>": the state (core_pr JSON)
 *                          and its version, which grows by one per store
 *   <data>.slate-pr.lock   empty; an OFD write lock on it makes a store's
 *                          read-compare-write atomic across processes
 *   <data>.slate-pr.gw.<pid>.<n>
 *                          one per open gateway: the last version it
 *                          installed, and an OFD lock its owner holds for
 *                          as long as it lives (the kernel drops it when the
 *                          process dies, kill -9 included)
 *
 * A store, under the lock: read the version, -ECANCELED unless it is the
 * one the caller read, else write "<version + 1>\n<state>" to
 * <data>.slate-pr.tmp, fsync it, rename it over <data>.slate-pr and fsync
 * the directory.  The rename, not a write in place, so that a reader (which
 * takes no lock) and a crash (kill -9, power loss) see the old state or the
 * new one, never a torn one; the fsyncs make it durable before the command
 * completes, as a reservation must be.
 *
 * Every gateway watches the directory with inotify (IN_MOVED_TO only: the
 * data file's I/O makes no event) on its own thread; a rename of the state
 * calls be->pr_changed (the core reloads its copy, the one the per-I/O
 * check reads), then the thread writes the version it installed to its
 * acknowledgement file.  The storing gateway waits, at most
 * FILE_PR_ACK_TIMEOUT_MS, until every live gateway's file shows the new
 * version: when PERSISTENT RESERVE OUT completes, every live gateway
 * enforces the new state, as the rbd backend's notify and acks make it.
 * A file nobody holds locked is a dead gateway's: not waited for, and
 * removed by the next gateway that opens.
 */
#include "backend/file_pr.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "rt/log.h"

#define PR_MAX_BYTES (256u << 10) /* 64 registrations of the longest names fit (as rbd) */

struct file_pr {
        struct backend *be;
        char dir[PATH_MAX];      /* the data file's directory */
        char state[PATH_MAX];    /* <data>.slate-pr */
        char base[NAME_MAX + 1]; /* its name in dir */
        char ack_prefix[NAME_MAX + 1];
        char ack_name[NAME_MAX + 40]; /* ours */
        int lock_fd, ack_fd, ino_fd, stop_fd;
        _Atomic uint64_t seen; /* the newest version this process loaded */
        pthread_t thread;
        bool thread_started;
};

static int lock_op(int fd, int cmd, short type)
{
        struct flock fl = {.l_type = type, .l_whence = SEEK_SET};
        return fcntl(fd, cmd, &fl) ? -errno : 0;
}

/* The version at the start of "<version>\n..." in buf, or -EINVAL. */
static int parse_version(const char *buf, uint64_t *version, const char **rest)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf || *end != '\n')
                return -EINVAL;
        *version = v;
        if (rest)
                *rest = end + 1;
        return 0;
}

/* The whole state file (malloc'd, NUL-terminated) or NULL with *rc 0 when there is none. */
static char *read_state(const struct file_pr *p, int *rc)
{
        *rc = 0;
        int fd = open(p->state, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT)
                        *rc = -errno;
                return NULL;
        }
        char *buf = malloc(PR_MAX_BYTES + 1);
        size_t n = 0;
        if (!buf) {
                *rc = -ENOMEM;
                close(fd);
                return NULL;
        }
        for (;;) {
                ssize_t r = read(fd, buf + n, PR_MAX_BYTES - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        *rc = -errno;
                        break;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
                if (n == PR_MAX_BYTES) {
                        *rc = -EFBIG;
                        break;
                }
        }
        close(fd);
        if (*rc) {
                free(buf);
                return NULL;
        }
        buf[n] = 0;
        return buf;
}

int file_pr_load(struct file_pr *p, char **text, uint64_t *version)
{
        *text = NULL;
        *version = 0;
        int rc;
        char *buf = read_state(p, &rc);
        if (!buf)
                return rc;
        const char *rest;
        if (parse_version(buf, version, &rest)) {
                LOG_ERR("file", "%s: the reservation state is malformed", p->state);
                free(buf);
                return -EINVAL;
        }
        memmove(buf, rest, strlen(rest) + 1);
        *text = buf;
        uint64_t seen = atomic_load(&p->seen);
        while (*version > seen && !atomic_compare_exchange_weak(&p->seen, &seen, *version))
                ;
        return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
        while (len) {
                ssize_t w = write(fd, buf, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                buf += w;
                len -= (size_t)w;
        }
        return 0;
}

static void ack_write(struct file_pr *p, uint64_t version)
{
        char b[24];
        int n = snprintf(b, sizeof(b), "%020llu\n", (unsigned long long)version);
        if (pwrite(p->ack_fd, b, (size_t)n, 0) != n)
                LOG_WARN("file", "%s: writing this gateway's acknowledgement: %s", p->state,
                         strerror(errno));
}

/*
 * Does a live gateway other than us lag behind version?  When prune, also
 * remove the files of dead ones (caller holds the state lock, so a gateway
 * that is opening, which locks its file under it too, is never taken for
 * dead).
 */
static bool others_lag(struct file_pr *p, uint64_t version, bool prune)
{
        DIR *d = opendir(p->dir);
        if (!d)
                return false;
        size_t pl = strlen(p->ack_prefix);
        bool lag = false;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (strncmp(e->d_name, p->ack_prefix, pl) || !strcmp(e->d_name, p->ack_name))
                        continue;
                int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
                if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK) {
                        if (prune)
                                unlinkat(dirfd(d), e->d_name, 0);
                } else if (!prune) {
                        char b[24] = {0};
                        uint64_t v = 0;
                        if (pread(fd, b, sizeof(b) - 1, 0) > 0 && parse_version(b, &v, NULL) == 0 &&
                            v < version)
                                lag = true;
                }
                close(fd);
                if (lag)
                        break;
        }
        closedir(d);
        return lag;
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int file_pr_store(struct file_pr *p, const char *text, uint64_t *version)
{
        int rc = lock_op(p->lock_fd, F_OFD_SETLKW, F_WRLCK);
        if (rc)
                return rc;
        char *cur = read_state(p, &rc);
        uint64_t v = 0;
        if (cur && parse_version(cur, &v, NULL))
                rc = -EINVAL;
        free(cur);
        if (rc == 0 && v != *version)
                rc = -ECANCELED;
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof(tmp), "%s.tmp", p->state);
        int fd = -1;
        if (rc == 0) {
                fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0)
                        rc = -errno;
        }
        if (rc == 0) {
                char head[24];
                int hl = snprintf(head, sizeof(head), "%llu\n", (unsigned long long)(v + 1));
                rc = write_all(fd, head, (size_t)hl);
                if (rc == 0)
                        rc = write_all(fd, text, strlen(text));
                if (rc == 0 && fsync(fd))
                        rc = -errno;
        }
        if (fd >= 0)
                close(fd);
        if (rc == 0 && rename(tmp, p->state))
                rc = -errno;
        if (rc == 0) {
                int dfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0 || fsync(dfd))
                        rc = -errno;
                if (dfd >= 0)
                        close(dfd);
        }
        lock_op(p->lock_fd, F_OFD_SETLK, F_UNLCK);
        if (rc)
                return rc;
        *version = v + 1;
        /* Every live gateway installs the new state before the command completes (bounded). */
        uint64_t deadline = now_ms() + FILE_PR_ACK_TIMEOUT_MS;
        while (others_lag(p, *version, false)) {
                if (now_ms() >= deadline) {
                        LOG_WARN("file",
                                 "%s: not every gateway acknowledged reservation state %llu "
                                 "within %d ms",
                                 p->state, (unsigned long long)*version, FILE_PR_ACK_TIMEOUT_MS);
                        break;
                }
                usleep(1000);
        }
        return 0;
}

/* The watcher: a rename of the state into the directory means another store. */
static void *watch_main(void *arg)
{
        struct file_pr *p = arg;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                struct pollfd pf[2] = {{.fd = p->ino_fd, .events = POLLIN},
                                       {.fd = p->stop_fd, .events = POLLIN}};
                if (poll(pf, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pf[1].revents)
                        break;
                bool changed = false;
                ssize_t n;
                while ((n = read(p->ino_fd, buf, sizeof(buf))) > 0) {
                        for (char *at = buf; at < buf + n;) {
                                const struct inotify_event *e = (const struct inotify_event *)at;
                                if ((e->mask & IN_Q_OVERFLOW) ||
                                    (e->len && !strcmp(e->name, p->base)))
                                        changed = true;
                                at += sizeof(*e) + e->len;
                        }
                }
                if (!changed)
                        continue;
                if (p->be && p->be->pr_changed) {
                        p->be->pr_changed(p->be); /* reloads through file_pr_load */
                } else {
                        char *t;
                        uint64_t v;
                        if (file_pr_load(p, &t, &v) == 0)
                                free(t);
                }
                ack_write(p, atomic_load(&p->seen));
        }
        return NULL;
}

static atomic_uint open_seq;

int file_pr_open(struct file_pr **out, const char *data_path, struct backend *be)
{
        struct file_pr *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->be = be;
        p->lock_fd = p->ack_fd = p->ino_fd = p->stop_fd = -1;
        int rc = -ENAMETOOLONG;
        const char *slash = strrchr(data_path, '/');
        const char *name = slash ? slash + 1 : data_path;
        if (slash == data_path)
                snprintf(p->dir, sizeof(p->dir), "/");
        else if (slash)
                snprintf(p->dir, sizeof(p->dir), "%.*s", (int)(slash - data_path), data_path);
        else
                snprintf(p->dir, sizeof(p->dir), ".");
        if (strlen(name) + 40 > NAME_MAX || strlen(data_path) + 40 >= PATH_MAX)
                goto fail;
        snprintf(p->state, sizeof(p->state), "%s.slate-pr", data_path);
        snprintf(p->base, sizeof(p->base), "%s.slate-pr", name);
        snprintf(p->ack_prefix, sizeof(p->ack_prefix), "%s.slate-pr.gw.", name);
        snprintf(p->ack_name, sizeof(p->ack_name), "%s%ld.%u", p->ack_prefix, (long)getpid(),
                 atomic_fetch_add(&open_seq, 1));
        char path[PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s.lock", p->state);
        p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (p->lock_fd < 0) {
                rc = -errno;
                goto fail;
        }
        /* Watch before anything is read: no store is missed between the first load and here. */
        p->ino_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->ino_fd < 0 || p->stop_fd < 0 ||
            inotify_add_watch(p->ino_fd, p->dir, IN_MOVED_TO | IN_ONLYDIR) < 0) {
                rc = -errno;
                goto fail;
        }
        if ((rc = lock_op(p->lock_fd, F_OFD_SETLKW, F_WRLCK)))
                goto fail;
        others_lag(p, 0, true); /* dead gateways' files */
        char ack[PATH_MAX + NAME_MAX + 48];
        snprintf(ack, sizeof(ack), "%s/%s", p->dir, p->ack_name);
        p->ack_fd = open(ack, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        rc = p->ack_fd < 0 ? -errno : lock_op(p->ack_fd, F_OFD_SETLK, F_WRLCK);
        lock_op(p->lock_fd, F_OFD_SETLK, F_UNLCK);
        if (rc)
                goto fail;
        /* Until our first reload we have installed nothing newer than what is stored now. */
        char *t;
        uint64_t v;
        if ((rc = file_pr_load(p, &t, &v)))
                goto fail;
        free(t);
        ack_write(p, v);
        if ((rc = -pthread_create(&p->thread, NULL, watch_main, p)))
                goto fail;
        p->thread_started = true;
        *out = p;
        return 0;
fail:
        file_pr_close(p);
        return rc;
}

void file_pr_close(struct file_pr *p)
{
        if (!p)
                return;
        if (p->thread_started) {
                uint64_t one = 1;
                if (write(p->stop_fd, &one, sizeof(one)) != sizeof(one))
                        LOG_ERR("file", "%s: stopping the reservation watcher failed", p->state);
                pthread_join(p->thread, NULL);
        }
        if (p->ack_fd >= 0) {
                char ack[PATH_MAX + NAME_MAX + 48];
                snprintf(ack, sizeof(ack), "%s/%s", p->dir, p->ack_name);
                unlink(ack);
                close(p->ack_fd);
        }
        int fds[] = {p->lock_fd, p->ino_fd, p->stop_fd};
        for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(p);
}
