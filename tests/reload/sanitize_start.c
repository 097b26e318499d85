/*
 * reload-sanitize-start: starts a SANITIZE OVERWRITE (SBC-4 5.30) with
 * IMMED=1 on one LUN through libiscsi and returns as soon as the target
 * accepted it, so a test can watch the sanitize's progress (slatectl
 * progress).  One pass of a 4-byte pattern.
 *
 *   reload-sanitize-start -u URL
 *
 * Exit status 0 when the command ended GOOD.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

int main(int argc, char **argv)
{
        if (argc != 3 || strcmp(argv[1], "-u") != 0) {
                fprintf(stderr, "usage: reload-sanitize-start -u URL\n");
                return 1;
        }
        struct iscsi_context *ctx = iscsi_create_context("iqn.2026-12.io.slate:reload-sanitize");
        struct iscsi_url *u = ctx ? iscsi_parse_full_url(ctx, argv[2]) : NULL;
        if (!u) {
                fprintf(stderr, "reload-sanitize-start: bad URL %s\n", argv[2]);
                return 1;
        }
        iscsi_set_targetname(ctx, u->target);
        iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE);
        if (iscsi_full_connect_sync(ctx, u->portal, u->lun) != 0) {
                fprintf(stderr, "reload-sanitize-start: login: %s\n", iscsi_get_error(ctx));
                return 1;
        }
        /* OVERWRITE parameter list: 1 pass, pattern length 4, the pattern */
        unsigned char param[8] = {0x01, 0, 0, 4, 0xa5, 0x5a, 0xa5, 0x5a};
        struct iscsi_data d = {.size = sizeof(param), .data = param};
        struct scsi_task *t =
            iscsi_sanitize_sync(ctx, u->lun, 1, 0, SCSI_SANITIZE_OVERWRITE, sizeof(param), &d);
        int rc = t && t->status == SCSI_STATUS_GOOD ? 0 : 1;
        if (rc)
                fprintf(stderr, "reload-sanitize-start: SANITIZE failed: %s\n",
                        iscsi_get_error(ctx));
        else
                printf("sanitize started\n");
        if (t)
                scsi_free_scsi_task(t);
        iscsi_logout_sync(ctx);
        iscsi_destroy_url(u);
        iscsi_destroy_context(ctx);
        return rc;
}
