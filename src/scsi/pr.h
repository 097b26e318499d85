/*
 * Persistent reservations, SCSI side (scsi/pr.c): entry points beyond the
 * command handlers declared in scsi/internal.h, for the nexus lifetime and
 * task management code and for the transport.
 */
#ifndef SCSI_PR_H
#define SCSI_PR_H

#include "scsi/scsi.h"

/*
 * I_T nexus loss (session end): releases a RESERVE(6) the nexus holds on
 * any LU of its target.  Persistent registrations survive (SPC-5 5.14.4).
 * Takes ns->lock only; may be called with or without target->lock held.
 */
void scsi_pr_nexus_lost(struct scsi_nexus *nx);

/* LU reset / target reset: releases the LU's RESERVE(6) (SPC-2 5.5.1). Takes ns->lock. */
void scsi_pr_reset(struct core_ns *ns);

/* Build the iSCSI TransportID (SPC-5 7.6.4.6) of nexus into out; returns its length (0: no room).
 */
uint16_t scsi_pr_transport_id(const struct core_pr_nexus *nexus, uint8_t *out, uint32_t cap);

#endif
