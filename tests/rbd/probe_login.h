/*
 * The login both rbd probes (alua-probe, pr-probe) make: a normal session to
 * URL's target as initiator, no digests, no reconnects, a 30 s timeout.
 * Not iscsi_full_connect_sync: its TEST UNIT READY fails a path in standby.
 * isid_qualifier >= 0: the ISID is OUI-format with that qualifier (one
 * initiator port per process).  NULL, with a message on stderr, on failure.
 */
#ifndef RBD_PROBE_LOGIN_H
#define RBD_PROBE_LOGIN_H

#include <stdio.h>

#include <iscsi/iscsi.h>

static inline struct iscsi_context *probe_login(const char *url_s, const char *initiator,
                                                int isid_qualifier, int *lun)
{
        struct iscsi_context *c = iscsi_create_context(initiator);
        struct iscsi_url *url = c ? iscsi_parse_full_url(c, url_s) : NULL;
        if (!url) {
                fprintf(stderr, "bad URL %s\n", url_s);
                return NULL;
        }
        if (isid_qualifier >= 0)
                iscsi_set_isid_oui(c, 0x2017a, (uint32_t)isid_qualifier);
        iscsi_set_targetname(c, url->target);
        iscsi_set_session_type(c, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(c, ISCSI_HEADER_DIGEST_NONE);
        iscsi_set_noautoreconnect(c, 1);
        iscsi_set_timeout(c, 30);
        *lun = url->lun;
        if (iscsi_connect_sync(c, url->portal) || iscsi_login_sync(c)) {
                fprintf(stderr, "login failed: %s\n", iscsi_get_error(c));
                iscsi_destroy_url(url);
                return NULL;
        }
        iscsi_destroy_url(url);
        return c;
}

#endif
