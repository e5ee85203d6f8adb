// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Phantom-queue ECN marker: a tc program (clsact egress) that marks ECT packets CE from a
 * virtual queue mirroring the queue of a shaper of known rate on the same device (htb rate R over
 * a bfifo of `limit` bytes in the kernel lab, which has no red/fq_codel/netem).
 *
 * Per packet of wire length len (skb->len, plus the headers GSO will repeat in each segment, as
 * the qdiscs count it), at time now:
 *
 *     vq = max(0, vq - R * (now - last))      the shaper drained the queue at R meanwhile
 *     mark if ECT and vq > K                  (step; DCTCP: the queue the packet joins is above K)
 *     vq += len   unless vq + len > limit     (the real queue would drop it: not counted, not marked)
 *
 * RED mode: kmin, kmax, pmax as mlfc/policy/ecn.py (no mark at or below kmin, probability rising
 * linearly to pmax at kmax, always above kmax); the step is kmin = kmax = K. The queue is kept in
 * nanobits (bytes * 8e9), so the drain dt_ns * rate_bps is exact integer arithmetic.
 *
 * One object instance per device: the config and state maps have one entry. The state holds a
 * bpf_spin_lock so packets on several CPUs keep vq exact, and the counters beside it. Per source
 * address (IPv4 as ::ffff:a.b.c.d), packets and marks in an LRU hash. The layouts are mirrored in
 * mlfc/hosts/kernel/marker.py; MARKER_VERSION changes with them.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MARKER_VERSION 1
#define MARKER_MAX_SOURCES 1024
#define TC_ACT_OK 0
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define INET_ECN_MASK 3
#define INET_ECN_CE 3
#define NANOBITS_PER_BYTE 8000000000ULL /* vq unit: 1 byte = 8 bits * 1e9 */

struct marker_config {
	__u32 version;     /* MARKER_VERSION of the loader that wrote it; 0: not set, packets pass untouched */
	__u32 mode;        /* 0 step, 1 red (informational: the thresholds below decide) */
	__u64 rate_bps;    /* the shaper's rate R */
	__u64 limit_bytes; /* the real queue's byte limit (bfifo limit) */
	__u64 kmin_bytes;  /* step: K */
	__u64 kmax_bytes;  /* step: K */
	__u64 pmax_fp;     /* mark probability at kmax, x 2^32 (step: 2^32) */
	__u32 own_clsact;  /* for the loader: the attach created the clsact qdisc (detach deletes it) */
	__u32 pad;
};

struct marker_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 vq;             /* nanobits, after the last packet */
	__u64 last_ns;        /* bpf_ktime_get_ns of the last drain */
	__u64 packets;        /* every packet seen */
	__u64 bytes;          /* their wire bytes */
	__u64 ect;            /* ECT(0)/ECT(1) IP packets: markable */
	__u64 marked;         /* set to CE here */
	__u64 ce;             /* arrived already CE */
	__u64 overflow;       /* packets the real queue would have dropped (vq + len > limit) */
	__u64 overflow_bytes;
	__u64 max_vq_bytes;   /* largest vq after a packet joined */
};

struct marker_source_key {
	__u8 addr[16]; /* IPv6, or IPv4-mapped ::ffff:a.b.c.d */
};

struct marker_source {
	__u64 packets; /* IP packets from this source */
	__u64 marks;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct marker_config);
} ecn_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct marker_state);
} ecn_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MARKER_MAX_SOURCES);
	__type(key, struct marker_source_key);
	__type(value, struct marker_source);
} ecn_sources SEC(".maps");

/* Header bytes GSO repeats in every segment but the first, as qdisc_pkt_len_init counts them
 * (TCP and UDP over IPv4/IPv6 without extension headers; 0 otherwise). */
static __always_inline __u64 gso_extra(struct __sk_buff *skb, __u32 l4off, __u8 l4proto)
{
	__u32 segs = skb->gso_segs;
	__u8 doff;

	if (segs <= 1)
		return 0;
	if (l4proto == IPPROTO_UDP_)
		return (__u64)(segs - 1) * (l4off + 8);
	if (l4proto != IPPROTO_TCP_ || bpf_skb_load_bytes(skb, l4off + 12, &doff, 1))
		return 0;
	return (__u64)(segs - 1) * (l4off + ((doff >> 4) << 2));
}

SEC("tc")
int ecn_marker(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct marker_config *cfg = bpf_map_lookup_elem(&ecn_config, &zero);
	struct marker_state *st = bpf_map_lookup_elem(&ecn_state, &zero);
	struct marker_source_key src = {};
	__u64 now, len, len_nb, limit_nb, kmin_nb, kmax_nb, vq, dt;
	__u32 rnd;
	__u8 hdr[2], ecn = 0, l4proto = 0;
	int family = 0, mark = 0, overflow = 0;

	if (!cfg || !st || cfg->version != MARKER_VERSION || !cfg->rate_bps)
		return TC_ACT_OK;

	len = skb->len;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 ihl;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, hdr, 2) == 0 && (hdr[0] >> 4) == 4) {
			family = 4;
			ecn = hdr[1] & INET_ECN_MASK;
			ihl = (hdr[0] & 0xf) << 2;
			src.addr[10] = 0xff;
			src.addr[11] = 0xff;
			if (bpf_skb_load_bytes(skb, ETH_HLEN + 12, &src.addr[12], 4) ||
			    bpf_skb_load_bytes(skb, ETH_HLEN + 9, &l4proto, 1))
				family = 0;
			else
				len += gso_extra(skb, ETH_HLEN + ihl, l4proto);
		}
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN, hdr, 2) == 0 && (hdr[0] >> 4) == 6) {
			family = 6;
			ecn = (hdr[1] >> 4) & INET_ECN_MASK; /* traffic class: bits 4..11 of the first word */
			if (bpf_skb_load_bytes(skb, ETH_HLEN + 8, src.addr, 16) ||
			    bpf_skb_load_bytes(skb, ETH_HLEN + 6, &l4proto, 1))
				family = 0;
			else
				len += gso_extra(skb, ETH_HLEN + 40, l4proto);
		}
	}

	/* No helper calls while the lock is held: time and randomness first. */
	now = bpf_ktime_get_ns();
	rnd = bpf_get_prandom_u32();
	len_nb = len * NANOBITS_PER_BYTE;
	limit_nb = cfg->limit_bytes * NANOBITS_PER_BYTE;
	kmin_nb = cfg->kmin_bytes * NANOBITS_PER_BYTE;
	kmax_nb = cfg->kmax_bytes * NANOBITS_PER_BYTE;

	bpf_spin_lock(&st->lock);
	vq = st->vq;
	if (now > st->last_ns) { /* another CPU may have drained up to a later instant already */
		dt = now - st->last_ns;
		/* dt * rate <= vq here, so the product cannot overflow */
		vq = dt > vq / cfg->rate_bps ? 0 : vq - dt * cfg->rate_bps;
		st->last_ns = now;
	}
	st->packets++;
	st->bytes += len;
	if (vq + len_nb > limit_nb) {
		overflow = 1;
		st->vq = vq;
		st->overflow++;
		st->overflow_bytes += len;
	} else {
		st->vq = vq + len_nb;
		if ((vq + len_nb) / NANOBITS_PER_BYTE > st->max_vq_bytes)
			st->max_vq_bytes = (vq + len_nb) / NANOBITS_PER_BYTE;
	}
	if (ecn == INET_ECN_CE) {
		st->ce++;
	} else if (ecn && family) {
		st->ect++;
		if (overflow || vq <= kmin_nb)
			mark = 0;
		else if (vq > kmax_nb)
			mark = 1;
		else /* RED between kmin and kmax: kmax - kmin < 2^31 and pmax_fp <= 2^32, no overflow */
			mark = rnd < cfg->pmax_fp * (vq / NANOBITS_PER_BYTE - cfg->kmin_bytes) /
					     (cfg->kmax_bytes - cfg->kmin_bytes);
		st->marked += mark;
	}
	bpf_spin_unlock(&st->lock);

	if (!family)
		return TC_ACT_OK;

	struct marker_source *s = bpf_map_lookup_elem(&ecn_sources, &src);
	if (!s) {
		struct marker_source fresh = {};

		bpf_map_update_elem(&ecn_sources, &src, &fresh, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&ecn_sources, &src);
	}
	if (s) {
		__sync_fetch_and_add(&s->packets, 1);
		if (mark)
			__sync_fetch_and_add(&s->marks, 1);
	}
	if (!mark)
		return TC_ACT_OK;

	if (family == 4) {
		__u16 old_word, new_word;

		__builtin_memcpy(&old_word, hdr, 2);
		hdr[1] |= INET_ECN_CE;
		__builtin_memcpy(&new_word, hdr, 2);
		bpf_skb_store_bytes(skb, ETH_HLEN + 1, &hdr[1], 1, 0);
		bpf_l3_csum_replace(skb, ETH_HLEN + 10, old_word, new_word, 2);
	} else {
		hdr[1] |= INET_ECN_CE << 4;
		bpf_skb_store_bytes(skb, ETH_HLEN + 1, &hdr[1], 1, 0);
	}
	return TC_ACT_OK;
}
