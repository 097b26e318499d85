/*
 * The Discovery Log Page (NVMe Base 2.0 5.16.1.23, log 70h; NVMe-oF 1.1
 * 5.3): one 1024-byte entry per (subsystem the host may access, listener),
 * plus the current discovery subsystem itself on each listener, behind a
 * header with the generation counter the host re-reads to detect change
 * between partial reads (LPO).  Every change bumps GENCTR and raises the
 * Discovery Log Page Change notice (F0h) on persistent discovery
 * controllers that enabled it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nvme/internal.h"

static uint64_t genctr = 1; /* under nvme_lock */

uint64_t nvmf_discovery_genctr(void)
{
        pthread_mutex_lock(&nvme_lock);
        uint64_t g = genctr;
        pthread_mutex_unlock(&nvme_lock);
        return g;
}

void nvmf_discovery_changed(void)
{
        genctr++;
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next)
                if (s->discovery)
                        for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                                nvme_ctrl_raise(c, NVME_EVT_DISC_CHANGED, 0);
}

static void pad_str(char *dst, size_t n, const char *src, char pad)
{
        size_t l = strlen(src);
        memset(dst, pad, n);
        memcpy(dst, src, l < n ? l : n);
}

static bool wildcard(const char *a)
{
        return !*a || strcmp(a, "0.0.0.0") == 0 || strcmp(a, "::") == 0 || strcmp(a, "[::]") == 0;
}

static void fill_entry(struct nvmf_disc_log_entry *e, const struct nvme_subsys *s,
                       const struct nvme_queue *q, const char *trtype, const char *addr,
                       uint16_t port, uint16_t portid, uint8_t tls)
{
        char svc[8];
        const char *a = addr;
        memset(e, 0, sizeof(*e));
        e->trtype = strcmp(trtype, "rdma") == 0 ? NVMF_TRTYPE_RDMA : NVMF_TRTYPE_TCP;
        if (wildcard(a) && q && q->local_addr[0])
                a = q->local_addr;
        e->adrfam = strchr(a, ':') ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4;
        e->subtype = s->discovery ? NVMF_SUBTYPE_CURRENT_DISC : NVMF_SUBTYPE_NVME;
        e->treq = NVMF_TREQ_NOT_SPECIFIED;
        put_le16(&e->portid, portid);
        put_le16(&e->cntlid, NVMF_CNTLID_DYNAMIC);
        put_le16(&e->asqsz, NVME_TRANSPORT_QUEUE_DEPTH);
        snprintf(svc, sizeof(svc), "%u", port);
        pad_str(e->trsvcid, sizeof(e->trsvcid), svc, ' ');
        snprintf(e->subnqn, sizeof(e->subnqn), "%s", s->nqn);
        pad_str(e->traddr, sizeof(e->traddr), a, ' ');
        e->tsas[0] = NVMF_TCP_SECTYPE_NONE;
        /*
         * A TLS listener (nvmf/nvmf.h): TREQ says whether the secure channel is
         * required (1) or not (2), TSAS.SECTYPE that it is TLS 1.3 (TCP
         * transport 1.0c 4.2, Discovery Log Page Entry TSAS).
         */
        if (tls == 1 || tls == 2) {
                e->treq = tls == 1 ? NVMF_TREQ_REQUIRED : NVMF_TREQ_NOT_REQUIRED;
                e->tsas[0] = NVMF_TCP_SECTYPE_TLS13;
        }
}

int nvmf_discovery_log(struct nvme_ctrl *ctrl, const struct nvme_queue *q, uint8_t *buf,
                       uint32_t len, uint64_t off)
{
        struct nvmf_disc_log_entry e;
        struct nvmf_disc_log_hdr h;
        uint64_t n = 0, idx = 0;
        const char *trtype, *addr;
        uint16_t port, portid;
        uint8_t tls;

        pthread_mutex_lock(&nvme_lock);
        for (unsigned li = 0; nvmf_listener_get_locked(li, &trtype, &addr, &port, &portid, &tls);
             li++)
                for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next)
                        if (s->discovery || nvme_subsys_host_allowed_locked(s, ctrl->hostnqn))
                                n++;
        if (off > (n + 1) * sizeof(e)) {
                pthread_mutex_unlock(&nvme_lock);
                return -EINVAL;
        }
        memset(&h, 0, sizeof(h));
        put_le64(&h.genctr, genctr);
        put_le64(&h.numrec, n);
        nvme_copy_window(buf, len, off, &h, 0, sizeof(h));

        for (unsigned li = 0; nvmf_listener_get_locked(li, &trtype, &addr, &port, &portid, &tls);
             li++) {
                for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                        if (!s->discovery && !nvme_subsys_host_allowed_locked(s, ctrl->hostnqn))
                                continue;
                        uint64_t at = (idx + 1) * sizeof(e);
                        idx++;
                        if (at + sizeof(e) <= off || at >= off + len)
                                continue; /* outside the window the host asked for */
                        fill_entry(&e, s, q, trtype, addr, port, portid, tls);
                        nvme_copy_window(buf, len, off, &e, at, sizeof(e));
                }
        }
        pthread_mutex_unlock(&nvme_lock);
        return 0;
}
