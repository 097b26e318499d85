/*
 * The block core's protocol-neutral status.  Requests finish with one of
 * these; scsi/sense.c maps each to sense key/ASC/ASCQ and
 * nvme/status.c maps each to an NVMe status code type/code.  Add a value
 * here and a row in both tables, never a protocol code in the core.
 */
#ifndef CORE_STATUS_H
#define CORE_STATUS_H

enum core_status {
        CORE_OK = 0,
        CORE_E_LBA_RANGE,         /* LBA + length beyond capacity */
        CORE_E_INVALID_FIELD,     /* a field of the command is invalid (see err_offset) */
        CORE_E_INVALID_PARAM,     /* a field of the parameter data is invalid */
        CORE_E_PARAM_LIST_LENGTH, /* parameter list length error */
        CORE_E_INVALID_OPCODE,    /* unsupported command */
        CORE_E_MISCOMPARE,        /* compare/verify found different data (info = offset) */
        CORE_E_WRITE_PROTECT,     /* namespace is write protected */
        CORE_E_MEDIUM_ERROR,      /* backend read failed */
        CORE_E_WRITE_ERROR,       /* backend write failed */
        CORE_E_RESERVATION_CONFLICT,
        CORE_E_NOT_READY,              /* namespace stopped / no medium */
        CORE_E_NO_RESOURCES,           /* transient; host may retry */
        CORE_E_ABORTED,                /* aborted by task management or teardown */
        CORE_E_INTERNAL,               /* target software failure */
        CORE_E_TRANSFER_TOO_LONG,      /* longer than the advertised maximum transfer */
        CORE_E_SAVE_NOT_SUPPORTED,     /* saving parameters not supported */
        CORE_E_PR_INSUFFICIENT_REG,    /* insufficient registration resources */
        CORE_E_WRITE_PROTECT_SOFTWARE, /* write protected by a host (SCSI SWP, NVMe 84h) */
        CORE_E_NO_MEDIUM,              /* removable medium ejected */
        CORE_E_SANITIZE_IN_PROGRESS,   /* a sanitize operation runs (progress in core_ns) */
        CORE_E_SANITIZE_FAILED,        /* sanitize failure mode */
        CORE_E_SPACE_ALLOC_FAILED,     /* the write needs space beyond the provisioning limit */
        CORE_E_COPY_LIMIT,             /* a copy beyond CORE_COPY_MAX_* (core/copy.h) */
        CORE_E_COPY_INCOMPATIBLE,      /* copy between namespaces of different formats */
        CORE_E_UNRECOVERED_READ,       /* an unrecoverable block was read (info = its LBA) */
        CORE_E_DEPOP_IN_PROGRESS,      /* an element depopulation runs (core/media.h) */
        CORE_E_PI_GUARD,               /* protection information guard check failed (core/pi.h) */
        CORE_E_PI_APPTAG,              /* application tag check failed (info = the block's LBA) */
        CORE_E_PI_REFTAG,              /* reference tag check failed (info = the block's LBA) */
        /* Asymmetric access (core/ana.h): this gateway's group of the namespace is ... */
        CORE_E_ANA_INACCESSIBLE,    /* ... inaccessible (SCSI unavailable) */
        CORE_E_ANA_STANDBY,         /* ... standby (SCSI only; NVMe: inaccessible) */
        CORE_E_ANA_PERSISTENT_LOSS, /* ... in persistent loss (SCSI offline) */
        CORE_E_ANA_TRANSITION,      /* ... changing state (transitioning) */
        CORE_STATUS_MAX
};

const char *core_status_name(enum core_status s);

#endif
