/*
 * iSCSI PDU helpers (RFC 7143 11.2): validation of a received Basic Header
 * Segment before any length in it is used, the byte order of CRC32C
 * header/data digests (RFC 7143 11.2.3 / RFC 3720 B.4; the CRC itself is
 * rt_crc32c), and the SAM LUN
 * encoding of the LUN field (SAM-5 4.7, single level only).
 */
#include <errno.h>
#include <string.h>

#include "iscsi/internal.h"

void iscsi_digest_put(uint8_t out[4], uint32_t crc)
{
        out[0] = (uint8_t)crc;
        out[1] = (uint8_t)(crc >> 8);
        out[2] = (uint8_t)(crc >> 16);
        out[3] = (uint8_t)(crc >> 24);
}

uint32_t iscsi_digest_get(const uint8_t in[4])
{
        return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
               (uint32_t)in[3] << 24;
}

uint64_t iscsi_lun_decode(const uint8_t lun[8])
{
        /* Bytes 2..7 must be zero for a single-level LUN. */
        for (int i = 2; i < 8; i++)
                if (lun[i])
                        return UINT64_MAX;
        switch (lun[0] >> 6) {
        case 0: /* peripheral device addressing: bus 0 only */
                if (lun[0] & 0x3f)
                        return UINT64_MAX;
                return lun[1];
        case 1: /* flat space addressing */
                return ((uint64_t)(lun[0] & 0x3f) << 8) | lun[1];
        default:
                return UINT64_MAX;
        }
}

void iscsi_lun_encode(uint8_t lun[8], uint64_t l)
{
        memset(lun, 0, 8);
        if (l < 256) {
                lun[1] = (uint8_t)l;
        } else {
                lun[0] = (uint8_t)(0x40 | ((l >> 8) & 0x3f));
                lun[1] = (uint8_t)l;
        }
}

int iscsi_pdu_check_bhs(const uint8_t bhs[ISCSI_BHS_LEN], const struct iscsi_conn_limits *lim,
                        uint32_t *ahs_len, uint32_t *dsl)
{
        const struct iscsi_bhs *h = (const struct iscsi_bhs *)bhs;
        uint8_t op = h->opcode & ISCSI_OPCODE_MASK;

        *ahs_len = (uint32_t)h->total_ahs_len * 4;
        *dsl = get_be24(&h->data_segment_len);

        /* Bit 7 of byte 0 is reserved in every initiator PDU. */
        if (h->opcode & 0x80)
                return -EPROTO;
        if (*dsl > lim->max_recv)
                return -EMSGSIZE;
        if (*ahs_len > ISCSI_AHS_MAX)
                return -EMSGSIZE;

        if (lim->login_phase) {
                if (op != ISCSI_OP_LOGIN_REQ)
                        return -EPROTO;
                if (*ahs_len)
                        return -EPROTO;
                return 0;
        }

        switch (op) {
        case ISCSI_OP_SCSI_CMD:
                break;
        case ISCSI_OP_NOP_OUT:
        case ISCSI_OP_TASK_MGMT_REQ:
        case ISCSI_OP_TEXT_REQ:
        case ISCSI_OP_DATA_OUT:
        case ISCSI_OP_LOGOUT_REQ:
        case ISCSI_OP_LOGIN_REQ:
        case ISCSI_OP_SNACK_REQ:
                /* Only the SCSI Command may carry AHS. */
                if (*ahs_len)
                        return -EPROTO;
                break;
        default:
                return -EOPNOTSUPP;
        }
        if ((op == ISCSI_OP_TASK_MGMT_REQ || op == ISCSI_OP_LOGOUT_REQ ||
             op == ISCSI_OP_SNACK_REQ) &&
            *dsl)
                return -EPROTO;
        return 0;
}
