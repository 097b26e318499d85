/*
 * Asymmetric logical unit access (SPC-5 5.16): the SCSI speaking of the
 * core's access groups (core/ana.h).  Implicit ALUA only (standard
 * INQUIRY TPGS 01b, vpd.c): the states are set by management
 * (ana_group_set), never by a host, so SET TARGET PORT GROUPS is not in
 * the opcode table and is refused as an unsupported command, as arrays
 * with implicit-only ALUA do (Linux scsi_dh_alua sends it only to
 * explicit ones).  An LU's target port group on this gateway is
 * core_gateway_tpg(its access group), which VPD 83h names (type 5); the
 * group holds this target's one port (VPD 83h type 4).  REPORT TARGET PORT
 * GROUPS (6.36) reports that one group with this gateway's state: each
 * gateway answers for its own ports, and a host asks each path.
 */
#include <string.h>

#include "core/ana.h"
#include "slate/spec/scsi.h"
#include "scsi/internal.h"

uint8_t scsi_alua_state(enum core_ana_state st)
{
        switch (st) {
        case CORE_ANA_OPTIMIZED:
                return 0x0; /* active/optimized */
        case CORE_ANA_NON_OPTIMIZED:
                return 0x1; /* active/non-optimized */
        case CORE_ANA_STANDBY:
                return 0x2;
        case CORE_ANA_PERSISTENT_LOSS:
                return 0xe; /* offline */
        case CORE_ANA_TRANSITIONING:
                return 0xf;
        case CORE_ANA_INACCESSIBLE:
        default:
                return 0x3; /* unavailable */
        }
}

/* The seconds an implicit transition may take (extended header): our choice. */
#define ALUA_IMPLICIT_TRANSITION_S 10

uint32_t scsi_alua_rtpg_build(const struct core_ns *ns, uint16_t rel_port, bool extended,
                              uint8_t *b)
{
        uint32_t g = core_ns_ana_group(ns);
        uint32_t hdr = extended ? 8 : 4;
        uint8_t *d = b + hdr;

        memset(b, 0, hdr + 12);
        if (extended) {
                b[4] = 0x10; /* FORMAT TYPE 001b */
                b[5] = ALUA_IMPLICIT_TRANSITION_S;
        }
        /* PREF 0: no group is preferred over the others; the state says it. */
        d[0] = scsi_alua_state(core_ana_state(g));
        /* T_SUP, O_SUP, U_SUP, S_SUP, AN_SUP, AO_SUP: every state but LBA dependent. */
        d[1] = 0x80 | 0x40 | 0x08 | 0x04 | 0x02 | 0x01;
        slate_put_be(d + 2, 2, core_gateway_tpg(g));
        d[5] = core_ana_group_change_count(g) ? 0x02 : 0x00; /* altered by implicit behaviour */
        d[7] = 1;                                            /* TARGET PORT COUNT */
        slate_put_be(d + 8 + 2, 2, rel_port);
        slate_put_be(b, 4, (hdr - 4) + 12);
        return hdr + 12;
}

enum scsi_parse_result scsi_spc_rtpg(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t alloc = slate_be32(c + 6);
        uint8_t fmt = c[1] >> 5;
        struct scsi_target *tgt = cmd->nexus ? cmd->nexus->target : NULL;

        cmd->xfer_len = alloc;
        if (fmt > 1) { /* 000b length only, 001b extended header */
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        uint32_t len =
            scsi_alua_rtpg_build(cmd->ns, tgt ? tgt->rel_port_id : 1, fmt == 1, cmd->buf);
        scsi_cmd_data_in(cmd, len, alloc);
        return SCSI_PARSE_DONE;
}
