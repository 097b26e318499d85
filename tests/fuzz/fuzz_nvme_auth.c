/*
 * libFuzzer target: DH-HMAC-CHAP messages (nvme/auth.c) through
 * Authentication Send/Receive on an admin queue whose host must
 * authenticate, and the key interchange decoder (nvme/keyfmt.c).
 * Input: byte 0 bit 0 feeds the rest to nvme_key_decode (both kinds) as a
 * string as well; then records of [op, len_lo, len_hi, len bytes]:
 * op % 3 == 0: Authentication Send of the bytes; 1: Authentication
 * Receive with AL = len; 2: a correct DH-HMAC-CHAP_Reply to the last
 * Challenge (null group; CVALID = first byte & 1), so Success1/Success2
 * and re-authentication are reached too.  The controller prefers the
 * null group, then ffdhe2048 (a Negotiate without null gets DH).  The
 * queue is reconnected when an input leaves it authenticated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/internal.h"
#include "rt/log.h"

#define FUZZ_NQN "nqn.2026-12.io.slate:fuzz-auth"
#define HOSTNQN  "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000a07f"
#define HKEY     "DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
#define CKEY     "DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nvme_queue q;
static uint8_t *buf;
#define BUF_LEN 16384
static uint8_t chal[4096];

static void cmd_init(struct nvme_cmd *c, uint8_t fctype, uint32_t len)
{
        memset(c, 0, sizeof(*c));
        c->queue = &q;
        c->buf = buf;
        c->buf_len = BUF_LEN;
        c->sqe[0] = NVME_OPC_FABRICS;
        c->sqe[1] = 0x40;
        c->sqe[4] = fctype;
        c->sqe[39] = 0x01;
        c->sqe[41] = c->sqe[42] = 1;
        c->sqe[43] = 0xe9;
        slate_put_le(c->sqe + 32, 4, len);
        slate_put_le(c->sqe + 44, 4, len);
        c->icd_len = len;
}

static int reconnect(void)
{
        struct nvme_cmd c;
        nvme_queue_fini(&q);
        memset(&q, 0, sizeof(q));
        cmd_init(&c, NVMF_FCTYPE_CONNECT, 1024);
        memset(c.sqe + 40, 0, 8);
        slate_put_le(c.sqe + 44, 2, 31);
        struct nvmf_connect_data *d = (struct nvmf_connect_data *)buf;
        memset(d, 0, sizeof(*d));
        put_le16(&d->cntlid, NVMF_CNTLID_DYNAMIC);
        strcpy(d->subnqn, FUZZ_NQN);
        strcpy(d->hostnqn, HOSTNQN);
        if (nvme_cmd_parse(&c) != NVME_PARSE_EXEC)
                return -1;
        nvmf_connect_do(&c);
        return q.ctrl && q.auth ? 0 : -1;
}

static int setup_once(void)
{
        static int done;
        if (done)
                return 0;
        done = 1;
        rt_log_threshold = RT_LOG_ERR;
        char err[256], dir[] = "/tmp/slate-fuzz-auth-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        buf = aligned_alloc(4096, BUF_LEN);
        if (!buf || nvme_subsys_add(FUZZ_NQN, "FUZZA", "Slate fuzz", err, sizeof(err)) ||
            nvme_subsys_allow_host(FUZZ_NQN, HOSTNQN, err, sizeof(err)) ||
            nvme_subsys_set_host_key(FUZZ_NQN, HOSTNQN, HKEY, CKEY, err, sizeof(err)) ||
            nvme_subsys_set_auth(FUZZ_NQN, NULL, 0, (const char *[]){"null", "ffdhe2048"}, 2, err,
                                 sizeof(err)))
                return -1;
        return reconnect();
}

static void correct_reply(bool bidi)
{
        /* chal holds the last Challenge; only the null group is answered here. */
        if (chal[0] != 0x01 || chal[1] != 0x01 || chal[9] != 0)
                return;
        int hash = chal[8];
        size_t hl = nvme_auth_hash_len(hash);
        uint8_t key[64], tk[64], r[64];
        size_t kl = sizeof(key), tkl = sizeof(tk);
        int kh;
        if (!hl || nvme_key_decode(HKEY, NVME_KEY_DHCHAP, key, &kl, &kh, NULL, 0) ||
            nvme_auth_transform(key, kl, kh, HOSTNQN, tk, &tkl))
                return;
        uint16_t tid = (uint16_t)slate_get_le(chal + 4, 2);
        if (nvme_auth_response(hash, tk, tkl, chal + 16, NULL, 0,
                               (uint32_t)slate_get_le(chal + 12, 4), tid, 0, true, HOSTNQN,
                               FUZZ_NQN, r))
                return;
        struct nvme_cmd c;
        uint32_t len = (uint32_t)(16 + 2 * hl);
        cmd_init(&c, NVMF_FCTYPE_AUTH_SEND, len);
        memset(buf, 0, len);
        buf[0] = 0x01;
        buf[1] = 0x02;
        slate_put_le(buf + 4, 2, tid);
        buf[6] = (uint8_t)hl;
        buf[8] = bidi;
        slate_put_le(buf + 12, 4, 0x1234);
        memcpy(buf + 16, r, hl);
        memset(buf + 16 + hl, 0x5a, hl);
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC)
                nvmf_auth_send_do(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (setup_once() != 0)
                abort();
        if (size == 0)
                return 0;
        if (data[0] & 1) {
                char s[512];
                size_t n = size - 1 < sizeof(s) - 1 ? size - 1 : sizeof(s) - 1;
                memcpy(s, data + 1, n);
                s[n] = '\0';
                uint8_t k[NVME_KEY_MAX];
                size_t kl = sizeof(k);
                int h;
                char err[128];
                nvme_key_decode(s, NVME_KEY_DHCHAP, k, &kl, &h, err, sizeof(err));
                kl = sizeof(k);
                nvme_key_decode(s, NVME_KEY_TLS, k, &kl, &h, err, sizeof(err));
        }
        size_t off = 1;
        for (int n = 0; n < 16 && off + 3 <= size; n++) {
                uint8_t op = data[off] % 3;
                uint32_t len = (uint32_t)(data[off + 1] | data[off + 2] << 8);
                off += 3;
                size_t avail = size - off;
                struct nvme_cmd c;
                if (op == 0) {
                        if (len > avail)
                                len = (uint32_t)avail;
                        cmd_init(&c, NVMF_FCTYPE_AUTH_SEND, len);
                        memcpy(buf, data + off, len);
                        off += len;
                        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC)
                                nvmf_auth_send_do(&c);
                } else if (op == 1) {
                        cmd_init(&c, NVMF_FCTYPE_AUTH_RECV, len);
                        if (nvme_cmd_parse(&c) == NVME_PARSE_DONE && nvme_cqe_status(&c) == 0 &&
                            buf[1] == 0x01)
                                memcpy(chal, buf, len < sizeof(chal) ? len : sizeof(chal));
                } else {
                        correct_reply(avail && (data[off] & 1));
                }
        }
        if (nvme_auth_queue_ok(&q) && reconnect() != 0)
                abort();
        return 0;
}
