// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * mltcp_cubic: CUBIC as the kernel's net/ipv4/tcp_cubic.c runs it by default (C = 0.4 as
 * bic_scale 41, beta 717/1024, fast convergence, TCP friendliness, HyStart with ACK-train and
 * delay detection), with MLTCP's F scaling the growth, as the user-space CUBIC does
 * (hosts/cc/cubic.py):
 *   - the step toward the cubic curve: cnt (ACKs per extra segment) is divided by F;
 *   - the Reno-friendly estimate grows F times faster (its ACK count per segment divided by F);
 *   - the floor of the kernel (cnt >= 2, at most +50 % per RTT) becomes 2 / F (at least 1).
 * With F = 1 every step is the kernel's. Differences from the kernel, all documented in
 * docs/kernel-mltcp.md: time in microseconds (tcp_mstamp) instead of jiffies; the cube root is
 * the exact integer floor (bit by bit) instead of a table plus one Newton step; after an idle
 * period the epoch shifts by the time the pipe was empty (the kernel: since the last send).
 */
#include "mltcp.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

MLTCP_MAPS(mltcp_c)

#define BETA_SCALE 1024
#define BETA 717			/* 0.7 * BETA_SCALE */
#define CUBE_RTT_SCALE 410		/* bic_scale 41 * 10: C = 0.4 */
#define CUBE_FACTOR ((1ULL << 40) / CUBE_RTT_SCALE)
#define FRIENDLY_SCALE (8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA))
#define HZ_SHIFT 10			/* cubic time unit: 2^-10 s */
#define CNT_UPDATE_US 31250		/* recompute cnt at least every 1/32 s (the kernel: HZ / 32) */
#define HYSTART_LOW_WINDOW 16
#define HYSTART_ACK_DELTA_US 2000
#define HYSTART_MIN_SAMPLES 8
#define HYSTART_DELAY_MIN_US 4000
#define HYSTART_DELAY_MAX_US 16000

struct mcubic {
	__u32 cnt;
	__u32 last_max_cwnd;
	__u32 last_cwnd;
	__u32 last_time;	/* us */
	__u32 origin_point;
	__u32 K;		/* 2^-10 s */
	__u32 delay_min;	/* us */
	__u32 epoch_start;	/* us; 0: no epoch */
	__u32 ack_cnt;
	__u32 tcp_cwnd;		/* the Reno-friendly window estimate */
	__u32 round_start;	/* HyStart */
	__u32 end_seq;
	__u32 last_ack;
	__u32 curr_rtt;
	__u16 sample_cnt;
	__u8 found;
	__u8 pad;
	struct mltcp_iter it;
};
MLTCP_CA_FITS(struct mcubic);

static __always_inline struct mcubic *mcubic_ca(struct sock *sk)
{
	return (struct mcubic *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline int seq_after(__u32 a, __u32 b)
{
	return (__s32)(b - a) < 0;
}

static __always_inline __u32 now_us(struct tcp_sock *tp)
{
	__u32 t = (__u32)tp->tcp_mstamp;

	return t ? t : 1;
}

/* floor(cbrt(a)) for a < 2^64, bit by bit; y*y <= a / y is y^3 <= a without overflow. */
static __always_inline __u32 cube_root(__u64 a)
{
	__u64 x = 0;
	int b;

	for (b = 21; b >= 0; b--) {
		__u64 y = x | (1ULL << b);

		if (y * y <= a / y)
			x = y;
	}
	return (__u32)x;
}

static __always_inline void cubic_reset(struct mcubic *ca)
{
	ca->cnt = 0;
	ca->last_max_cwnd = 0;
	ca->last_cwnd = 0;
	ca->last_time = 0;
	ca->origin_point = 0;
	ca->K = 0;
	ca->delay_min = 0;
	ca->epoch_start = 0;
	ca->ack_cnt = 0;
	ca->tcp_cwnd = 0;
	ca->found = 0;
}

static __always_inline void hystart_reset(struct sock *sk, struct mcubic *ca)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);

	ca->round_start = ca->last_ack = now_us(tp);
	ca->end_seq = tp->snd_nxt;
	ca->curr_rtt = ~0U;
	ca->sample_cnt = 0;
}

/* cnt for the next ACKs: the kernel's bictcp_update with F applied to both growth terms. */
static __always_inline void cubic_update(struct tcp_sock *tp, struct mcubic *ca, __u32 cwnd, __u32 acked, __u32 f_fp)
{
	__u32 now = now_us(tp);
	__u64 offs, delta, t;
	__u32 target, floor;

	ca->ack_cnt += acked;
	if (ca->last_cwnd == cwnd && (__s32)(now - ca->last_time) <= CNT_UPDATE_US)
		return;
	if (ca->epoch_start && (__s32)(now - ca->last_time) < 1000)
		goto friendliness; /* the cubic term at most once per millisecond (the kernel: per jiffy) */

	ca->last_cwnd = cwnd;
	ca->last_time = now;
	if (ca->epoch_start == 0) {
		ca->epoch_start = now;
		ca->ack_cnt = acked;
		ca->tcp_cwnd = cwnd;
		if (ca->last_max_cwnd <= cwnd) {
			ca->K = 0;
			ca->origin_point = cwnd;
		} else {
			ca->K = cube_root(CUBE_FACTOR * (ca->last_max_cwnd - cwnd));
			ca->origin_point = ca->last_max_cwnd;
		}
	}
	/* t: time since the epoch began plus one minimum RTT, in 2^-10 s */
	t = ((__u64)(__u32)(now - ca->epoch_start) + ca->delay_min) << HZ_SHIFT;
	t /= 1000000;
	offs = t < ca->K ? ca->K - t : t - ca->K;
	if (offs > (1ULL << 20))
		offs = 1ULL << 20; /* 1024 s: keeps offs^3 * 410 inside 64 bits */
	delta = (CUBE_RTT_SCALE * offs * offs * offs) >> (10 + 3 * HZ_SHIFT);
	if (t < ca->K)
		target = ca->origin_point > delta ? ca->origin_point - (__u32)delta : 0;
	else
		target = ca->origin_point + (__u32)delta;
	if (target > cwnd)
		ca->cnt = cwnd / (target - cwnd);
	else
		ca->cnt = 100 * cwnd; /* very small increment */
	if (ca->last_max_cwnd == 0 && ca->cnt > 20)
		ca->cnt = 20; /* the kernel's 5 % per RTT while no loss was seen */
	ca->cnt = mltcp_scale_cnt(ca->cnt, f_fp);

friendliness:
	/* The Reno-friendly estimate: one segment per (cwnd * FRIENDLY_SCALE / 8) / F ACKs. */
	delta = mltcp_scale_cnt((cwnd * FRIENDLY_SCALE) >> 3, f_fp);
	if (ca->ack_cnt > delta) {
		__u32 n = (ca->ack_cnt - 1) / (__u32)delta;

		ca->ack_cnt -= n * (__u32)delta;
		ca->tcp_cwnd += n;
	}
	if (ca->tcp_cwnd > cwnd) {
		__u32 max_cnt = cwnd / (ca->tcp_cwnd - cwnd);

		if (ca->cnt > max_cnt)
			ca->cnt = max_cnt;
	}
	floor = mltcp_scale_cnt(2, f_fp);
	if (ca->cnt < floor)
		ca->cnt = floor;
}

SEC("struct_ops/mcubic_init")
void BPF_PROG(mcubic_init, struct sock *sk)
{
	struct mcubic *ca = mcubic_ca(sk);

	cubic_reset(ca);
	hystart_reset(sk, ca);
	mltcp_iter_init(sk, &ca->it);
	mltcp_count(&mltcp_c_stats, MLTCP_STAT_INIT);
	mltcp_flow_start(sk, &mltcp_c_flows);
}

SEC("struct_ops/mcubic_release")
void BPF_PROG(mcubic_release, struct sock *sk)
{
	mltcp_count(&mltcp_c_stats, MLTCP_STAT_RELEASE);
	mltcp_flow_delete(sk, &mltcp_c_flows);
}

SEC("struct_ops/mcubic_cong_avoid")
void BPF_PROG(mcubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mcubic *ca = mcubic_ca(sk);
	__u32 f_fp;

	if (!mltcp_cwnd_limited(tp))
		return;
	if (mltcp_in_slow_start(tp)) {
		if (seq_after(ack, ca->end_seq))
			hystart_reset(sk, ca);
		acked = mltcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	f_fp = mltcp_current_f(sk, &ca->it, &mltcp_c_params, &mltcp_c_stats);
	cubic_update(tp, ca, tp->snd_cwnd, acked, f_fp);
	mltcp_cong_avoid_ai(tp, ca->cnt, acked);
}

SEC("struct_ops/mcubic_ssthresh")
__u32 BPF_PROG(mcubic_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mcubic *ca = mcubic_ca(sk);
	__u32 cwnd = tp->snd_cwnd, next;

	mltcp_count(&mltcp_c_stats, MLTCP_STAT_SSTHRESH);
	ca->epoch_start = 0;
	if (cwnd < ca->last_max_cwnd) /* fast convergence */
		ca->last_max_cwnd = (cwnd * (BETA_SCALE + BETA)) / (2 * BETA_SCALE);
	else
		ca->last_max_cwnd = cwnd;
	next = (cwnd * BETA) / BETA_SCALE;
	return next > 2 ? next : 2;
}

SEC("struct_ops/mcubic_undo_cwnd")
__u32 BPF_PROG(mcubic_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC("struct_ops/mcubic_set_state")
void BPF_PROG(mcubic_set_state, struct sock *sk, __u8 new_state)
{
	struct mcubic *ca = mcubic_ca(sk);

	if (new_state == TCP_CA_Loss) {
		cubic_reset(ca);
		hystart_reset(sk, ca);
	}
}

SEC("struct_ops/mcubic_cwnd_event")
void BPF_PROG(mcubic_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mcubic *ca = mcubic_ca(sk);
	__u32 now, idle_us;

	if (event != CA_EVENT_TX_START)
		return;
	/* Application-limited for a while: shift the epoch so the window keeps to the cubic curve. */
	now = now_us(tp);
	idle_us = (__u32)((bpf_ktime_get_ns() - ca->it.last_ack_ns) / 1000);
	if (ca->epoch_start && idle_us > 0) {
		ca->epoch_start += idle_us;
		if (seq_after(ca->epoch_start, now))
			ca->epoch_start = now;
	}
	mltcp_iter_on_tx_start(sk, &ca->it, &mltcp_c_params, &mltcp_c_flows, &mltcp_c_jobs, &mltcp_c_stats);
}

static __always_inline void hystart_update(struct sock *sk, struct mcubic *ca, __u32 delay)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	__u32 now, threshold;

	if (seq_after(tp->snd_una, ca->end_seq))
		hystart_reset(sk, ca);

	/* ACK train: ACKs closely spaced for longer than half the minimum RTT */
	now = now_us(tp);
	if ((__s32)(now - ca->last_ack) <= HYSTART_ACK_DELTA_US) {
		__u64 rate = sk->sk_pacing_rate;
		__u32 ack_delay = 0;

		ca->last_ack = now;
		if (rate) {
			__u64 d = ((__u64)sk->sk_gso_max_size * 4 * 1000000) / rate;

			ack_delay = d < 1000 ? (__u32)d : 1000;
		}
		threshold = ca->delay_min + ack_delay;
		if (sk->sk_pacing_status == SK_PACING_NONE)
			threshold >>= 1;
		if ((__s32)(now - ca->round_start) > (__s32)threshold) {
			ca->found = 1;
			tp->snd_ssthresh = tp->snd_cwnd;
		}
	}

	/* delay increase: the round's minimum RTT above delay_min + clamp(delay_min / 8, 4, 16 ms) */
	if (ca->curr_rtt > delay)
		ca->curr_rtt = delay;
	if (ca->sample_cnt < HYSTART_MIN_SAMPLES) {
		ca->sample_cnt++;
	} else {
		__u32 thresh = ca->delay_min >> 3;

		if (thresh < HYSTART_DELAY_MIN_US)
			thresh = HYSTART_DELAY_MIN_US;
		if (thresh > HYSTART_DELAY_MAX_US)
			thresh = HYSTART_DELAY_MAX_US;
		if (ca->curr_rtt > ca->delay_min + thresh) {
			ca->found = 1;
			tp->snd_ssthresh = tp->snd_cwnd;
		}
	}
}

SEC("struct_ops/mcubic_pkts_acked")
void BPF_PROG(mcubic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mcubic *ca = mcubic_ca(sk);
	__u32 delay;
	__s32 rtt_us = sample->rtt_us;

	mltcp_iter_on_ack(sk, &ca->it, &mltcp_c_params, &mltcp_c_jobs);
	if (rtt_us < 0)
		return;
	/* no delay samples right after a congestion event: the queue is still draining */
	if (ca->epoch_start && (__s32)(now_us(tp) - ca->epoch_start) < 1000000)
		return;
	delay = rtt_us ? (__u32)rtt_us : 1;
	if (ca->delay_min == 0 || ca->delay_min > delay)
		ca->delay_min = delay;
	if (!ca->found && mltcp_in_slow_start(tp) && tp->snd_cwnd >= HYSTART_LOW_WINDOW)
		hystart_update(sk, ca, delay);
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp_cubic = {
	.init = (void *)mcubic_init,
	.release = (void *)mcubic_release,
	.ssthresh = (void *)mcubic_ssthresh,
	.cong_avoid = (void *)mcubic_cong_avoid,
	.set_state = (void *)mcubic_set_state,
	.undo_cwnd = (void *)mcubic_undo_cwnd,
	.cwnd_event = (void *)mcubic_cwnd_event,
	.pkts_acked = (void *)mcubic_pkts_acked,
	/* like reno and cubic: any namespace may default to it, any process may select it */
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "mltcp_cubic",
};
