/* slatectl's parts: the RPC client (slatectl.c), tables (slatectl_table.c), top and progress
 * (slatectl_view.c). */
#ifndef SLATECTL_H
#define SLATECTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* One JSON-RPC request on a new connection; the response (new reference) or NULL (message unless
 * quiet). */
json_t *slatectl_rpc(const char *sock, json_t *req, bool quiet);
/* Call method with params (stolen, NULL = none); the result (new reference) or NULL with a message.
 */
json_t *slatectl_call(const char *sock, const char *method, json_t *params);

/* Print a method's result as a table for people; -1 if the method has no table (print JSON). */
int slatectl_table(const char *method, json_t *result);
/* "1.5 GiB", "512 B" */
void slatectl_bytes(char *buf, size_t len, uint64_t v);

int slatectl_top(const char *sock, int argc, char **argv);
int slatectl_progress(const char *sock, int argc, char **argv);

#endif
