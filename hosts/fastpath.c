/* The transport's per-chunk work in C (hosts/fastpath.py builds and loads it; `make install`).
 *
 * Three loops that ran as a dozen numpy calls per GSO batch or GRO read, each one pass here:
 *   mlfc_abs_means   mean |g| per chunk of a float32 tensor (the importance classes' magnitude signal);
 *   mlfc_fill_run    a batch of new consecutive chunks: the varying header fields and the payloads;
 *   mlfc_place_run   a GRO read checked to be a run of new consecutive chunks of one tensor, then placed.
 *
 * Nothing here knows the wire format: where each header field sits comes from mlfc.wire.Layout (Python)
 * as a struct mlfc_field, and the header bytes that must agree within a run as a mask. The Python paths
 * (gso.SegmentBatch.fill, gso.RunParser, importance.chunk_magnitudes) stay the reference, and the tests
 * check both give the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One header field: a `width`-bit value `shift` bits up in the big-endian slot of `bytes` bytes at `offset`. */
struct mlfc_field {
    uint32_t offset, bytes, shift, width;
};

static inline uint64_t get_slot(const uint8_t *p, uint32_t bytes) {
    uint64_t v = 0;
    for (uint32_t i = 0; i < bytes; i++) v = (v << 8) | p[i];
    return v;
}

static inline void put_slot(uint8_t *p, uint32_t bytes, uint64_t v) {
    for (uint32_t i = bytes; i-- > 0;) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t field_mask(const struct mlfc_field *f) {
    return (f->width >= 64 ? ~0ULL : (1ULL << f->width) - 1) << f->shift;
}

static inline uint64_t get_field(const uint8_t *hdr, const struct mlfc_field *f) {
    return (get_slot(hdr + f->offset, f->bytes) & field_mask(f)) >> f->shift;
}

static inline void put_field(uint8_t *hdr, const struct mlfc_field *f, uint64_t v) {
    uint64_t mask = field_mask(f);
    uint64_t slot = get_slot(hdr + f->offset, f->bytes);
    put_slot(hdr + f->offset, f->bytes, (slot & ~mask) | ((v << f->shift) & mask));
}

/* Mean |x| of each of `rows` rows of `per` floats. Eight partial sums per row (the compiler keeps them in
 * one vector register), summed in float as numpy's float32 reduction does; the mean in double. */
void mlfc_abs_means(const float *x, size_t rows, size_t per, double *out) {
    for (size_t r = 0; r < rows; r++) {
        const float *p = x + r * per;
        float acc[8] = {0};
        size_t i = 0;
        for (; i + 8 <= per; i += 8)
            for (int k = 0; k < 8; k++) acc[k] += p[i + k] < 0 ? -p[i + k] : p[i + k];
        float tail = 0;
        for (; i < per; i++) tail += p[i] < 0 ? -p[i] : p[i];
        float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
        out[r] = (double)sum / (double)per;
    }
}

/* New chunks first .. first + count - 1 of a tensor of `n` chunks (`data`: its bytes, `total` of them;
 * `chunk` payload bytes each but the last) into `count` segments of `segment` bytes at `batch`, whose
 * constant header fields are already written. fields[0..3]: chunk_seq, flags, importance, progress.
 * `buckets`: one progress bucket per segment, or NULL for `bucket` throughout. Returns the bytes to send. */
size_t mlfc_fill_run(uint8_t *batch, size_t segment, size_t header_len, const uint8_t *data, size_t total,
                     size_t chunk, size_t n, size_t first, size_t count, const uint8_t *classes,
                     const uint8_t *buckets, uint8_t bucket, const struct mlfc_field *fields, uint8_t last_flag) {
    size_t bytes = 0;
    for (size_t i = 0; i < count; i++) {
        size_t seq = first + i;
        uint8_t *hdr = batch + i * segment;
        size_t off = seq * chunk;
        size_t len = seq == n - 1 ? total - off : chunk;
        put_field(hdr, &fields[0], seq);
        put_field(hdr, &fields[1], seq == n - 1 ? last_flag : 0);
        put_field(hdr, &fields[2], classes[seq]);
        put_field(hdr, &fields[3], buckets ? buckets[i] : bucket);
        memcpy(hdr + header_len, data + off, len);
        bytes = i * segment + header_len + len;
    }
    return bytes;
}

/* A GRO read of `nbytes` at `buf` in segments of `segment` bytes, whose first segment's descriptor the
 * caller matched to a tensor of `n` chunks (`total` bytes, `chunk` each but the last) held at `dst` with
 * one `received` byte per chunk. It is a run when every segment's header agrees with the first's wherever
 * `same` has a 1 bit, their chunk_seq (`seq_field`) count up from the first's, the run ends within the
 * tensor, the last segment has the length of its chunk, and none of its chunks has arrived before. A run
 * is placed (payloads copied, `received` set to 1) and its length returned, with the segments whose class
 * (`importance_field`) is at least `protected_from` in *protected; otherwise nothing is touched and 0 is
 * returned (the caller goes segment by segment). */
size_t mlfc_place_run(const uint8_t *buf, size_t nbytes, size_t segment, size_t header_len, const uint8_t *same,
                      const struct mlfc_field *seq_field, const struct mlfc_field *importance_field,
                      uint32_t protected_from, uint8_t *dst, size_t total, size_t chunk, uint8_t *received,
                      size_t n, size_t *protected) {
    if (segment <= header_len || nbytes <= segment) return 0;
    size_t count = (nbytes + segment - 1) / segment;
    size_t last_len = nbytes - (count - 1) * segment;
    if (last_len < header_len || segment - header_len != chunk) return 0;
    last_len -= header_len;
    uint64_t first = get_field(buf, seq_field);
    if (first >= n || count > n - first) return 0;
    size_t end = first + count;
    if (last_len != (end == n ? total - (end - 1) * chunk : chunk)) return 0;
    if (memchr(received + first, 1, count) != NULL) return 0;
    size_t prot = 0;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *hdr = buf + i * segment;
        if (i) {
            for (size_t b = 0; b < header_len; b++)
                if ((hdr[b] ^ buf[b]) & same[b]) return 0;
            if (get_field(hdr, seq_field) != first + i) return 0;
        }
        prot += get_field(hdr, importance_field) >= protected_from;
    }
    for (size_t i = 0; i + 1 < count; i++) memcpy(dst + (first + i) * chunk, buf + i * segment + header_len, chunk);
    memcpy(dst + (end - 1) * chunk, buf + (count - 1) * segment + header_len, last_len);
    memset(received + first, 1, count);
    *protected = prot;
    return count;
}
