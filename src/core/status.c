/* Names of the core's protocol-neutral status values, for logs and RPCs. */
#include "core/status.h"

static const char *const names[CORE_STATUS_MAX] = {
    [CORE_OK] = "ok",
    [CORE_E_LBA_RANGE] = "lba-out-of-range",
    [CORE_E_INVALID_FIELD] = "invalid-field",
    [CORE_E_INVALID_PARAM] = "invalid-parameter",
    [CORE_E_PARAM_LIST_LENGTH] = "parameter-list-length",
    [CORE_E_INVALID_OPCODE] = "invalid-opcode",
    [CORE_E_MISCOMPARE] = "miscompare",
    [CORE_E_WRITE_PROTECT] = "write-protected",
    [CORE_E_MEDIUM_ERROR] = "medium-error",
    [CORE_E_WRITE_ERROR] = "write-error",
    [CORE_E_RESERVATION_CONFLICT] = "reservation-conflict",
    [CORE_E_NOT_READY] = "not-ready",
    [CORE_E_NO_RESOURCES] = "no-resources",
    [CORE_E_ABORTED] = "aborted",
    [CORE_E_INTERNAL] = "internal-error",
    [CORE_E_TRANSFER_TOO_LONG] = "transfer-too-long",
    [CORE_E_SAVE_NOT_SUPPORTED] = "save-not-supported",
    [CORE_E_PR_INSUFFICIENT_REG] = "insufficient-registration-resources",
    [CORE_E_WRITE_PROTECT_SOFTWARE] = "write-protected-by-host",
    [CORE_E_NO_MEDIUM] = "medium-not-present",
    [CORE_E_SANITIZE_IN_PROGRESS] = "sanitize-in-progress",
    [CORE_E_SANITIZE_FAILED] = "sanitize-failed",
    [CORE_E_SPACE_ALLOC_FAILED] = "space-allocation-failed",
    [CORE_E_COPY_LIMIT] = "copy-limit-exceeded",
    [CORE_E_COPY_INCOMPATIBLE] = "copy-incompatible-format",
    [CORE_E_UNRECOVERED_READ] = "unrecovered-read-error",
    [CORE_E_DEPOP_IN_PROGRESS] = "depopulation-in-progress",
    [CORE_E_PI_GUARD] = "pi-guard-check-failed",
    [CORE_E_PI_APPTAG] = "pi-application-tag-check-failed",
    [CORE_E_PI_REFTAG] = "pi-reference-tag-check-failed",
    [CORE_E_ANA_INACCESSIBLE] = "asymmetric-access-inaccessible",
    [CORE_E_ANA_STANDBY] = "asymmetric-access-standby",
    [CORE_E_ANA_PERSISTENT_LOSS] = "asymmetric-access-persistent-loss",
    [CORE_E_ANA_TRANSITION] = "asymmetric-access-transition",
};

const char *core_status_name(enum core_status s)
{
        if ((unsigned)s < CORE_STATUS_MAX && names[s])
                return names[s];
        return "unknown";
}
