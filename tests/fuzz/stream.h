/*
 * The fuzzers' test seam for the two TCP transports: the input is the byte
 * stream a host sends on one end of a socketpair whose other end the
 * transport serves as an ordinary connection, so the transports' data path
 * has no fuzzing branch.  What the target sends back is read and dropped.
 */
#ifndef FUZZ_STREAM_H
#define FUZZ_STREAM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Make a socketpair, give one end to attach (which takes it over: 0, or
 * -errno and the fd is still ours), write data on the other end, shut it
 * for writing (end of input is end of connection), and read and drop the
 * answer until the target closes or timeout_ms pass.  Then wait (bounded)
 * until live() is back to its count before the connection, so no state
 * leaks into the next input.  Returns 0 or -errno.
 */
int fuzz_stream_feed(const uint8_t *data, size_t len, int (*attach)(int fd), unsigned (*live)(void),
                     int timeout_ms);

#endif
