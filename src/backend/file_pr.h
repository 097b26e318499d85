/*
 * Reservation state shared by several gateways exporting one data file
 * (file backend, namespace option shared_reservations; see file_pr.c).
 */
#ifndef BACKEND_FILE_PR_H
#define BACKEND_FILE_PR_H

#include <stdint.h>

struct backend;
struct file_pr;

/*
 * Start sharing the reservation state kept next to data_path: the sidecar
 * files, this process's acknowledgement file and the watcher thread that
 * calls be->pr_changed (may be NULL: the watcher reloads and acknowledges
 * by itself).  0 or -errno.
 */
int file_pr_open(struct file_pr **out, const char *data_path, struct backend *be);
void file_pr_close(struct file_pr *p);
/* backend_ops.pr_load / pr_store (backend.h), blocking. */
int file_pr_load(struct file_pr *p, char **text, uint64_t *version);
int file_pr_store(struct file_pr *p, const char *text, uint64_t *version);
/* How long a store waits for the other gateways' acknowledgements (ms). */
#define FILE_PR_ACK_TIMEOUT_MS 3000

#endif
