/*
 * The metadata store of a namespace formatted with metadata (issue 10):
 * each block's metadata bytes (core_ns_md_per_block) beside its data, in a
 * second backend instance of the namespace's own type: mem for mem, a file
 * <state_dir>/<name>.pi through the file backend (io_uring) for file,
 * nothing for null (reads leave the caller's buffer, which the data path
 * fills with the escape first).  Block lba's metadata lives at byte
 * lba * md_per_block.
 *
 * Bytes are stored inverted (the data path inverts them both ways): a hole,
 * an unwritten page, a punched range read as zeroes, which are FFh to the
 * data path -- the PI escape (apptag FFFFh, and for type 3 the reference
 * space all ones), so a new, unwritten, deallocated or reset block fails no
 * check.  Resetting a range is the backend's WRITE_ZEROES.
 */
#ifndef CORE_PISTORE_H
#define CORE_PISTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

struct core_ns;

struct core_pistore {
        struct backend be;
        uint32_t md_per_block;
        bool persistent; /* file: survives restarts */
        char path[4096]; /* file: the store's file */
};

/*
 * Open (creating it when missing) the store of ns for md_per_block bytes
 * per block, sized for the namespace's blocks.  reset: start with every
 * block's metadata the escape (a format).  0 or -errno with err.
 */
int core_pistore_open(struct core_ns *ns, uint32_t md_per_block, bool reset,
                      struct core_pistore **out, char *err, size_t errlen);
void core_pistore_close(struct core_pistore *s);
/* Follow a capacity change (control path; as backend_ops.resize). */
int core_pistore_resize(struct core_pistore *s, uint64_t num_blocks);
/*
 * One store I/O for req (READ, WRITE, FLUSH, WRITE_ZEROES) of blocks
 * [lba, lba + nlb); completes through core_backend_done(req) like a data
 * I/O.  iov holds nlb * md_per_block bytes (stored form: inverted).
 */
void core_pistore_submit(struct core_pistore *s, struct core_req *req, enum core_op op,
                         uint64_t lba, uint64_t nlb, const struct iovec *iov, int iovcnt, bool fua);
/*
 * The same READ or WRITE done now, when the store's backend can (mem:
 * backend_ops.rw_now), with no completion: true, done; false, use
 * core_pistore_submit.
 */
bool core_pistore_rw_now(struct core_pistore *s, enum core_op op, uint64_t lba, uint64_t nlb,
                         void *buf);

#endif
