/*
 * libFuzzer target for the encryption record kept with shared storage
 * (core/ns.c crypt_with_data, be_meta_changed): on rbd the wrapped data key
 * is image metadata ("slate.crypt") that other gateways write, and a
 * cryptographic erase through one of them hands its new record to this
 * one in a notify.  A damaged or hostile record must be refused whole or
 * taken whole (only when it unwraps under our KEK), never crash, and the
 * namespace must go on encrypting and decrypting consistently.
 *
 * The harness keeps one encrypted mem namespace whose backend is made to
 * keep records through two stubs: meta_load returns the input, meta_store
 * keeps what the core stores.  Each input is delivered as a notify
 * (be->meta_changed with the value) and as a lost notice (key NULL: the
 * core reads the record with meta_load); then a block round-trips through
 * the namespace's key, and a cryptographic erase stores a record that must
 * be taken again.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crypt.h"
#include "core/ns.h"
#include "rt/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct core_ns *ns;
static struct backend_ops ops; /* the mem backend's, with the two stubs */
static char *record;           /* what meta_load returns */

static int stub_load(struct backend *be, const char *key, char **val)
{
        (void)be;
        if (strcmp(key, "crypt") || !record)
                return -ENOENT;
        *val = strdup(record);
        return *val ? 0 : -ENOMEM;
}

static int stub_store(struct backend *be, const char *key, const char *val)
{
        (void)be;
        if (strcmp(key, "crypt"))
                return -EINVAL;
        char *t = strdup(val);
        if (!t)
                return -ENOMEM;
        free(record);
        record = t;
        return 0;
}

static int setup(void)
{
        rt_log_threshold = RT_LOG_OFF;
        static char dir[] = "/tmp/slate-fuzz-crypt-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        char key[300];
        snprintf(key, sizeof(key), "%s/k", dir);
        FILE *f = fopen(key, "w");
        if (!f)
                return -1;
        fputs("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", f);
        fclose(f);
        chmod(key, 0600);
        struct core_ns_params p = {.name = "fzcr",
                                   .backend = "mem",
                                   .size_bytes = 1u << 20,
                                   .block_size = 512,
                                   .encrypt = true,
                                   .key_file = key};
        char err[256];
        if (core_ns_create(&p, &ns, err, sizeof(err)) || !ns->crypt)
                return -1;
        ops = *ns->be.ops;
        ops.meta_load = stub_load;
        ops.meta_store = stub_store;
        ns->be.ops = &ops;
        return 0;
}

/* A block encrypted and decrypted with the namespace's current key comes back. */
static void round_trip(void)
{
        uint8_t b[512], p[512];
        memset(p, 0x6b, sizeof(p));
        memcpy(b, p, sizeof(b));
        if (core_crypt_buf(ns->crypt, true, 7, 512, b, sizeof(b)) || !memcmp(b, p, sizeof(b)) ||
            core_crypt_buf(ns->crypt, false, 7, 512, b, sizeof(b)) || memcmp(b, p, sizeof(b)))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!ns && setup())
                abort();
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        uint64_t gen = core_crypt_erasures(ns->crypt);

        ns->be.meta_changed(&ns->be, "crypt", text); /* a notify */
        round_trip();
        free(record);
        record = strdup(text);
        ns->be.meta_changed(&ns->be, NULL, NULL); /* a lost notice: read again */
        round_trip();
        if (core_crypt_erasures(ns->crypt) < gen)
                abort(); /* never back to an older key */

        /* An erase stores a record this gateway (and any other) takes again. */
        if (core_ns_crypt_erase(ns))
                abort();
        round_trip();
        json_t *j = record ? json_loads(record, 0, NULL) : NULL;
        if (!j || core_crypt_adopt(ns->crypt, j, false) != 1)
                abort(); /* ours: nothing newer to take */
        json_decref(j);
        free(text);
        return 0;
}
