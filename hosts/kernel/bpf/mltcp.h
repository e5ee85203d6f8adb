/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * MLTCP for kernel TCP: what mltcp_reno, mltcp_cubic and mltcp_dctcp share.
 *
 *   F = intercept + slope * g(bytes_ratio),  bytes_ratio = clamp(bytes acked this iteration /
 *   bytes per iteration, 0, 1)  (mlfc/policy/mltcp.py, arXiv 2402.09589)
 *
 * F multiplies the congestion-avoidance increase. F's shape g (linear, power, step, sigmoid) is not
 * computed here: the loader samples mlfc.policy.mltcp.mltcp_factor at MLTCP_F_KNOTS + 1 evenly spaced
 * bytes_ratio knots into the parameter map, and mltcp_f_fp interpolates linearly between them. So the
 * kernel runs whatever F the Python policy defines, with integer arithmetic only: F, bytes_ratio and
 * the parameters carry MLTCP_FP_SHIFT fractional bits.
 *
 * Iterations are cut from the connection's own behaviour: CA_EVENT_TX_START (the kernel sends
 * new data with nothing in flight) after the pipe was empty for longer than
 * max(idle_rtts * srtt, idle_min_us) starts a new iteration. The bytes of the iteration that
 * just ended (tcp_sock.bytes_acked since its start) feed an EWMA, the bytes-per-iteration
 * estimate; until one iteration has ended there is no estimate and bytes_ratio is 0 (F = F(0)),
 * as in the user-space MltcpTracker.
 *
 * Job grouping (opt-in, mltcp_params.group): a training job spreads one iteration's bytes over several
 * connections, so a per-connection bytes_ratio ranks connections, not jobs. With grouping on, the
 * connections with the same (network namespace, local address, remote address, remote port) -- one
 * job's connections to one peer service -- share one progress: the <prefix>_jobs map holds the job's
 * bytes acknowledged (every connection adds its newly acked bytes on each ACK), the job's
 * bytes-per-iteration EWMA and its last activity; F comes from the job's ratio (mltcp_job_* below).
 *
 * The parameters come from an ARRAY map filled by the loader (mlfc.hosts.kernel.loader) from
 * mlfc.policy.mltcp before the struct_ops is registered. The layout of struct mltcp_params is
 * mirrored in mlfc/hosts/kernel/params.py; MLTCP_PARAMS_VERSION changes with it.
 */
#ifndef MLFC_MLTCP_H
#define MLFC_MLTCP_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define MLTCP_FP_SHIFT 16
#define MLTCP_FP_ONE (1U << MLTCP_FP_SHIFT)
#define MLTCP_PARAMS_VERSION 3
#define MLTCP_F_KNOTS_SHIFT 6
#define MLTCP_F_KNOTS (1U << MLTCP_F_KNOTS_SHIFT) /* table intervals; F at i / MLTCP_F_KNOTS, i = 0..64 */
#define MLTCP_MAX_FLOWS 4096
#define MLTCP_MAX_JOBS 4096
#define TCP_CONG_NON_RESTRICTED 0x1 /* include/net/tcp.h */
#define AF_INET 2
#define AF_INET6 10

struct mltcp_params {
	__u32 version;      /* MLTCP_PARAMS_VERSION of the loader that wrote it */
	__u32 ready;        /* 0 until the loader has written the values: F = 1 (the plain algorithm) */
	__u32 idle_rtts_fp; /* idle gap that starts an iteration, in smoothed RTTs ... */
	__u32 idle_min_us;  /* ... and at least this long */
	__u32 ewma_fp;      /* weight of the iteration that just ended in the bytes-per-iteration EWMA */
	__u32 shape;        /* for user space only (status): 0 linear, 1 power, 2 step, 3 sigmoid */
	/* The policy's numbers as IEEE 754 doubles, for user space only (status, set): the programs
	 * never read them, they read the table. */
	__u64 slope_f64;
	__u64 intercept_f64;
	__u64 exponent_f64;
	__u64 knee_f64;
	/* F(i / MLTCP_F_KNOTS) = mltcp_factor(i / MLTCP_F_KNOTS) in fixed point, i = 0..MLTCP_F_KNOTS */
	__u32 f_fp[MLTCP_F_KNOTS + 1];
	__u32 group; /* 1: F from the job's bytes_ratio (job grouping, above); 0: from the connection's */
};

/* F in fixed point from the bytes acked so far in this iteration and the bytes-per-iteration
 * estimate. The single C definition: the congestion controls and the F test program use it. */
static __always_inline __u32 mltcp_ratio_fp(__u64 acked, __u64 bytes_per_iter)
{
	if (bytes_per_iter == 0)
		return 0;
	if (acked >= bytes_per_iter)
		return MLTCP_FP_ONE;
	/* acked < bytes_per_iter < 2^47 in practice; keep the shift from overflowing anyway */
	if (acked >> (64 - MLTCP_FP_SHIFT - 1))
		return (__u32)(acked / (bytes_per_iter >> MLTCP_FP_SHIFT));
	return (__u32)((acked << MLTCP_FP_SHIFT) / bytes_per_iter);
}

/* F from the table: linear interpolation between the two knots around ratio_fp (the last knot from
 * ratio 1 on). The index is masked to the table's range, so the verifier sees every read in bounds. */
static __always_inline __u32 mltcp_f_fp(const struct mltcp_params *p, __u32 ratio_fp)
{
	__u32 pos, i, frac, lo, hi;
	__u64 f;

	if (ratio_fp >= MLTCP_FP_ONE) {
		f = p->f_fp[MLTCP_F_KNOTS];
	} else {
		pos = ratio_fp << MLTCP_F_KNOTS_SHIFT; /* < 2^22 */
		i = pos >> MLTCP_FP_SHIFT;
		barrier_var(i); /* keep the mask: clang would drop it as redundant, the verifier needs it */
		i &= MLTCP_F_KNOTS - 1;
		frac = pos & (MLTCP_FP_ONE - 1);
		lo = p->f_fp[i];
		hi = p->f_fp[i + 1];
		if (hi >= lo)
			f = lo + (((__u64)(hi - lo) * frac) >> MLTCP_FP_SHIFT);
		else
			f = lo - (((__u64)(lo - hi) * frac) >> MLTCP_FP_SHIFT);
	}
	if (f == 0)
		f = 1; /* never a zero increase (the loader rejects intercept <= 0 anyway) */
	return (__u32)f;
}

#define MLTCP_READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define MLTCP_WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/* The bytes-per-iteration EWMA: the first iteration's bytes, then weight_fp for each new one. */
static __always_inline __u64 mltcp_ewma(__u64 avg, __u64 sample, __u32 weight_fp)
{
	if (avg == 0)
		return sample;
	return (avg * (MLTCP_FP_ONE - weight_fp) + sample * weight_fp) >> MLTCP_FP_SHIFT;
}

/* Per-socket iteration state; lives in the congestion control's private area (inet_csk_ca, 104 bytes:
 * mltcp_cubic uses all of them, MLTCP_CA_FITS checks). */
struct mltcp_iter {
	__u64 iter_start_acked; /* tcp_sock.bytes_acked when this iteration began */
	__u64 bytes_per_iter;   /* EWMA of the bytes of earlier iterations; 0: none ended yet */
	__u64 last_ack_ns;      /* last ACK that acknowledged data (the pipe's last activity) */
	__u32 iterations;       /* iterations begun, the current one included */
	__u32 last_f_fp;        /* F at the last ACK of the last iteration (for status) */
	__u32 job_synced;       /* (u32)tcp_sock.bytes_acked already added to the job (modulo 2^32) */
	__u32 job_ratio_fp;     /* grouping: the job's bytes_ratio at this connection's last ACK */
};

#define MLTCP_CA_FITS(type)                                                                              \
	_Static_assert(sizeof(type) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),          \
		       #type " must fit the congestion control's private area")

/* One job's connections to one peer service: what grouping shares progress between. IPv4 connections
 * of an AF_INET6 socket (v4-mapped addresses) are keyed as AF_INET, so they group with AF_INET ones. */
struct mltcp_job_key {
	__u32 netns;  /* network namespace inode number */
	__u16 family; /* AF_INET or AF_INET6 */
	__u16 dport;  /* remote port, host byte order */
	__u8 saddr[16];
	__u8 daddr[16];
};

/* A job's progress (grouping on). The counters follow one rule: only atomic adds to `acked`; the rest is
 * written by the one connection that begins the job's iteration (mltcp_job_begin), elected by a
 * compare-and-swap on last_ns. */
struct mltcp_job {
	__u64 acked;           /* bytes acked by the job's connections since this record was created */
	__u64 iter_start;      /* `acked` when the job's current iteration began */
	__u64 bytes_per_iter;  /* EWMA of the job's earlier iterations; 0: none ended yet */
	__u64 last_iter_bytes; /* bytes of the job's last complete iteration */
	__u64 last_ns;         /* the job's last activity (an ACK of data, an iteration's start); 0: none */
	__u32 iterations;      /* job iterations begun, the current one included */
	__u32 last_f_fp;       /* F from the job's bytes_ratio when its last iteration ended */
};

/* The job's bytes_ratio now. `acked` is read before iter_start: should the job's iteration begin on
 * another CPU in between, the ratio reads 0 (the new iteration's) rather than the old iteration's plus
 * the new one's. */
static __always_inline __u32 mltcp_job_ratio_fp(const struct mltcp_job *j)
{
	__u64 acked = MLTCP_READ_ONCE(j->acked);
	__u64 start = MLTCP_READ_ONCE(j->iter_start);

	return mltcp_ratio_fp(acked > start ? acked - start : 0, MLTCP_READ_ONCE(j->bytes_per_iter));
}

/* An ACK on one of the job's connections: the bytes it acknowledged (an atomic add: the job's other
 * connections add theirs on other CPUs) and the job's last activity (a plain store: of two ACKs at the
 * same moment either time will do). */
static __always_inline void mltcp_job_on_ack(struct mltcp_job *j, __u32 bytes, __u64 now)
{
	if (bytes)
		__sync_fetch_and_add(&j->acked, bytes);
	MLTCP_WRITE_ONCE(j->last_ns, now);
}

/* Per-connection view for `mlfc-mltcp status` and the tests, keyed by the socket's address (stable
 * from init to release, unlike the 4-tuple, which the kernel may clear before release): written when
 * a connection starts using the congestion control and at each iteration boundary, deleted on
 * release. */
struct mltcp_flow {
	__u32 netns;  /* network namespace inode number */
	__u16 family; /* AF_INET or AF_INET6 */
	__u16 sport;  /* host byte order */
	__u16 dport;  /* host byte order */
	__u16 pad;
	__u32 iterations;
	__u8 saddr[16];
	__u8 daddr[16];
	__u64 bytes_per_iter;
	__u64 last_iter_bytes;
	__u64 updated_ns;
	__u32 last_f_fp;
	__u32 cwnd;
	__u32 ssthresh;
	__u32 job_iterations;     /* grouping on: the job's iterations when this record was written; else 0 */
	__u64 job_bytes_per_iter; /* grouping on: the job's bytes-per-iteration estimate then; else 0 */
};

enum mltcp_stat {
	MLTCP_STAT_INIT,       /* connections that started using the congestion control */
	MLTCP_STAT_RELEASE,    /* ... and stopped */
	MLTCP_STAT_ITERATION,  /* iteration boundaries detected */
	MLTCP_STAT_TX_START,   /* CA_EVENT_TX_START events seen (boundaries or short gaps) */
	MLTCP_STAT_SSTHRESH,   /* window reductions (loss or ECN) */
	MLTCP_STAT_NO_PARAMS,  /* ACKs handled with F = 1 because the parameters were not ready */
	MLTCP_STAT_NO_ECN,     /* mltcp_dctcp: connections without ECN, moved to the fallback (mltcp_reno) */
	MLTCP_STAT_MAX,
};

/* Each algorithm's object declares its maps with MLTCP_MAPS(prefix); map names are "<prefix>_params",
 * "<prefix>_flows", "<prefix>_stats", "<prefix>_jobs" (at most 15 characters: the kernel keeps 15). */
#define MLTCP_MAPS(prefix)                                                   \
	struct {                                                             \
		__uint(type, BPF_MAP_TYPE_ARRAY);                            \
		__uint(max_entries, 1);                                      \
		__type(key, __u32);                                          \
		__type(value, struct mltcp_params);                          \
	} prefix##_params SEC(".maps");                                      \
	struct {                                                             \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                         \
		__uint(max_entries, MLTCP_MAX_FLOWS);                        \
		__type(key, __u64);                                          \
		__type(value, struct mltcp_flow);                            \
	} prefix##_flows SEC(".maps");                                       \
	struct {                                                             \
		__uint(type, BPF_MAP_TYPE_ARRAY);                            \
		__uint(max_entries, MLTCP_STAT_MAX);                         \
		__type(key, __u32);                                          \
		__type(value, __u64);                                        \
	} prefix##_stats SEC(".maps");                                       \
	struct {                                                             \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                         \
		__uint(max_entries, MLTCP_MAX_JOBS);                         \
		__type(key, struct mltcp_job_key);                           \
		__type(value, struct mltcp_job);                             \
	} prefix##_jobs SEC(".maps");

static __always_inline struct tcp_sock *mltcp_tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline void mltcp_count(void *stats, __u32 which)
{
	__u64 *v = bpf_map_lookup_elem(stats, &which);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* The parameters, or 0 while they are not ready; without counting (the per-ACK path). */
static __always_inline const struct mltcp_params *mltcp_params_peek(void *params)
{
	__u32 zero = 0;
	const struct mltcp_params *p = bpf_map_lookup_elem(params, &zero);

	if (!p || !p->ready || p->version != MLTCP_PARAMS_VERSION)
		return 0;
	return p;
}

static __always_inline const struct mltcp_params *mltcp_params_get(void *params, void *stats)
{
	const struct mltcp_params *p = mltcp_params_peek(params);

	if (!p)
		mltcp_count(stats, MLTCP_STAT_NO_PARAMS);
	return p;
}

/* F for this socket now; MLTCP_FP_ONE (the plain algorithm) while the parameters are not ready. With
 * grouping, F of the job's bytes_ratio as this ACK's pkts_acked (which runs before cong_avoid) left it. */
static __always_inline __u32 mltcp_current_f(struct sock *sk, const struct mltcp_iter *it, void *params, void *stats)
{
	const struct mltcp_params *p = mltcp_params_get(params, stats);
	struct tcp_sock *tp = mltcp_tcp_sk(sk);

	if (!p)
		return MLTCP_FP_ONE;
	if (p->group)
		return mltcp_f_fp(p, it->job_ratio_fp);
	return mltcp_f_fp(p, mltcp_ratio_fp(tp->bytes_acked - it->iter_start_acked, it->bytes_per_iter));
}

/* The idle gap that starts an iteration: max(idle_rtts * srtt, idle_min), in microseconds. */
static __always_inline __u64 mltcp_idle_threshold_us(struct tcp_sock *tp, const struct mltcp_params *p)
{
	/* srtt_us holds 8 x the smoothed RTT in microseconds */
	__u64 threshold_us = (((__u64)(tp->srtt_us >> 3)) * p->idle_rtts_fp) >> MLTCP_FP_SHIFT;

	return threshold_us < p->idle_min_us ? p->idle_min_us : threshold_us;
}

/* The job of a connection (grouping on): its record, created if there is none. */
static __always_inline struct mltcp_job *mltcp_job_get(struct sock *sk, void *jobs)
{
	const struct sock_common *c = &sk->__sk_common;
	struct mltcp_job_key k = {};
	struct mltcp_job fresh = {};
	struct mltcp_job *j;

	k.netns = c->skc_net.net->ns.inum;
	k.family = c->skc_family;
	k.dport = __builtin_bswap16(c->skc_dport);
	if (k.family == AF_INET6) {
		__builtin_memcpy(k.saddr, &c->skc_v6_rcv_saddr, 16);
		__builtin_memcpy(k.daddr, &c->skc_v6_daddr, 16);
		/* ::ffff:a.b.c.d, an IPv4 connection of an IPv6 socket: keyed as AF_INET */
		if (*(__u64 *)k.daddr == 0 && *(__u16 *)(k.daddr + 8) == 0 && *(__u16 *)(k.daddr + 10) == 0xffff) {
			__builtin_memset(k.saddr, 0, 16);
			__builtin_memset(k.daddr, 0, 16);
			k.family = AF_INET;
		}
	}
	if (k.family != AF_INET6) {
		__builtin_memcpy(k.saddr, &c->skc_rcv_saddr, 4);
		__builtin_memcpy(k.daddr, &c->skc_daddr, 4);
	}
	j = bpf_map_lookup_elem(jobs, &k);
	if (j)
		return j;
	/* BPF_NOEXIST: if another connection of the job creates it at the same moment, its record stays
	 * and both use that one (the lookup below) */
	bpf_map_update_elem(jobs, &k, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(jobs, &k);
}

/* A connection of the job starts an iteration (its own pipe was idle: mltcp_iter_on_tx_start). If the job
 * has been idle for longer than threshold_ns too -- no ACK on any of its connections -- or never was
 * active, the job's iteration begins now: the job's bytes since the previous beginning close the last
 * iteration and feed the EWMA. Otherwise the connection joins the iteration in progress, which another of
 * the job's connections began. Returns 1 if this call began the job's iteration.
 *
 * Races (the job's connections start their iterations within microseconds of one another, on different
 * CPUs, while others' ACKs arrive): of the connections that find the job idle, the compare-and-swap on
 * last_ns lets exactly one through; the others see last_ns changed and join, so a job iteration begins
 * once, never once per connection. Only that one connection writes iter_start, the EWMA and the counts,
 * and `acked` only grows by atomic adds, so every byte counts in exactly one iteration: the ones added
 * before the winner reads `acked` in the iteration that ends, the ones after in the new one. The cut is
 * therefore exact up to the ACKs being processed at that instant (at most one ACK's bytes per
 * connection), and there are none when the job really was idle for threshold_ns. A ratio read
 * concurrently (mltcp_job_ratio_fp, another CPU) may combine old and new values: that ACK's F is off,
 * the next one's is right. An ACK storing last_ns between this read and the swap makes the swap fail:
 * the job had an ACK just then, so it was not idle, and the connection joins. */
static __always_inline int mltcp_job_begin(struct mltcp_job *j, const struct mltcp_params *p, __u64 now,
					   __u64 threshold_ns)
{
	__u64 last = MLTCP_READ_ONCE(j->last_ns), total, done;

	/* signed: another CPU may have stored a time later than our now */
	if (last && (__s64)(now - last) <= (__s64)threshold_ns)
		return 0;
	if (__sync_val_compare_and_swap(&j->last_ns, last, now) != last)
		return 0;
	total = MLTCP_READ_ONCE(j->acked);
	done = total - j->iter_start;
	if (j->iterations > 0 && done > 0) {
		j->last_f_fp = mltcp_f_fp(p, mltcp_ratio_fp(done, j->bytes_per_iter));
		j->bytes_per_iter = mltcp_ewma(j->bytes_per_iter, done, p->ewma_fp);
		j->last_iter_bytes = done;
	}
	j->iter_start = total;
	j->iterations++;
	return 1;
}

static __always_inline __u64 mltcp_flow_id(struct sock *sk)
{
	return (__u64)(unsigned long)sk;
}

/* A new connection: its addresses and an empty iteration record. */
static __always_inline void mltcp_flow_start(struct sock *sk, void *flows)
{
	const struct sock_common *c = &sk->__sk_common;
	__u64 id = mltcp_flow_id(sk);
	struct mltcp_flow v = {};

	v.netns = c->skc_net.net->ns.inum;
	v.family = c->skc_family;
	v.sport = c->skc_num;
	v.dport = __builtin_bswap16(c->skc_dport);
	if (v.family == AF_INET6) {
		__builtin_memcpy(v.saddr, &c->skc_v6_rcv_saddr, 16);
		__builtin_memcpy(v.daddr, &c->skc_v6_daddr, 16);
	} else {
		__builtin_memcpy(v.saddr, &c->skc_rcv_saddr, 4);
		__builtin_memcpy(v.daddr, &c->skc_daddr, 4);
	}
	v.cwnd = mltcp_tcp_sk(sk)->snd_cwnd;
	v.ssthresh = mltcp_tcp_sk(sk)->snd_ssthresh;
	v.updated_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(flows, &id, &v, BPF_ANY);
}

static __always_inline void mltcp_flow_update(struct sock *sk, const struct mltcp_iter *it, __u64 last_bytes,
					      const struct mltcp_job *j, void *flows)
{
	__u64 id = mltcp_flow_id(sk);
	struct mltcp_flow *v = bpf_map_lookup_elem(flows, &id);
	struct tcp_sock *tp = mltcp_tcp_sk(sk);

	if (!v)
		return; /* evicted (more than MLTCP_MAX_FLOWS connections) */
	v->bytes_per_iter = it->bytes_per_iter;
	v->last_iter_bytes = last_bytes;
	v->updated_ns = bpf_ktime_get_ns();
	v->iterations = it->iterations;
	v->last_f_fp = it->last_f_fp;
	v->cwnd = tp->snd_cwnd;
	v->ssthresh = tp->snd_ssthresh;
	v->job_iterations = j ? j->iterations : 0;
	v->job_bytes_per_iter = j ? j->bytes_per_iter : 0;
}

static __always_inline void mltcp_flow_delete(struct sock *sk, void *flows)
{
	__u64 id = mltcp_flow_id(sk);

	bpf_map_delete_elem(flows, &id);
}

static __always_inline void mltcp_iter_init(struct sock *sk, struct mltcp_iter *it)
{
	it->iter_start_acked = mltcp_tcp_sk(sk)->bytes_acked;
	it->bytes_per_iter = 0;
	it->last_ack_ns = bpf_ktime_get_ns();
	it->iterations = 0;
	it->last_f_fp = 0;
	it->job_synced = (__u32)mltcp_tcp_sk(sk)->bytes_acked;
	it->job_ratio_fp = 0;
}

/* Every ACK of data (pkts_acked, which runs before cong_avoid): the pipe's last activity. With grouping,
 * the bytes this ACK acknowledged go to the connection's job (an atomic add: other connections of the
 * job add theirs on other CPUs) and the job's bytes_ratio is kept for this ACK's cong_avoid. */
static __always_inline void mltcp_iter_on_ack(struct sock *sk, struct mltcp_iter *it, void *params, void *jobs)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	__u32 acked = (__u32)tp->bytes_acked, delta = acked - it->job_synced; /* modulo 2^32 */
	__u64 now = bpf_ktime_get_ns();
	const struct mltcp_params *p;
	struct mltcp_job *j;

	it->last_ack_ns = now;
	it->job_synced = acked; /* kept with grouping off too, so turning it on adds no stale bytes */
	p = mltcp_params_peek(params);
	/* iterations 0: no data sent yet. The kernel calls pkts_acked for the ACK of a SYN too, before init: a
	 * handshake is not the job's activity (it would make a new job look busy at its first data) */
	if (!p || !p->group || it->iterations == 0)
		return;
	j = mltcp_job_get(sk, jobs);
	if (!j) { /* the map took no record: the connection's own ratio */
		it->job_ratio_fp = mltcp_ratio_fp(tp->bytes_acked - it->iter_start_acked, it->bytes_per_iter);
		return;
	}
	mltcp_job_on_ack(j, delta, now);
	it->job_ratio_fp = mltcp_job_ratio_fp(j);
}

/* CA_EVENT_TX_START: the kernel sends with nothing in flight. Returns 1 when this starts a new
 * iteration: new data (nothing outstanding) after the pipe was empty for longer than the idle
 * threshold, or the connection's first data. With grouping, the connection's iteration also begins the
 * job's if the job was idle that long (mltcp_job_begin), else joins it; the F recorded for the
 * iteration that ended is the job's at the connection's last ACK. */
static __always_inline int mltcp_iter_on_tx_start(struct sock *sk, struct mltcp_iter *it, void *params, void *flows,
						  void *jobs, void *stats)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	const struct mltcp_params *p = mltcp_params_get(params, stats);
	__u64 now = bpf_ktime_get_ns();
	__u64 idle_us = (now - it->last_ack_ns) / 1000;
	__u64 done, threshold_us;
	struct mltcp_job *j = 0;
	__u32 acked, delta;

	mltcp_count(stats, MLTCP_STAT_TX_START);
	if (!p)
		return 0;
	/* TX_START also fires for a retransmission after an RTO (nothing counted in flight, but
	 * packets still outstanding): that is the same iteration. */
	if (tp->packets_out)
		return 0;
	threshold_us = mltcp_idle_threshold_us(tp, p);
	if (it->iterations > 0 && idle_us <= threshold_us)
		return 0;

	done = tp->bytes_acked - it->iter_start_acked;
	if (p->group) {
		j = mltcp_job_get(sk, jobs);
		if (j) {
			/* bytes acked since the last ACK's add (none, normally): they belong to the iteration that
			 * ends; last_ns stays as it is, the idle test below needs it */
			acked = (__u32)tp->bytes_acked;
			delta = acked - it->job_synced;
			it->job_synced = acked;
			if (delta)
				__sync_fetch_and_add(&j->acked, delta);
			mltcp_job_begin(j, p, now, threshold_us * 1000);
		}
	}
	if (it->iterations > 0 && done > 0) {
		if (p->group)
			it->last_f_fp = mltcp_f_fp(p, it->job_ratio_fp);
		else
			it->last_f_fp = mltcp_f_fp(p, mltcp_ratio_fp(done, it->bytes_per_iter));
		it->bytes_per_iter = mltcp_ewma(it->bytes_per_iter, done, p->ewma_fp);
	}
	it->iter_start_acked = tp->bytes_acked;
	if (p->group)
		it->job_ratio_fp = j ? mltcp_job_ratio_fp(j) : 0;
	it->iterations++;
	mltcp_count(stats, MLTCP_STAT_ITERATION);
	mltcp_flow_update(sk, it, done, j, flows);
	return 1;
}

/* Reno's slow start (the kernel's tcp_slow_start): grow by the acked segments up to ssthresh and
 * return what is left for congestion avoidance. */
static __always_inline __u32 mltcp_slow_start(struct tcp_sock *tp, __u32 acked)
{
	__u32 cwnd = tp->snd_cwnd + acked;

	if (cwnd > tp->snd_ssthresh)
		cwnd = tp->snd_ssthresh;
	acked -= cwnd - tp->snd_cwnd;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
	return acked;
}

/* The kernel's tcp_cong_avoid_ai: one segment more per w segments acknowledged. */
static __always_inline void mltcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked)
{
	if (w == 0)
		w = 1;
	if (tp->snd_cwnd_cnt >= w) {
		tp->snd_cwnd_cnt = 0;
		tp->snd_cwnd++;
	}
	tp->snd_cwnd_cnt += acked;
	if (tp->snd_cwnd_cnt >= w) {
		__u32 delta = tp->snd_cwnd_cnt / w;

		tp->snd_cwnd_cnt -= delta * w;
		tp->snd_cwnd += delta;
	}
	if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
}

/* w / F in fixed point, at least 1: the window "count" with MLTCP's factor applied. */
static __always_inline __u32 mltcp_scale_cnt(__u32 cnt, __u32 f_fp)
{
	__u64 w = ((__u64)cnt << MLTCP_FP_SHIFT) / f_fp;

	if (w == 0)
		return 1;
	return w > 0xffffffffULL ? 0xffffffffU : (__u32)w;
}

static __always_inline int mltcp_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* The kernel's tcp_is_cwnd_limited: only a window that limits sending may grow. */
static __always_inline int mltcp_cwnd_limited(struct tcp_sock *tp)
{
	if (mltcp_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return !!BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

/* Reno's congestion avoidance with F (the kernel's tcp_reno_cong_avoid): slow start to ssthresh, then
 * one segment more per cwnd / F acknowledged segments, F segments per RTT instead of one; only a
 * cwnd-limited window grows. The cong_avoid of mltcp_reno and of mltcp_dctcp (DCTCP's is Reno's). */
static __always_inline void mltcp_reno_cong_avoid(struct sock *sk, const struct mltcp_iter *it, __u32 acked,
						  void *params, void *stats)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	__u32 f_fp;

	if (!mltcp_cwnd_limited(tp))
		return;
	if (mltcp_in_slow_start(tp)) {
		acked = mltcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	f_fp = mltcp_current_f(sk, it, params, stats);
	mltcp_cong_avoid_ai(tp, mltcp_scale_cnt(tp->snd_cwnd, f_fp), acked);
}

#endif /* MLFC_MLTCP_H */
