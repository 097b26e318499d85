/*
 * libFuzzer target for live reconfiguration (src/mgmt/reload.c): arbitrary
 * bytes as the config file of a dry-run config_reload against a running
 * state with namespaces, an iSCSI target with LUN maps and an NVMe
 * subsystem.  The file goes through jansson, the shape and parameter
 * checks, the model interpreter and the diff; every input must end in a
 * plan or an error naming the problem, never a crash, leak or hang.  A dry
 * run applies nothing, so runs stay independent.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "iscsi/iscsi.h"
#include "mgmt/mgmt.h"
#include "rt/log.h"
#include "rt/reactor.h"

static char state_dir[] = "/tmp/slate-fuzz-reload-XXXXXX";
static char cfg[sizeof(state_dir) + 16];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(const char *method, const char *params)
{
        json_error_t je;
        json_t *p = json_loads(params, 0, &je), *res = NULL;
        int code;
        char err[256];
        if (!p || mgmt_rpc_call(method, p, &res, &code, err, sizeof(err)) < 0) {
                fprintf(stderr, "fuzz_reload setup: %s: %s\n", method, p ? err : je.text);
                abort();
        }
        json_decref(res);
        json_decref(p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        rt_log_threshold = RT_LOG_ERR;
        if (!mkdtemp(state_dir))
                abort();
        snprintf(cfg, sizeof(cfg), "%s/c.json", state_dir);
        core_set_state_dir(state_dir);
        if (rt_init(1) < 0 || rt_start() < 0 || iscsi_init() < 0)
                abort();
        must("namespace_create", "{\"name\": \"a0\", \"backend\": \"mem\", \"size\": \"64K\"}");
        must("namespace_create", "{\"name\": \"b0\", \"backend\": \"mem\", \"size\": \"64K\"}");
        must("iscsi_target_create", "{\"name\": \"iqn.2026-12.io.slate:f\"}");
        must("iscsi_lun_map",
             "{\"target\": \"iqn.2026-12.io.slate:f\", \"lun\": 0, \"namespace\": \"a0\"}");
        must("nvmf_subsystem_create", "{\"nqn\": \"nqn.2026-12.io.slate:f\"}");
        must("nvmf_ns_attach", "{\"nqn\": \"nqn.2026-12.io.slate:f\", \"namespace\": \"b0\"}");
        must("pool_set", "{\"dir\": \"/tmp\", \"limit\": \"1G\"}");
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        FILE *f = fopen(cfg, "w");
        if (!f)
                abort();
        if (size && fwrite(data, 1, size, f) != size)
                abort();
        fclose(f);
        json_t *res = NULL;
        char err[1024];
        int rc = mgmt_config_reload(cfg, true, &res, err, sizeof(err));
        if (rc == 0 && !json_is_array(json_object_get(res, "steps")))
                abort(); /* success always has its plan */
        if (rc < 0 && !err[0])
                abort(); /* failure always says why */
        json_decref(res);
        return 0;
}
