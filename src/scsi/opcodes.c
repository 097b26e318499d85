/*
 * The SCSI opcode table: the single source of truth for which commands the
 * personality executes and what REPORT SUPPORTED OPERATION CODES (SPC-5
 * 6.35) advertises.  One row per (operation code, service action):
 * handler, CDB length, data direction, flags (unit attention, reservation
 * and medium behaviour), nominal timeout and the CDB usage data bitmap.
 * Opcodes with service actions (9Eh SERVICE ACTION IN(16), A3h MAINTENANCE
 * IN, 5Eh/5Fh PERSISTENT RESERVE IN/OUT, 48h SANITIZE) have sub-tables.  UNMAP
 * and GET LBA STATUS are listed for every LU; UNMAP refuses a fully
 * provisioned one (lbp.c).  EXTENDED COPY (83h) and RECEIVE COPY RESULTS
 * (84h) have sub-tables too (xcopy.c), and so do 9Fh SERVICE ACTION
 * OUT(16) and the 7Fh variable-length CDBs, whose service action is the
 * 16-bit field in bytes 8-9 (and whose CONTROL byte is byte 1).  WRITE
 * ATOMIC rows are offered only on LUs with atomic writes (SCSI_OPF_ATOMIC),
 * the depopulation rows only on LUs with physical elements (SCSI_OPF_ELEMENTS).
 * Commands of later issues are simply absent, so they are reported as
 * unsupported and never executed.
 */
#include "slate/spec/scsi.h"
#include "scsi/internal.h"
#include "core/media.h"

#define CTL     0x07 /* control byte usage: NACA, obsolete bits (we check them) */
#define T_SHORT 10
#define T_IO    30

#define T_SANITIZE 3600              /* a whole-medium overwrite */
#define T_SELFTEST 3600              /* a foreground extended self-test reads the whole medium */
#define T_DEPOP    SCSI_DEPOP_TIME_S /* VPD B1h DEPOPULATION TIME */
#define T_FORMAT   60                /* FORMAT UNIT: waits for the LU's commands in flight */

/* INQUIRY, REQUEST SENSE, REPORT LUNS: also the commands SBC-4 4.11.3 lets
 * run while a sanitize is in progress. */
#define F_INFO  (SCSI_OPF_NO_LUN | SCSI_OPF_UA_OK | SCSI_OPF_PR_EXEMPT | SCSI_OPF_SANITIZE_OK)
#define F_READ  (SCSI_OPF_READS | SCSI_OPF_MEDIUM)
#define F_WRITE (SCSI_OPF_WRITES | SCSI_OPF_MEDIUM | SCSI_OPF_WP_CHECK)

/* Operation codes without service actions, indexed by operation code. */
static const struct scsi_op ops[256] = {
    [SCSI_OP_TEST_UNIT_READY] = {"TEST UNIT READY",
                                 0x00,
                                 0,
                                 false,
                                 6,
                                 SCSI_DIR_NONE,
                                 SCSI_OPF_MEDIUM | SCSI_OPF_PR_EXEMPT,
                                 T_SHORT,
                                 scsi_spc_tur,
                                 NULL,
                                 {0x00, 0, 0, 0, 0, CTL}},
    [SCSI_OP_REQUEST_SENSE] = {"REQUEST SENSE",
                               0x03,
                               0,
                               false,
                               6,
                               SCSI_DIR_IN,
                               F_INFO,
                               T_SHORT,
                               scsi_sanitize_request_sense,
                               NULL,
                               {0x03, 0x01, 0, 0, 0xff, CTL}},
    /*
     * Protection information (pi.c): FMTPINFO, LONGLIST, FMTDATA, CMPLST,
     * DEFECT LIST FORMAT; FFMT.  Runs to its end before status.
     */
    [SCSI_OP_FORMAT_UNIT] = {.name = "FORMAT UNIT",
                             .opcode = 0x04,
                             .cdb_len = 6,
                             .dir = SCSI_DIR_OUT,
                             .flags = F_WRITE,
                             .timeout = T_FORMAT,
                             .parse = scsi_pi_format_parse,
                             .exec = scsi_pi_format_exec,
                             .usage = {0x04, 0xff, 0, 0, 0x01, CTL}},
    [SCSI_OP_READ_6] = {"READ(6)",
                        0x08,
                        0,
                        false,
                        6,
                        SCSI_DIR_IN,
                        F_READ,
                        T_IO,
                        scsi_sbc_rw,
                        NULL,
                        {0x08, 0x1f, 0xff, 0xff, 0xff, CTL}},
    [SCSI_OP_WRITE_6] = {"WRITE(6)",
                         0x0a,
                         0,
                         false,
                         6,
                         SCSI_DIR_OUT,
                         F_WRITE,
                         T_IO,
                         scsi_sbc_rw,
                         NULL,
                         {0x0a, 0x1f, 0xff, 0xff, 0xff, CTL}},
    [SCSI_OP_INQUIRY] = {"INQUIRY",
                         0x12,
                         0,
                         false,
                         6,
                         SCSI_DIR_IN,
                         F_INFO,
                         T_SHORT,
                         scsi_spc_inquiry,
                         NULL,
                         {0x12, 0x01, 0xff, 0xff, 0xff, CTL}},
    [SCSI_OP_MODE_SELECT_6] = {"MODE SELECT(6)",
                               0x15,
                               0,
                               false,
                               6,
                               SCSI_DIR_OUT,
                               SCSI_OPF_WRITES,
                               T_SHORT,
                               scsi_mode_select,
                               scsi_mode_select_exec,
                               {0x15, 0x11, 0, 0, 0xff, CTL}},
    [SCSI_OP_RESERVE_6] = {"RESERVE(6)",
                           0x16,
                           0,
                           false,
                           6,
                           SCSI_DIR_NONE,
                           SCSI_OPF_PR_EXEMPT,
                           T_SHORT,
                           scsi_spc_reserve6,
                           NULL,
                           {0x16, 0, 0, 0, 0, CTL}},
    [SCSI_OP_RELEASE_6] = {"RELEASE(6)",
                           0x17,
                           0,
                           false,
                           6,
                           SCSI_DIR_NONE,
                           SCSI_OPF_PR_EXEMPT,
                           T_SHORT,
                           scsi_spc_release6,
                           NULL,
                           {0x17, 0, 0, 0, 0, CTL}},
    [SCSI_OP_MODE_SENSE_6] = {"MODE SENSE(6)",
                              0x1a,
                              0,
                              false,
                              6,
                              SCSI_DIR_IN,
                              SCSI_OPF_READS,
                              T_SHORT,
                              scsi_mode_sense,
                              NULL,
                              {0x1a, 0x08, 0xff, 0xff, 0xff, CTL}},
    [SCSI_OP_START_STOP_UNIT] =
        {"START STOP UNIT",
         0x1b,
         0,
         false,
         6,
         SCSI_DIR_NONE,
         SCSI_OPF_WRITES,
         T_SHORT,
         scsi_spc_start_stop,
         NULL,
         {0x1b, 0x01, 0x00, 0x0f, 0xf7, CTL}},
    /* The self-tests run on the medium: NOT READY while stopped. */
    [SCSI_OP_RECEIVE_DIAGNOSTIC] = {.name = "RECEIVE DIAGNOSTIC RESULTS",
                                    .opcode = 0x1c,
                                    .cdb_len = 6,
                                    .dir = SCSI_DIR_IN,
                                    .timeout = T_SHORT,
                                    .parse = scsi_diag_receive,
                                    .usage = {0x1c, 0x01, 0xff, 0xff, 0xff, CTL}},
    [SCSI_OP_SEND_DIAGNOSTIC] = {.name = "SEND DIAGNOSTIC",
                                 .opcode = 0x1d,
                                 .cdb_len = 6,
                                 .dir = SCSI_DIR_OUT,
                                 .flags = SCSI_OPF_MEDIUM,
                                 .timeout = T_SELFTEST,
                                 .parse = scsi_diag_send_parse,
                                 .exec = scsi_diag_send_exec,
                                 .abort = scsi_diag_send_abort,
                                 .usage = {0x1d, 0xf7, 0x00, 0xff, 0xff, CTL}},
    [SCSI_OP_PREVENT_ALLOW] = {"PREVENT ALLOW MEDIUM REMOVAL",
                               0x1e,
                               0,
                               false,
                               6,
                               SCSI_DIR_NONE,
                               SCSI_OPF_READS,
                               T_SHORT,
                               scsi_spc_prevent_allow,
                               NULL,
                               {0x1e, 0, 0, 0, 0x03, CTL}},
    [SCSI_OP_READ_CAPACITY_10] = {"READ CAPACITY(10)",
                                  0x25,
                                  0,
                                  false,
                                  10,
                                  SCSI_DIR_IN,
                                  SCSI_OPF_PR_EXEMPT | SCSI_OPF_NEEDS_MEDIUM,
                                  T_SHORT,
                                  scsi_sbc_read_capacity10,
                                  NULL,
                                  {0x25, 0, 0, 0, 0, 0, 0, 0, 0, CTL}},
    [SCSI_OP_READ_10] = {"READ(10)",
                         0x28,
                         0,
                         false,
                         10,
                         SCSI_DIR_IN,
                         F_READ | SCSI_OPF_PROTECT,
                         T_IO,
                         scsi_sbc_rw,
                         NULL,
                         {0x28, 0x18, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, CTL}},
    [SCSI_OP_WRITE_10] = {"WRITE(10)",
                          0x2a,
                          0,
                          false,
                          10,
                          SCSI_DIR_OUT,
                          F_WRITE | SCSI_OPF_PROTECT,
                          T_IO,
                          scsi_sbc_rw,
                          NULL,
                          {0x2a, 0x18, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, CTL}},
    [SCSI_OP_WRITE_VERIFY_10] = {"WRITE AND VERIFY(10)",
                                 0x2e,
                                 0,
                                 false,
                                 10,
                                 SCSI_DIR_OUT,
                                 F_WRITE | SCSI_OPF_PROTECT,
                                 T_IO,
                                 scsi_sbc_write_verify,
                                 NULL,
                                 {0x2e, 0x16, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, CTL}},
    [SCSI_OP_VERIFY_10] = {"VERIFY(10)",
                           0x2f,
                           0,
                           false,
                           10,
                           SCSI_DIR_OUT,
                           F_READ | SCSI_OPF_PROTECT,
                           T_IO,
                           scsi_sbc_verify,
                           NULL,
                           {0x2f, 0x16, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL}},
    [SCSI_OP_PREFETCH_10] = {"PRE-FETCH(10)",
                             0x34,
                             0,
                             false,
                             10,
                             SCSI_DIR_NONE,
                             F_READ,
                             T_IO,
                             scsi_sbc_prefetch,
                             NULL,
                             {0x34, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL}},
    [SCSI_OP_SYNC_CACHE_10] = {"SYNCHRONIZE CACHE(10)",
                               0x35,
                               0,
                               false,
                               10,
                               SCSI_DIR_NONE,
                               SCSI_OPF_WRITES | SCSI_OPF_MEDIUM,
                               T_IO,
                               scsi_sbc_sync_cache,
                               NULL,
                               {0x35, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL}},
    [SCSI_OP_READ_DEFECT_DATA_10] = {"READ DEFECT DATA(10)",
                                     0x37,
                                     0,
                                     false,
                                     10,
                                     SCSI_DIR_IN,
                                     SCSI_OPF_READS | SCSI_OPF_NEEDS_MEDIUM,
                                     T_SHORT,
                                     scsi_sbc_read_defect,
                                     NULL,
                                     {0x37, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, CTL}},
    /* WR_UNCOR only (media.c): no data moves, so no data direction. */
    [SCSI_OP_WRITE_LONG_10] = {.name = "WRITE LONG(10)",
                               .opcode = 0x3f,
                               .cdb_len = 10,
                               .dir = SCSI_DIR_NONE,
                               .flags = F_WRITE,
                               .timeout = T_SHORT,
                               .parse = scsi_media_write_long,
                               .exec = scsi_media_write_long_exec,
                               .usage = {0x3f, 0xe0, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, CTL}},
    [SCSI_OP_WRITE_SAME_10] = {"WRITE SAME(10)",
                               0x41,
                               0,
                               false,
                               10,
                               SCSI_DIR_OUT,
                               F_WRITE | SCSI_OPF_PROTECT,
                               T_IO,
                               scsi_sbc_write_same,
                               NULL,
                               {0x41, 0x08, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, CTL}},
    [SCSI_OP_UNMAP] =
        {"UNMAP",
         0x42,
         0,
         false,
         10,
         SCSI_DIR_OUT,
         F_WRITE,
         T_IO,
         scsi_lbp_unmap,
         scsi_lbp_unmap_exec,
         {0x42, 0x00, 0, 0, 0, 0, 0x1f, 0xff, 0xff, CTL}},
    [SCSI_OP_LOG_SENSE] = {.name = "LOG SENSE",
                           .opcode = 0x4d,
                           .cdb_len = 10,
                           .dir = SCSI_DIR_IN,
                           .flags = SCSI_OPF_PR_EXEMPT,
                           .timeout = T_SHORT,
                           .parse = scsi_log_sense,
                           .usage = {0x4d, 0x01, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, CTL}},
    [SCSI_OP_MODE_SELECT_10] = {"MODE SELECT(10)",
                                0x55,
                                0,
                                false,
                                10,
                                SCSI_DIR_OUT,
                                SCSI_OPF_WRITES,
                                T_SHORT,
                                scsi_mode_select,
                                scsi_mode_select_exec,
                                {0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, CTL}},
    [SCSI_OP_MODE_SENSE_10] = {"MODE SENSE(10)",
                               0x5a,
                               0,
                               false,
                               10,
                               SCSI_DIR_IN,
                               SCSI_OPF_READS,
                               T_SHORT,
                               scsi_mode_sense,
                               NULL,
                               {0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, CTL}},
    [SCSI_OP_READ_16] = {"READ(16)",
                         0x88,
                         0,
                         false,
                         16,
                         SCSI_DIR_IN,
                         F_READ | SCSI_OPF_PROTECT,
                         T_IO,
                         scsi_sbc_rw,
                         NULL,
                         {0x88, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                          0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_COMPARE_AND_WRITE] =
        {"COMPARE AND WRITE",
         0x89,
         0,
         false,
         16,
         SCSI_DIR_OUT,
         F_WRITE | SCSI_OPF_READS | SCSI_OPF_PROTECT,
         T_IO,
         scsi_sbc_caw,
         NULL,
         {0x89, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x3f, CTL}},
    [SCSI_OP_WRITE_16] = {"WRITE(16)",
                          0x8a,
                          0,
                          false,
                          16,
                          SCSI_DIR_OUT,
                          F_WRITE | SCSI_OPF_PROTECT,
                          T_IO,
                          scsi_sbc_rw,
                          NULL,
                          {0x8a, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                           0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_ORWRITE_16] = {"ORWRITE(16)",
                            0x8b,
                            0,
                            false,
                            16,
                            SCSI_DIR_OUT,
                            F_WRITE | SCSI_OPF_READS | SCSI_OPF_PROTECT,
                            T_IO,
                            scsi_sbc_orwrite,
                            NULL,
                            {0x8b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                             0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_WRITE_VERIFY_16] = {"WRITE AND VERIFY(16)",
                                 0x8e,
                                 0,
                                 false,
                                 16,
                                 SCSI_DIR_OUT,
                                 F_WRITE | SCSI_OPF_PROTECT,
                                 T_IO,
                                 scsi_sbc_write_verify,
                                 NULL,
                                 {0x8e, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_VERIFY_16] = {"VERIFY(16)",
                           0x8f,
                           0,
                           false,
                           16,
                           SCSI_DIR_OUT,
                           F_READ | SCSI_OPF_PROTECT,
                           T_IO,
                           scsi_sbc_verify,
                           NULL,
                           {0x8f, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0x1f, CTL}},
    [SCSI_OP_PREFETCH_16] = {"PRE-FETCH(16)",
                             0x90,
                             0,
                             false,
                             16,
                             SCSI_DIR_NONE,
                             F_READ,
                             T_IO,
                             scsi_sbc_prefetch,
                             NULL,
                             {0x90, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                              0xff, 0xff, 0xff, 0x1f, CTL}},
    [SCSI_OP_SYNC_CACHE_16] = {"SYNCHRONIZE CACHE(16)",
                               0x91,
                               0,
                               false,
                               16,
                               SCSI_DIR_NONE,
                               SCSI_OPF_WRITES | SCSI_OPF_MEDIUM,
                               T_IO,
                               scsi_sbc_sync_cache,
                               NULL,
                               {0x91, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0x1f, CTL}},
    [SCSI_OP_WRITE_SAME_16] = {"WRITE SAME(16)",
                               0x93,
                               0,
                               false,
                               16,
                               SCSI_DIR_OUT,
                               F_WRITE | SCSI_OPF_PROTECT,
                               T_IO,
                               scsi_sbc_write_same,
                               NULL,
                               {0x93, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0x3f, CTL}},
    /* Streams (streams.c): a write to an open stream, STR_ID in bytes 10-11. */
    [SCSI_OP_WRITE_STREAM_16] = {.name = "WRITE STREAM(16)",
                                 .opcode = 0x9a,
                                 .cdb_len = 16,
                                 .dir = SCSI_DIR_OUT,
                                 .flags = F_WRITE,
                                 .timeout = T_IO,
                                 .parse = scsi_sbc_write_stream,
                                 .usage = {0x9a, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_WRITE_ATOMIC_16] = {.name = "WRITE ATOMIC(16)",
                                 .opcode = 0x9c,
                                 .cdb_len = 16,
                                 .dir = SCSI_DIR_OUT,
                                 .flags = F_WRITE | SCSI_OPF_ATOMIC,
                                 .timeout = T_IO,
                                 .parse = scsi_sbc_write_atomic,
                                 .usage = {0x9c, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_REPORT_LUNS] =
        {"REPORT LUNS",
         0xa0,
         0,
         false,
         12,
         SCSI_DIR_IN,
         F_INFO,
         T_SHORT,
         scsi_spc_report_luns,
         NULL,
         {0xa0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    [SCSI_OP_READ_12] = {"READ(12)",
                         0xa8,
                         0,
                         false,
                         12,
                         SCSI_DIR_IN,
                         F_READ | SCSI_OPF_PROTECT,
                         T_IO,
                         scsi_sbc_rw,
                         NULL,
                         {0xa8, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_WRITE_12] = {"WRITE(12)",
                          0xaa,
                          0,
                          false,
                          12,
                          SCSI_DIR_OUT,
                          F_WRITE | SCSI_OPF_PROTECT,
                          T_IO,
                          scsi_sbc_rw,
                          NULL,
                          {0xaa, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, CTL}},
    [SCSI_OP_WRITE_VERIFY_12] = {"WRITE AND VERIFY(12)",
                                 0xae,
                                 0,
                                 false,
                                 12,
                                 SCSI_DIR_OUT,
                                 F_WRITE | SCSI_OPF_PROTECT,
                                 T_IO,
                                 scsi_sbc_write_verify,
                                 NULL,
                                 {0xae, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f,
                                  CTL}},
    [SCSI_OP_VERIFY_12] = {"VERIFY(12)",
                           0xaf,
                           0,
                           false,
                           12,
                           SCSI_DIR_OUT,
                           F_READ | SCSI_OPF_PROTECT,
                           T_IO,
                           scsi_sbc_verify,
                           NULL,
                           {0xaf, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL}},
    [SCSI_OP_READ_DEFECT_DATA_12] = {"READ DEFECT DATA(12)",
                                     0xb7,
                                     0,
                                     false,
                                     12,
                                     SCSI_DIR_IN,
                                     SCSI_OPF_READS | SCSI_OPF_NEEDS_MEDIUM,
                                     T_SHORT,
                                     scsi_sbc_read_defect,
                                     NULL,
                                     {0xb7, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
};

/* Service-action sub-tables, each sorted by service action. */
static const struct scsi_op sai16_ops[] = {
    {"READ CAPACITY(16)",
     0x9e,
     SCSI_SAI_READ_CAPACITY_16,
     true,
     16,
     SCSI_DIR_IN,
     SCSI_OPF_PR_EXEMPT | SCSI_OPF_NEEDS_MEDIUM,
     T_SHORT,
     scsi_sbc_read_capacity16,
     NULL,
     {0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    {"GET LBA STATUS",
     0x9e,
     SCSI_SAI_GET_LBA_STATUS,
     true,
     16,
     SCSI_DIR_IN,
     F_READ,
     T_SHORT,
     scsi_lbp_get_lba_status,
     scsi_lbp_get_lba_status_exec,
     {0x9e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      CTL}},
    /* Streams (streams.c): STREAM CONTROL changes the LU's open streams. */
    {.name = "STREAM CONTROL",
     .opcode = 0x9e,
     .sa = SCSI_SAI_STREAM_CONTROL,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_IN,
     .flags = SCSI_OPF_WRITES,
     .timeout = T_SHORT,
     .parse = scsi_stream_control,
     .usage = {0x9e, 0x74, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    {.name = "GET STREAM STATUS",
     .opcode = 0x9e,
     .sa = SCSI_SAI_GET_STREAM_STATUS,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_IN,
     .flags = SCSI_OPF_PR_EXEMPT,
     .timeout = T_SHORT,
     .parse = scsi_get_stream_status,
     .usage = {0x9e, 0x16, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    /*
     * Depopulation (media.c), on LUs with an element model.  GET PHYSICAL
     * ELEMENT STATUS only reports (no medium access: it runs stopped and
     * during a depopulation); the other two change the medium like FORMAT
     * UNIT does: write protection and reservations apply.
     */
    {.name = "GET PHYSICAL ELEMENT STATUS",
     .opcode = 0x9e,
     .sa = SCSI_SAI_GET_ELEM_STATUS,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_IN,
     .flags = SCSI_OPF_PR_EXEMPT | SCSI_OPF_ELEMENTS,
     .timeout = T_SHORT,
     .parse = scsi_media_gpes,
     .usage = {0x9e, 0x17, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xcf, CTL}},
    {.name = "REMOVE ELEMENT AND TRUNCATE",
     .opcode = 0x9e,
     .sa = SCSI_SAI_REMOVE_ELEM_TRUNC,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_NONE,
     .flags = F_WRITE | SCSI_OPF_ELEMENTS,
     .timeout = T_DEPOP,
     .parse = scsi_media_remove_parse,
     .exec = scsi_media_remove_exec,
     .usage = {0x9e, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0, CTL}},
    {.name = "RESTORE ELEMENTS AND REBUILD",
     .opcode = 0x9e,
     .sa = SCSI_SAI_RESTORE_ELEMENTS,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_NONE,
     .flags = F_WRITE | SCSI_OPF_ELEMENTS,
     .timeout = T_DEPOP,
     .parse = scsi_media_restore_parse,
     .exec = scsi_media_restore_exec,
     .usage = {0x9e, 0x19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, CTL}},
};

/* SERVICE ACTION OUT(16): WRITE LONG(16) (media.c), WRITE SCATTERED(16) (atomic.c). */
static const struct scsi_op sao16_ops[] = {
    {.name = "WRITE LONG(16)",
     .opcode = 0x9f,
     .sa = SCSI_SAO_WRITE_LONG_16,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_NONE,
     .flags = F_WRITE,
     .timeout = T_SHORT,
     .parse = scsi_media_write_long,
     .exec = scsi_media_write_long_exec,
     .usage = {0x9f, 0xf1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0,
               CTL}},
    {.name = "WRITE SCATTERED(16)",
     .opcode = 0x9f,
     .sa = SCSI_SAO_WRITE_SCATTERED_16,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_OUT,
     .flags = F_WRITE,
     .timeout = T_IO,
     .parse = scsi_sbc_write_scattered,
     .exec = scsi_sbc_write_scattered_exec,
     .usage = {0x9f, 0x12, 0x18, 0, 0xff, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f,
               CTL}},
};

/*
 * Variable-length CDBs (7Fh, SPC-5 4.2.3): CONTROL in byte 1, ADDITIONAL
 * CDB LENGTH 18h in byte 7, the service action in bytes 8-9.  Without PI
 * the reference/application tag fields (bytes 20-27) are ignored, so their
 * usage bits are clear.
 */
static const struct scsi_op varlen_ops[] = {
    /* Type 2 protection (pi.c): the expected initial reference tag, application tag and
     * mask in bytes 20-27. */
    {.name = "READ(32)",
     .opcode = 0x7f,
     .sa = SCSI_VL_READ_32,
     .has_sa = true,
     .cdb_len = 32,
     .dir = SCSI_DIR_IN,
     .flags = F_READ | SCSI_OPF_PI2 | SCSI_OPF_PROTECT,
     .timeout = T_IO,
     .parse = scsi_sbc_rw,
     .usage = {0x7f, CTL,  0,    0,    0,    0,    0x3f, 0x18, 0x00, (uint8_t)SCSI_VL_READ_32,
               0xf8, 0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0xff}},
    {.name = "VERIFY(32)",
     .opcode = 0x7f,
     .sa = SCSI_VL_VERIFY_32,
     .has_sa = true,
     .cdb_len = 32,
     .dir = SCSI_DIR_OUT,
     .flags = F_READ | SCSI_OPF_PI2 | SCSI_OPF_PROTECT,
     .timeout = T_IO,
     .parse = scsi_sbc_verify,
     .usage = {0x7f, CTL,  0,    0,    0,    0,    0x3f, 0x18, 0x00, (uint8_t)SCSI_VL_VERIFY_32,
               0xf6, 0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0xff}},
    {.name = "WRITE(32)",
     .opcode = 0x7f,
     .sa = SCSI_VL_WRITE_32,
     .has_sa = true,
     .cdb_len = 32,
     .dir = SCSI_DIR_OUT,
     .flags = F_WRITE | SCSI_OPF_PI2 | SCSI_OPF_PROTECT,
     .timeout = T_IO,
     .parse = scsi_sbc_rw,
     .usage = {0x7f, CTL,  0,    0,    0,    0,    0x3f, 0x18, 0x00, (uint8_t)SCSI_VL_WRITE_32,
               0xf8, 0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0xff}},
    {.name = "WRITE ATOMIC(32)",
     .opcode = 0x7f,
     .sa = SCSI_VL_WRITE_ATOMIC_32,
     .has_sa = true,
     .cdb_len = 32,
     .dir = SCSI_DIR_OUT,
     .flags = F_WRITE | SCSI_OPF_ATOMIC,
     .timeout = T_IO,
     .parse = scsi_sbc_write_atomic,
     .usage = {0x7f, CTL,  0,    0,    0xff, 0xff, 0x3f, 0x18, 0x00, 0x0f, 0x18,
               0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,    0,
               0,    0,    0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff}},
    {.name = "WRITE STREAM(32)",
     .opcode = 0x7f,
     .sa = SCSI_VL_WRITE_STREAM_32,
     .has_sa = true,
     .cdb_len = 32,
     .dir = SCSI_DIR_OUT,
     .flags = F_WRITE,
     .timeout = T_IO,
     .parse = scsi_sbc_write_stream,
     .usage = {0x7f, CTL,  0,    0,    0xff, 0xff, 0x3f, 0x18, 0x00, 0x10, 0x18,
               0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,    0,
               0,    0,    0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff}},
    {.name = "WRITE SCATTERED(32)",
     .opcode = 0x7f,
     .sa = SCSI_VL_WRITE_SCATTERED_32,
     .has_sa = true,
     .cdb_len = 32,
     .dir = SCSI_DIR_OUT,
     .flags = F_WRITE,
     .timeout = T_IO,
     .parse = scsi_sbc_write_scattered,
     .exec = scsi_sbc_write_scattered_exec,
     .usage = {0x7f, CTL,  0, 0, 0, 0, 0x3f, 0x18, 0x00, 0x11, 0x18, 0, 0xff, 0xff, 0,    0,
               0xff, 0xff, 0, 0, 0, 0, 0,    0,    0,    0,    0,    0, 0xff, 0xff, 0xff, 0xff}},
};

static const struct scsi_op maint_in_ops[] = {
    {"REPORT TARGET PORT GROUPS",
     0xa3,
     SCSI_MI_REPORT_TPG,
     true,
     12,
     SCSI_DIR_IN,
     SCSI_OPF_PR_EXEMPT,
     T_SHORT,
     scsi_spc_rtpg,
     NULL,
     {0xa3, 0xea, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    {"REPORT SUPPORTED OPERATION CODES",
     0xa3,
     SCSI_MI_REPORT_SUPPORTED_OPS,
     true,
     12,
     SCSI_DIR_IN,
     SCSI_OPF_PR_EXEMPT,
     T_SHORT,
     scsi_spc_rsoc,
     NULL,
     {0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
};

#define PRIN(sa, n)                                                                                \
        {                                                                                          \
                n, 0x5e, sa, true, 10, SCSI_DIR_IN, SCSI_OPF_PR_EXEMPT, T_SHORT, scsi_spc_pr_in,   \
                    scsi_pr_in_exec,                                                               \
                {                                                                                  \
                        0x5e, sa, 0, 0, 0, 0, 0, 0xff, 0xff, CTL                                   \
                }                                                                                  \
        }
static const struct scsi_op pr_in_ops[] = {
    PRIN(0x00, "PERSISTENT RESERVE IN/READ KEYS"),
    PRIN(0x01, "PERSISTENT RESERVE IN/READ RESERVATION"),
    PRIN(0x02, "PERSISTENT RESERVE IN/REPORT CAPABILITIES"),
    PRIN(0x03, "PERSISTENT RESERVE IN/READ FULL STATUS"),
};

#define PROUT(sa, n)                                                                               \
        {                                                                                          \
                n, 0x5f, sa, true, 10, SCSI_DIR_OUT, SCSI_OPF_PR_EXEMPT, T_SHORT, scsi_spc_pr_out, \
                    scsi_pr_out_exec,                                                              \
                {                                                                                  \
                        0x5f, sa, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, CTL                          \
                }                                                                                  \
        }
static const struct scsi_op pr_out_ops[] = {
    PROUT(0x00, "PERSISTENT RESERVE OUT/REGISTER"),
    PROUT(0x01, "PERSISTENT RESERVE OUT/RESERVE"),
    PROUT(0x02, "PERSISTENT RESERVE OUT/RELEASE"),
    PROUT(0x03, "PERSISTENT RESERVE OUT/CLEAR"),
    PROUT(0x04, "PERSISTENT RESERVE OUT/PREEMPT"),
    PROUT(0x05, "PERSISTENT RESERVE OUT/PREEMPT AND ABORT"),
    PROUT(0x06, "PERSISTENT RESERVE OUT/REGISTER AND IGNORE EXISTING KEY"),
    PROUT(0x07, "PERSISTENT RESERVE OUT/REGISTER AND MOVE"),
};

/*
 * SANITIZE (SBC-4 5.30): OVERWRITE, BLOCK ERASE and EXIT FAILURE MODE.
 * BLOCK ERASE deallocates every block, which a host checks with LBPME=1
 * and GET LBA STATUS, so it is offered on thin LUs only (VPD B1h WABEREQ
 * 01b there: reads after it succeed and return zeroes).  CRYPTOGRAPHIC
 * ERASE is offered on LUs encrypted at rest (core/crypt.h) only: it
 * replaces the data key (VPD B1h WACEREQ 01b: reads after it succeed).
 */
#define SANITIZE_OP(sa_, n, f)                                                                     \
        {                                                                                          \
                .name = n, .opcode = 0x48, .sa = sa_, .has_sa = true, .cdb_len = 10,               \
                .dir = SCSI_DIR_OUT,                                                               \
                .flags = SCSI_OPF_WRITES | SCSI_OPF_WP_CHECK | SCSI_OPF_NEEDS_MEDIUM | (f),        \
                .timeout = T_SANITIZE, .parse = scsi_sanitize_parse, .exec = scsi_sanitize_exec,   \
                .abort = scsi_sanitize_abort,                                                      \
                .usage = {0x48, 0xa0 | sa_, 0, 0, 0, 0, 0, 0xff, 0xff, CTL},                       \
        }
static const struct scsi_op sanitize_ops[] = {
    SANITIZE_OP(SCSI_SANITIZE_OVERWRITE, "SANITIZE/OVERWRITE", 0),
    SANITIZE_OP(SCSI_SANITIZE_BLOCK_ERASE, "SANITIZE/BLOCK ERASE", SCSI_OPF_LBP),
    SANITIZE_OP(SCSI_SANITIZE_CRYPTO_ERASE, "SANITIZE/CRYPTOGRAPHIC ERASE", SCSI_OPF_CRYPT),
    SANITIZE_OP(SCSI_SANITIZE_EXIT_FAILURE, "SANITIZE/EXIT FAILURE MODE", 0),
};

/*
 * Third-party copy (xcopy.c): EXTENDED COPY(LID1) and (LID4), COPY
 * OPERATION ABORT, token copy and the RECEIVE commands.  Exempt from the dispatcher's reservation
 * check: the copy manager checks each copy target itself (the core copy engine: read on the source,
 * write on the destination, for the issuing nexus), and RECEIVE COPY RESULTS only reports.  VPD 8Fh
 * lists these rows.
 */
#define T_XCOPY 600 /* up to 16 segments of 65535 blocks each */
static const struct scsi_op xcopy_ops[] = {
    {.name = "EXTENDED COPY(LID1)",
     .opcode = 0x83,
     .sa = 0x00,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_OUT,
     .flags = SCSI_OPF_PR_EXEMPT,
     .timeout = T_XCOPY,
     .parse = scsi_xcopy_parse,
     .exec = scsi_xcopy_exec,
     .abort = scsi_xcopy_abort,
     .usage = {0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    {.name = "EXTENDED COPY(LID4)",
     .opcode = 0x83,
     .sa = 0x01,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_OUT,
     .flags = SCSI_OPF_PR_EXEMPT,
     .timeout = T_XCOPY,
     .parse = scsi_xcopy_parse,
     .exec = scsi_xcopy_exec,
     .abort = scsi_xcopy_abort,
     .usage = {0x83, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL}},
    {.name = "POPULATE TOKEN",
     .opcode = 0x83,
     .sa = 0x10,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_OUT,
     .flags = F_READ,
     .timeout = T_SHORT,
     .parse = scsi_odx_parse,
     .exec = scsi_odx_exec,
     .usage = {0x83, 0x10, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL}},
    {.name = "WRITE USING TOKEN",
     .opcode = 0x83,
     .sa = 0x11,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_OUT,
     .flags = F_WRITE,
     .timeout = T_XCOPY,
     .parse = scsi_odx_parse,
     .exec = scsi_odx_exec,
     .abort = scsi_xcopy_abort,
     .usage = {0x83, 0x11, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL}},
    {.name = "COPY OPERATION ABORT",
     .opcode = 0x83,
     .sa = 0x1c,
     .has_sa = true,
     .cdb_len = 16,
     .dir = SCSI_DIR_NONE,
     .flags = SCSI_OPF_PR_EXEMPT,
     .timeout = T_SHORT,
     .parse = scsi_copy_op_abort_parse,
     .usage = {0x83, 0x1c, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, CTL}},
};

#define RCR_OP(sa_, n)                                                                             \
        {                                                                                          \
                .name = n, .opcode = 0x84, .sa = sa_, .has_sa = true, .cdb_len = 16,               \
                .dir = SCSI_DIR_IN, .flags = SCSI_OPF_PR_EXEMPT, .timeout = T_SHORT,               \
                .parse = scsi_rcr_parse,                                                           \
                .usage = {0x84, sa_, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL},   \
        }
/* The RECEIVE commands with a 4-byte LIST IDENTIFIER (SPC-5 6.20, 6.24, 6.26). */
#define RCR4_OP(sa_, n)                                                                            \
        {                                                                                          \
                .name = n, .opcode = 0x84, .sa = sa_, .has_sa = true, .cdb_len = 16,               \
                .dir = SCSI_DIR_IN, .flags = SCSI_OPF_PR_EXEMPT, .timeout = T_SHORT,               \
                .parse = scsi_rcr_parse, .usage = {0x84, sa_, 0xff, 0xff, 0xff, 0xff, 0, 0,        \
                                                   0,    0,   0xff, 0xff, 0xff, 0xff, 0, CTL},     \
        }
static const struct scsi_op rcr_ops[] = {
    RCR_OP(0x00, "RECEIVE COPY RESULTS/COPY STATUS"),
    RCR_OP(0x01, "RECEIVE COPY RESULTS/RECEIVE DATA"),
    RCR_OP(0x03, "RECEIVE COPY RESULTS/OPERATING PARAMETERS"),
    RCR_OP(0x04, "RECEIVE COPY RESULTS/FAILED SEGMENT DETAILS"),
    RCR4_OP(0x05, "RECEIVE COPY STATUS(LID4)"),
    RCR4_OP(0x06, "RECEIVE COPY DATA(LID4)"),
    RCR4_OP(0x07, "RECEIVE ROD TOKEN INFORMATION"),
};

struct sa_table {
        const struct scsi_op *ops;
        unsigned n;
        uint8_t sa_mask; /* where the service action sits in CDB byte 1 */
        bool sa16;       /* variable-length CDB: the service action is bytes 8-9 */
};

#define SA_TABLE(t)                                                                                \
        {                                                                                          \
                t, sizeof(t) / sizeof(t[0]), 0x1f                                                  \
        }
static const struct sa_table sa_tables[256] = {
    [SCSI_OP_SANITIZE] = SA_TABLE(sanitize_ops),
    [SCSI_OP_PR_IN] = SA_TABLE(pr_in_ops),
    [SCSI_OP_PR_OUT] = SA_TABLE(pr_out_ops),
    [SCSI_OP_EXTENDED_COPY] = SA_TABLE(xcopy_ops),
    [SCSI_OP_RECEIVE_COPY_RESULTS] = SA_TABLE(rcr_ops),
    [SCSI_OP_SERVICE_ACTION_IN_16] = SA_TABLE(sai16_ops),
    [SCSI_OP_MAINTENANCE_IN] = SA_TABLE(maint_in_ops),
    [SCSI_OP_SERVICE_ACTION_OUT_16] = SA_TABLE(sao16_ops),
    [SCSI_OP_VARIABLE_LENGTH] = {varlen_ops, sizeof(varlen_ops) / sizeof(varlen_ops[0]), 0, true},
};

bool scsi_op_has_sa(uint8_t opcode)
{
        return sa_tables[opcode].ops != NULL;
}

const struct scsi_op *scsi_op_lookup(uint8_t opcode, uint16_t sa)
{
        const struct sa_table *t = &sa_tables[opcode];
        if (!t->ops)
                return ops[opcode].name ? &ops[opcode] : NULL;
        for (unsigned i = 0; i < t->n; i++)
                if (t->ops[i].sa == sa)
                        return &t->ops[i];
        return NULL;
}

const struct scsi_op *scsi_op_for_lu(const struct scsi_op *op, const struct core_ns *ns)
{
        if (op && (op->flags & SCSI_OPF_LBP) && !(ns && ns->thin))
                return NULL;
        if (op && (op->flags & SCSI_OPF_ATOMIC) && ns && !scsi_lu_has_atomic(ns))
                return NULL;
        if (op && (op->flags & SCSI_OPF_ELEMENTS) && !(ns && core_media_elements(ns)))
                return NULL;
        if (op && (op->flags & SCSI_OPF_CRYPT) && !(ns && ns->crypt))
                return NULL;
        if (op && (op->flags & SCSI_OPF_PI2) && scsi_lu_pi_type(ns) != 2)
                return NULL;
        return op;
}

const struct scsi_op *scsi_op_find(const uint8_t *cdb, bool *sa_unknown)
{
        const struct sa_table *t = &sa_tables[cdb[0]];
        const struct scsi_op *op;
        *sa_unknown = false;
        if (!t->ops)
                return ops[cdb[0]].name ? &ops[cdb[0]] : NULL;
        op =
            scsi_op_lookup(cdb[0], t->sa16 ? slate_be16(cdb + 8) : (uint16_t)(cdb[1] & t->sa_mask));
        if (!op)
                *sa_unknown = true;
        return op;
}

uint8_t scsi_op_control_off(const struct scsi_op *op)
{
        return op->opcode == SCSI_OP_VARIABLE_LENGTH ? 1 : (uint8_t)(op->cdb_len - 1);
}

uint8_t scsi_op_sa_off(uint8_t opcode)
{
        return sa_tables[opcode].sa16 ? 8 : 1;
}

const struct scsi_op *scsi_op_next(const struct scsi_op *prev)
{
        unsigned opc = 0;
        if (prev) {
                const struct sa_table *t = &sa_tables[prev->opcode];
                if (t->ops) {
                        unsigned i = (unsigned)(prev - t->ops) + 1;
                        if (i < t->n)
                                return &t->ops[i];
                }
                opc = prev->opcode + 1u;
        }
        for (; opc < 256; opc++) {
                if (sa_tables[opc].ops)
                        return &sa_tables[opc].ops[0];
                if (ops[opc].name)
                        return &ops[opc];
        }
        return NULL;
}
