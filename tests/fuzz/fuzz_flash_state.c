/*
 * libFuzzer target for the flash model's saved state (core/flash.c,
 * <state_dir>/<name>.flash, read when a flash-model namespace opens): a
 * damaged or hostile file must be refused or taken whole, never crash, and
 * a state that is taken must be safe to go on with.
 *
 * The harness keeps one small file-backed flash-model namespace and a
 * valid saved state of it (a few writes, two placement ids, GC done).
 * Each input overwrites part of that state: bytes 0-3 give the offset
 * (modulo the state's size), byte 4 bit 0 asks for the checksum to be
 * fixed up afterwards (so the consistency checks behind it are reached),
 * the rest is written at the offset.  The result is loaded; if it is
 * taken, writes, a deallocation and the statistics run on it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/flash.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/crc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct core_ns *ns;
static uint8_t *tmpl;
static size_t tmpl_len;

static void io(enum core_op op, uint64_t lba, uint32_t nlb, uint16_t placement)
{
        struct core_req r;
        memset(&r, 0, sizeof(r));
        r.ns = ns;
        r.op = op;
        r.lba = lba;
        r.nlb = nlb;
        r.placement = placement;
        r.status = CORE_OK;
        core_flash_account(&r);
}

static int setup(void)
{
        static char dir[] = "/tmp/slate-fuzz-flash-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        struct core_ns_params p = {
            .name = "fz",
            .backend = "file",
            .size_bytes = 4u << 20,
            .block_size = 4096,
            .flash = {.enable = true, .erase_block = 64u << 10, .op_percent = 25, .op_set = true},
        };
        char err[256];
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                return -1;
        uint16_t a, b;
        if (core_placement_get(ns, CORE_PL_FDP_RUH, 1, &a) ||
            core_placement_get(ns, CORE_PL_SCSI_STREAM, 7, &b))
                return -1;
        for (unsigned i = 0; i < 4000; i++)
                io(CORE_OP_WRITE, (i * 7919u) % 1024, 1 + i % 3, i % 3 ? (i % 3 == 1 ? a : b) : 0);
        io(CORE_OP_DEALLOCATE, 100, 50, 0);
        if (core_flash_save(ns))
                return -1;
        char path[300];
        snprintf(path, sizeof(path), "%s/fz.flash", dir);
        FILE *f = fopen(path, "rb");
        if (!f)
                return -1;
        fseek(f, 0, SEEK_END);
        tmpl_len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        tmpl = malloc(tmpl_len);
        if (!tmpl || fread(tmpl, 1, tmpl_len, f) != tmpl_len)
                return -1;
        fclose(f);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!ns && setup())
                abort();
        if (size < 5)
                return 0;
        uint32_t off;
        memcpy(&off, data, 4);
        bool fix = data[4] & 1;
        data += 5;
        size -= 5;
        uint8_t *buf = malloc(tmpl_len);
        if (!buf)
                return 0;
        memcpy(buf, tmpl, tmpl_len);
        off %= (uint32_t)tmpl_len;
        size_t n = size < tmpl_len - off ? size : tmpl_len - off;
        memcpy(buf + off, data, n);
        if (fix) {
                uint32_t c = rt_crc32c(buf, tmpl_len - 4);
                memcpy(buf + tmpl_len - 4, &c, 4);
        }
        /* Some inputs cut the file short. */
        size_t len = size && data[0] == 0xEE ? off : tmpl_len;
        if (core_flash_load_state(ns, buf, len) == 0) {
                for (unsigned i = 0; i < 600; i++)
                        io(CORE_OP_WRITE, (i * 104729u) % 1024, 1, (uint16_t)(i % 4));
                io(CORE_OP_DEALLOCATE, 0, 1024, 0);
                struct core_flash_stats st;
                core_flash_stats(ns, CORE_FLASH_ALL, &st);
                if (st.valid_bytes != 0) /* everything was deallocated */
                        abort();
        }
        free(buf);
        return 0;
}
