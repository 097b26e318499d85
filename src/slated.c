/*
 * slated: the Slate storage target daemon.  It parses the command line,
 * starts the reactors and the iSCSI transport, applies a config file (or
 * the embedded default: one thin 1 GiB namespace as LUN 0 of
 * iqn.2026-12.io.slate:disk0 on 127.0.0.1:3260), opens the JSON-RPC socket
 * and then waits for SIGINT/SIGTERM to shut down in reverse order; SIGHUP
 * asks the RPC thread to reload the config file (mgmt/reload.c).
 * Signals are blocked before any thread starts so that only the main
 * thread (sigwait) ever sees them; SIGPIPE is ignored because a host that
 * hangs up mid-send must only cost its own connection.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/ana.h"
#include "core/ns.h"
#include "iscsi/iscsi.h"
#include "nvme/nvme.h"
#include "nvmf/nvmf.h"
#include "mgmt/metrics.h"
#include "mgmt/mgmt.h"
#include "rt/bigbuf.h"
#include "rt/limits.h"
#include "rt/log.h"
#include "rt/reactor.h"
#include "rt/service.h"

#ifndef SLATE_VERSION
#define SLATE_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
        fprintf(
            f,
            "usage: slated [-c FILE] [-s DIR] [-r SOCK] [-m N] [-x MIB] [-L LEVEL] [-H LISTEN]\n"
            "  -c, --config FILE      apply this config (default: embedded default config)\n"
            "  -s, --state-dir DIR    metadata and default data files (default ./state)\n"
            "  -r, --rpc-socket SOCK  JSON-RPC Unix socket (default <state-dir>/slated.sock)\n"
            "  -m, --reactors N       reactor threads (default: number of CPUs)\n"
            "  -x, --xfer-pool-mib N  buffers for transfers over 1 MiB, per reactor (32..65536,\n"
            "                         default 64)\n"
            "  -L, --log-level LEVEL  error | warn | info | debug (default info)\n"
            "  -H, --http LISTEN      serve /metrics and the status page on PORT,\n"
            "                         ADDR:PORT or [IPv6]:PORT (default: off; PORT alone\n"
            "                         binds 127.0.0.1; port 0 picks a free port)\n"
            "  -V, --version          print the version\n"
            "  -h, --help             this text\n"
            "Config format and RPC methods: docs/config.md\n");
}

/* mkdir -p */
static int make_dirs(const char *path)
{
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        /* The state dir holds every disk's data: its owner's only (0700). */
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
                return -errno;
        struct stat st;
        if (stat(buf, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if ((st.st_mode & 077) && st.st_uid == geteuid()) {
                if (chmod(buf, st.st_mode & 07700) == 0)
                        LOG_INFO("main", "state dir %s: mode %04o made %04o (owner only)", buf,
                                 (unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 07700));
        }
        return 0;
}

/*
 * Is a daemon already answering on the RPC socket?  Checked before the
 * config is applied, so a second slated never opens the first one's data
 * files or fights over its portals.
 */
static bool rpc_socket_live(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return false;
        memcpy(sa.sun_path, path, strlen(path));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        bool live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        return live;
}

/*
 * Reload hooks (mgmt_reload_set_hooks): systemd hears RELOADING=1 before a
 * reload (SIGHUP or config_reload) and READY=1 after it, with a STATUS
 * line saying whether it applied.
 */
static char ready_status[PATH_MAX + 64];

static void reload_before(void)
{
        rt_service_reloading();
}

static void reload_after(int rc)
{
        if (rc == 0)
                rt_service_ready("%s", ready_status);
        else
                rt_service_ready("%s; last reload refused (%d), see the log", ready_status, rc);
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
                return -EINVAL;
        *out = (unsigned)v;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
            {"config", required_argument, NULL, 'c'},
            {"state-dir", required_argument, NULL, 's'},
            {"rpc-socket", required_argument, NULL, 'r'},
            {"reactors", required_argument, NULL, 'm'},
            {"xfer-pool-mib", required_argument, NULL, 'x'},
            {"log-level", required_argument, NULL, 'L'},
            {"http", required_argument, NULL, 'H'},
            {"version", no_argument, NULL, 'V'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char *config = NULL, *state_arg = NULL, *sock_arg = NULL, *level_arg = NULL;
        const char *http_arg = NULL;
        unsigned reactors = 0, xfer_pool_mib = 0;
        struct mgmt_options opts = {0};
        char err[1024];
        int c, rc;

        while ((c = getopt_long(argc, argv, "c:s:r:m:x:L:H:Vh", longopts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 's':
                        state_arg = optarg;
                        break;
                case 'r':
                        sock_arg = optarg;
                        break;
                case 'm':
                        if (parse_uint(optarg, 1, 1024, &reactors) < 0) {
                                fprintf(stderr,
                                        "slated: -m wants a number of reactors in [1, 1024]\n");
                                return 1;
                        }
                        break;
                case 'x':
                        if (parse_uint(optarg, MGMT_XFER_POOL_MIN_MIB, MGMT_XFER_POOL_MAX_MIB,
                                       &xfer_pool_mib) < 0) {
                                fprintf(stderr, "slated: -x wants MiB in [%u, %u]\n",
                                        MGMT_XFER_POOL_MIN_MIB, MGMT_XFER_POOL_MAX_MIB);
                                return 1;
                        }
                        break;
                case 'L':
                        level_arg = optarg;
                        break;
                case 'H':
                        http_arg = optarg;
                        break;
                case 'V':
                        printf("slated %s\n", SLATE_VERSION);
                        return 0;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 1;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "slated: unexpected argument '%s'\n", argv[optind]);
                usage(stderr);
                return 1;
        }

        /* Journal or plain lines, decided before anything logs. */
        rt_log_init();

        /* Options in the config file; the command line wins. */
        if (config && mgmt_config_read_options(config, &opts, err, sizeof(err)) < 0) {
                fprintf(stderr, "slated: %s\n", err);
                return 1;
        }
        if (!level_arg && opts.log_level[0])
                level_arg = opts.log_level;
        if (level_arg) {
                enum rt_log_level l;
                if (rt_log_parse_level(level_arg, &l) < 0) {
                        fprintf(stderr, "slated: log level must be error, warn, info or debug\n");
                        return 1;
                }
                rt_log_threshold = l;
        }
        mgmt_options_apply_limits(&opts);
        /* Before any target or controller exists: CNTLIDs and port ids derive from it. */
        core_gateway_set_id(opts.gateway_id);
        if (opts.gateway_id)
                LOG_INFO("slated", "gateway %u: controller IDs and SCSI port ids offset by it",
                         opts.gateway_id);
        rt_limits_raise_nofile();
        if (!xfer_pool_mib)
                xfer_pool_mib = opts.xfer_pool_mib ? opts.xfer_pool_mib : RT_BIGBUF_DEFAULT_MIB;
        rt_bigbuf_configure((uint64_t)xfer_pool_mib << 20);
        if (!reactors)
                reactors = opts.reactors;
        if (!reactors) {
                long n = sysconf(_SC_NPROCESSORS_ONLN);
                reactors = n > 0 ? (unsigned)n : 1;
        }

        /* State dir: created if missing, then made absolute so nothing depends on cwd. */
        const char *sd = state_arg ? state_arg : opts.state_dir[0] ? opts.state_dir : "./state";
        rc = make_dirs(sd);
        char state_dir[PATH_MAX];
        if (rc < 0 || !realpath(sd, state_dir)) {
                fprintf(stderr, "slated: state dir %s: %s\n", sd, strerror(rc < 0 ? -rc : errno));
                return 1;
        }
        char sock[PATH_MAX];
        const char *sp = sock_arg ? sock_arg : opts.rpc_socket[0] ? opts.rpc_socket : NULL;
        if (sp)
                snprintf(sock, sizeof(sock), "%s", sp);
        else if (snprintf(sock, sizeof(sock), "%s/slated.sock", state_dir) >= (int)sizeof(sock))
                sock[0] = '\0';
        if (!sock[0] || strlen(sock) >= sizeof(opts.rpc_socket)) {
                fprintf(stderr,
                        "slated: RPC socket path '%s' is longer than a Unix socket allows (%zu); "
                        "use -r\n",
                        sock, sizeof(opts.rpc_socket) - 1);
                return 1;
        }
        if (rpc_socket_live(sock)) {
                fprintf(stderr, "slated: another slated is already running on %s\n", sock);
                return 1;
        }
        core_set_state_dir(state_dir);

        /*
         * Block the shutdown signals before any thread exists: threads inherit
         * the mask, so only sigwait() below receives them.
         */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        int exit_code = 1;
        rc = rt_init(reactors);
        if (rc < 0) {
                fprintf(stderr, "slated: cannot create %u reactors: %s\n", reactors, strerror(-rc));
                return 1;
        }
        rc = rt_start();
        if (rc < 0) {
                fprintf(stderr, "slated: cannot start reactors: %s\n", strerror(-rc));
                goto out_fini;
        }
        rc = iscsi_init();
        if (rc < 0) {
                fprintf(stderr, "slated: iSCSI init failed: %s\n", strerror(-rc));
                goto out_rt;
        }
        rc = nvmf_tcp_init();
        if (rc < 0) {
                fprintf(stderr, "slated: NVMe/TCP init failed: %s\n", strerror(-rc));
                goto out_iscsi;
        }
        rc = config ? mgmt_config_load_file(config, err, sizeof(err))
                    : mgmt_config_load_default(err, sizeof(err));
        if (rc < 0) {
                fprintf(stderr, "slated: %s\n", err);
                goto out_iscsi;
        }
        rc = mgmt_rpc_start(sock);
        if (rc < 0) {
                fprintf(stderr, "slated: RPC socket %s: %s\n", sock,
                        rc == -EADDRINUSE ? "another slated is already listening there"
                                          : strerror(-rc));
                goto out_iscsi;
        }

        /* Metrics and the status page, when configured (after the config: it shows its objects). */
        if (!http_arg && opts.http_listen[0])
                http_arg = opts.http_listen;
        if (http_arg) {
                rc = mgmt_http_start(http_arg, err, sizeof(err));
                if (rc < 0) {
                        fprintf(stderr, "slated: %s\n", err);
                        mgmt_rpc_stop();
                        goto out_iscsi;
                }
        }

        printf("slated %s ready: %u reactor%s, state dir %s, rpc socket %s\n", SLATE_VERSION,
               reactors, reactors == 1 ? "" : "s", state_dir, sock);
        if (!config)
                printf(
                    "default config: namespace disk0 (1 GiB, thin) as LUN 0 of "
                    "iqn.2026-12.io.slate:disk0 on 127.0.0.1:3260\n"
                    "connect with:\n"
                    "  iscsiadm -m discovery -t st -p 127.0.0.1:3260\n"
                    "  iscsiadm -m node -T iqn.2026-12.io.slate:disk0 -p 127.0.0.1:3260 "
                    "--login\n"
                    "and as NSID 1 of nqn.2026-12.io.slate:disk0 on NVMe/TCP 127.0.0.1:4420:\n"
                    "  nvme discover -t tcp -a 127.0.0.1 -s 4420\n"
                    "  nvme connect -t tcp -a 127.0.0.1 -s 4420 -n nqn.2026-12.io.slate:disk0\n");
        fflush(stdout);
        /* Type=notify: the unit is started only now that every listener is up. */
        snprintf(ready_status, sizeof(ready_status), "serving: %u reactor%s, rpc socket %s",
                 reactors, reactors == 1 ? "" : "s", sock);
        mgmt_reload_set_hooks(reload_before, reload_after);
        rt_service_ready("%s", ready_status);

        for (;;) {
                int sig = 0;
                if (sigwait(&mask, &sig) != 0)
                        continue;
                if (sig == SIGHUP) {
                        /*
                         * The reload runs on the RPC (control-path) thread, not here;
                         * its hooks (reload_before/reload_after) tell systemd.
                         */
                        mgmt_rpc_request_reload();
                        continue;
                }
                LOG_INFO("slated", "signal %d: shutting down", sig);
                break;
        }
        rt_service_stopping();
        exit_code = 0;
        mgmt_http_stop();
        mgmt_rpc_stop();
out_iscsi:
        nvmf_tcp_fini();
        iscsi_fini();
out_rt:
        rt_stop();
        rt_join();
        nvme_subsys_shutdown();
        core_ns_shutdown_all();
out_fini:
        rt_fini();
        return exit_code;
}
