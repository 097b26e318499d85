/*
 * DH-HMAC-CHAP (NVMe Base 2.0 8.13.5; TP 8006), the controller side: private
 * to src/nvme/ (the fabrics dispatcher, Connect and the subsystem code).
 * The pure computations are exported for the unit test.
 */
#ifndef NVME_AUTH_H
#define NVME_AUTH_H

#ifndef SLATE_MODULE_NVME
#error "nvme/auth.h is private to src/nvme/"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/keyfmt.h"
#include "nvme/nvme.h"

struct nvme_cmd;
struct nvme_queue;
struct nvme_ctrl;
struct nvme_subsys;

/* Message types and ids (Base 2.0 fig. 641..652). */
#define NVME_AUTH_SECP          0xe9
#define NVME_AUTH_TYPE_COMMON   0x00
#define NVME_AUTH_TYPE_DHCHAP   0x01
#define NVME_AUTH_MSG_NEGOTIATE 0x00
#define NVME_AUTH_MSG_CHALLENGE 0x01
#define NVME_AUTH_MSG_REPLY     0x02
#define NVME_AUTH_MSG_SUCCESS1  0x03
#define NVME_AUTH_MSG_SUCCESS2  0x04
#define NVME_AUTH_MSG_FAILURE2  0xf0
#define NVME_AUTH_MSG_FAILURE1  0xf1
#define NVME_AUTH_ID_DHCHAP     0x01
#define NVME_AUTH_MSG_MAX       8192 /* the longest Send/Receive transfer we take */
#define NVME_AUTH_DH_MAX        1024 /* ffdhe8192 public value */
#define NVME_AUTH_HASH_MAX      64
/* Failure reason code explanations (Base 2.0 fig. 652). */
#define NVME_AUTH_FAIL_FAILED     0x01
#define NVME_AUTH_FAIL_NOT_USABLE 0x02
#define NVME_AUTH_FAIL_CONCAT     0x03
#define NVME_AUTH_FAIL_HASH       0x04
#define NVME_AUTH_FAIL_DHGROUP    0x05
#define NVME_AUTH_FAIL_PAYLOAD    0x06
#define NVME_AUTH_FAIL_PROTOCOL   0x07

#define NVMF_CONNECT_ATR (1u << 17) /* Connect response DW0: AUTHREQ.ATR */

/* A host's secrets in a subsystem (under nvme_lock). */
struct nvme_host_key {
        char hostnqn[224];
        char *secret, *ctrl_secret; /* the interchange strings (config_save), ctrl may be NULL */
};

/* Hash id -> digest length (0: unknown). */
size_t nvme_auth_hash_len(int hash);
/* Hash / DH group names <-> ids ("sha256"..., "null", "ffdhe2048"...); -1 unknown. */
int nvme_auth_hash_id(const char *name);
int nvme_auth_dhgroup_id(const char *name);
const char *nvme_auth_hash_name(int id);
const char *nvme_auth_dhgroup_name(int id);

/* HMAC(key, nqn || "NVMe-over-Fabrics") with the key's own hash (none: the key). */
int nvme_auth_transform(const uint8_t *key, size_t klen, int khash, const char *nqn, uint8_t *out,
                        size_t *outlen);
/*
 * The DH-HMAC-CHAP response: HMAC_hash(tkey, Ca || le32(seq) || le16(tid) ||
 * scc || "HostHost" (or "Controller") || nqn1 || 0 || nqn2), where Ca is the
 * challenge, or HMAC_hash(H(dh), challenge) with a DH secret.  host: the
 * host's response (nqn1 host, nqn2 subsystem), else the controller's.
 */
int nvme_auth_response(int hash, const uint8_t *tkey, size_t tklen, const uint8_t *chal,
                       const uint8_t *dh, size_t dhlen, uint32_t seq, uint16_t tid, uint8_t scc,
                       bool host, const char *hostnqn, const char *subnqn, uint8_t *out);
/* DH: a fresh key pair for group (its public value, padded to the prime, in pub). */
void *nvme_auth_dh_keygen(int group, uint8_t *pub, size_t *publen);
/* The shared secret with the peer's public value (padded to the prime); 0 or -1. */
int nvme_auth_dh_derive(void *key, int group, const uint8_t *peer, size_t peerlen, uint8_t *out,
                        size_t *outlen);
void nvme_auth_dh_free(void *key);

/* Connect succeeded on q: set up authentication if the host has a secret; true = ATR. */
int nvme_auth_queue_init(struct nvme_queue *q, struct nvme_ctrl *ctrl, bool *atr);
void nvme_auth_queue_free(struct nvme_queue *q);
/* May q run commands other than Connect/Authentication/Disconnect? */
bool nvme_auth_queue_ok(const struct nvme_queue *q);

enum nvme_parse_result nvmf_auth_send_parse(struct nvme_cmd *cmd);
void nvmf_auth_send_exec(struct nvme_cmd *cmd);
/* The synchronous body of Authentication Send (message in buf).  For tests and the fuzzer. */
void nvmf_auth_send_do(struct nvme_cmd *cmd);
enum nvme_parse_result nvmf_auth_recv_parse(struct nvme_cmd *cmd);

/* Subsystem teardown: free its host keys (nvme_lock held). */
void nvme_auth_subsys_free_locked(struct nvme_subsys *s);
void nvme_auth_host_removed_locked(struct nvme_subsys *s, const char *hostnqn);

#endif
