/*
 * Wire integer types.  Every multi-byte field of an on-wire structure is one
 * of these wrapper types, so it can only be read or written through the
 * get_/put_ helpers below and a forgotten byte swap does not compile.  The
 * types are byte arrays, so structures built from them have no padding and
 * alignment 1, matching the wire exactly.
 */
#ifndef SLATE_BYTEORDER_H
#define SLATE_BYTEORDER_H

#include <stdint.h>

typedef struct {
        uint8_t b[2];
} be16;
typedef struct {
        uint8_t b[3];
} be24;
typedef struct {
        uint8_t b[4];
} be32;
typedef struct {
        uint8_t b[6];
} be48;
typedef struct {
        uint8_t b[8];
} be64;
typedef struct {
        uint8_t b[2];
} le16;
typedef struct {
        uint8_t b[4];
} le32;
typedef struct {
        uint8_t b[8];
} le64;

static inline uint64_t slate_get_be(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v = (v << 8) | p[i];
        return v;
}

static inline void slate_put_be(uint8_t *p, unsigned n, uint64_t v)
{
        for (unsigned i = n; i-- > 0;) {
                p[i] = (uint8_t)v;
                v >>= 8;
        }
}

static inline uint64_t slate_get_le(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = n; i-- > 0;)
                v = (v << 8) | p[i];
        return v;
}

static inline void slate_put_le(uint8_t *p, unsigned n, uint64_t v)
{
        for (unsigned i = 0; i < n; i++) {
                p[i] = (uint8_t)v;
                v >>= 8;
        }
}

static inline uint16_t get_be16(const be16 *x)
{
        return (uint16_t)slate_get_be(x->b, 2);
}
static inline uint32_t get_be24(const be24 *x)
{
        return (uint32_t)slate_get_be(x->b, 3);
}
static inline uint32_t get_be32(const be32 *x)
{
        return (uint32_t)slate_get_be(x->b, 4);
}
static inline uint64_t get_be48(const be48 *x)
{
        return slate_get_be(x->b, 6);
}
static inline uint64_t get_be64(const be64 *x)
{
        return slate_get_be(x->b, 8);
}
static inline uint16_t get_le16(const le16 *x)
{
        return (uint16_t)slate_get_le(x->b, 2);
}
static inline uint32_t get_le32(const le32 *x)
{
        return (uint32_t)slate_get_le(x->b, 4);
}
static inline uint64_t get_le64(const le64 *x)
{
        return slate_get_le(x->b, 8);
}

static inline void put_be16(be16 *x, uint16_t v)
{
        slate_put_be(x->b, 2, v);
}
static inline void put_be24(be24 *x, uint32_t v)
{
        slate_put_be(x->b, 3, v);
}
static inline void put_be32(be32 *x, uint32_t v)
{
        slate_put_be(x->b, 4, v);
}
static inline void put_be48(be48 *x, uint64_t v)
{
        slate_put_be(x->b, 6, v);
}
static inline void put_be64(be64 *x, uint64_t v)
{
        slate_put_be(x->b, 8, v);
}
static inline void put_le16(le16 *x, uint16_t v)
{
        slate_put_le(x->b, 2, v);
}
static inline void put_le32(le32 *x, uint32_t v)
{
        slate_put_le(x->b, 4, v);
}
static inline void put_le64(le64 *x, uint64_t v)
{
        slate_put_le(x->b, 8, v);
}

/* Raw-buffer accessors for parsers that index into a CDB or page by offset. */
static inline uint16_t slate_be16(const uint8_t *p)
{
        return (uint16_t)slate_get_be(p, 2);
}
static inline uint32_t slate_be24(const uint8_t *p)
{
        return (uint32_t)slate_get_be(p, 3);
}
static inline uint32_t slate_be32(const uint8_t *p)
{
        return (uint32_t)slate_get_be(p, 4);
}
static inline uint64_t slate_be64(const uint8_t *p)
{
        return slate_get_be(p, 8);
}

#endif
