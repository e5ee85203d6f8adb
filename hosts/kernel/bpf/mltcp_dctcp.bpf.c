// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * mltcp_dctcp: the kernel's DCTCP (net/ipv4/tcp_dctcp.c) with MLTCP's F scaling its additive increase,
 * which DCTCP takes from Reno: one segment more per cwnd / F acknowledged segments (mltcp_reno_cong_avoid).
 * The rest is DCTCP's, with its defaults:
 *   - alpha: an EWMA, gain g = 1/16, of the fraction of segments delivered in the last window that the
 *     receiver echoed as CE-marked (tcp_sock.delivered_ce / delivered), updated once per window of data
 *     (in_ack_event); it starts at 1 (1024 / 1024);
 *   - ECE (the kernel enters CWR at most once per window): ssthresh = cwnd * (1 - alpha / 2);
 *   - loss: halving on entering recovery and on an RTO (set_state, CA_EVENT_LOSS); undo restores the
 *     window before the reduction;
 *   - receiver: the CE state machine that echoes every segment's CE mark as it was (an immediate ACK when
 *     the state flips, a delayed ACK flushed first with the previous state) instead of RFC 3168's ECE
 *     latched until CWR;
 *   - TCP_CONG_NEEDS_ECN: the kernel asks for ECN on this socket's SYN whatever net.ipv4.tcp_ecn says and
 *     sends ECT(0), the SYN included; a listener using it accepts an ECT SYN's ECN request (a listener with
 *     another congestion control refuses it, whatever its tcp_ecn).
 * Without ECN on the connection (its peer refused it) the socket switches itself to mltcp_reno (plain
 * reno if mltcp_reno is not registered), as the kernel's dctcp falls back to Reno; switching also stops
 * ECT (should both switches fail, it stays, loss-driven only). Not here: get_info (BPF congestion controls cannot provide it, so `ss` shows no dctcp alpha),
 * PLB (tcp_plb_* are not callable from BPF; off by default, net.ipv4.tcp_plb_enabled = 0), and the
 * module parameters (g and the initial alpha are fixed at the defaults).
 */
#include "mltcp.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

MLTCP_MAPS(mltcp_d)

#define TCP_CONG_NEEDS_ECN 0x2        /* include/net/tcp.h */
#define TCP_ECN_MODE_RFC3168 0x1      /* tcp_sock.ecn_flags (include/net/tcp.h, 6.18) */
#define TCP_ECN_DEMAND_CWR 0x4
#define TCP_ECN_MODE_ACCECN 0x10
#define TCP_ECN_MODE_ANY (TCP_ECN_MODE_RFC3168 | TCP_ECN_MODE_ACCECN)
#define SOL_TCP 6
#define TCP_CONGESTION 13
#define CA_NAME_MAX 16
#define DCTCP_MAX_ALPHA 1024U
#define DCTCP_SHIFT_G 4               /* g = 1/16 */

struct mdctcp {
	__u32 old_delivered;    /* tcp_sock.delivered at the start of the window being measured */
	__u32 old_delivered_ce; /* ... and delivered_ce */
	__u32 next_seq;         /* the window ends when snd_una reaches this */
	__u32 alpha;            /* of DCTCP_MAX_ALPHA */
	__u32 loss_cwnd;        /* cwnd before the last reduction (undo) */
	__u32 prior_rcv_nxt;    /* receiver: rcv_nxt when the CE state last changed */
	__u32 ce_state;         /* receiver: 1 if the last segment was CE-marked */
	__u32 pad;
	struct mltcp_iter it;
};
MLTCP_CA_FITS(struct mdctcp);

static __always_inline struct mdctcp *mdctcp_ca(struct sock *sk)
{
	return (struct mdctcp *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void mdctcp_new_window(const struct tcp_sock *tp, struct mdctcp *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

/* The peer refused ECN: become mltcp_reno (or reno). Returns 1 if the socket has switched (its private
 * area now belongs to the new congestion control). */
static __always_inline int mdctcp_fall_back(struct sock *sk)
{
	char name[CA_NAME_MAX] = "mltcp_reno";
	char plain[CA_NAME_MAX] = "reno";

	mltcp_count(&mltcp_d_stats, MLTCP_STAT_NO_ECN);
	if (bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, name, sizeof(name)) == 0)
		return 1;
	return bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, plain, sizeof(plain)) == 0;
}

SEC("struct_ops/mdctcp_init")
void BPF_PROG(mdctcp_init, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mdctcp *ca = mdctcp_ca(sk);
	int state = sk->__sk_common.skc_state;

	mltcp_count(&mltcp_d_stats, MLTCP_STAT_INIT); /* a switch below runs release, which counts too */
	if (!(tp->ecn_flags & TCP_ECN_MODE_ANY) && state != TCP_LISTEN && state != TCP_CLOSE && mdctcp_fall_back(sk))
		return;
	ca->alpha = DCTCP_MAX_ALPHA;
	ca->loss_cwnd = 0;
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->ce_state = 0;
	mdctcp_new_window(tp, ca);
	mltcp_iter_init(sk, &ca->it);
	mltcp_flow_start(sk, &mltcp_d_flows);
}

SEC("struct_ops/mdctcp_release")
void BPF_PROG(mdctcp_release, struct sock *sk)
{
	mltcp_count(&mltcp_d_stats, MLTCP_STAT_RELEASE);
	mltcp_flow_delete(sk, &mltcp_d_flows);
}

/* Once per window of data: alpha <- alpha - alpha * g + g * (CE-marked / delivered segments). */
SEC("struct_ops/mdctcp_in_ack_event")
void BPF_PROG(mdctcp_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mdctcp *ca = mdctcp_ca(sk);
	__u32 alpha = ca->alpha, decay, marked, delivered;

	if ((__s32)(tp->snd_una - ca->next_seq) < 0)
		return; /* the window is not over */
	decay = alpha >> DCTCP_SHIFT_G;
	alpha -= decay ? decay : alpha; /* the kernel's min_not_zero: small alphas decay to 0 */
	marked = tp->delivered_ce - ca->old_delivered_ce;
	if (marked) {
		delivered = tp->delivered - ca->old_delivered;
		marked = (marked << (10 - DCTCP_SHIFT_G)) / (delivered ? delivered : 1);
		alpha += marked;
		if (alpha > DCTCP_MAX_ALPHA)
			alpha = DCTCP_MAX_ALPHA;
	}
	ca->alpha = alpha;
	mdctcp_new_window(tp, ca);
}

SEC("struct_ops/mdctcp_ssthresh")
__u32 BPF_PROG(mdctcp_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	struct mdctcp *ca = mdctcp_ca(sk);
	__u32 cwnd = tp->snd_cwnd, next;

	mltcp_count(&mltcp_d_stats, MLTCP_STAT_SSTHRESH);
	ca->loss_cwnd = cwnd;
	next = cwnd - ((cwnd * ca->alpha) >> 11); /* cwnd * (1 - alpha / 2) */
	return next > 2 ? next : 2;
}

static __always_inline void mdctcp_react_to_loss(struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	__u32 half = tp->snd_cwnd >> 1;

	mdctcp_ca(sk)->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = half > 2 ? half : 2;
}

SEC("struct_ops/mdctcp_set_state")
void BPF_PROG(mdctcp_set_state, struct sock *sk, __u8 new_state)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	/* a loss halves as Reno does; an RTO is CA_EVENT_LOSS (one reduction per window) */
	if (new_state == TCP_CA_Recovery && new_state != BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state))
		mdctcp_react_to_loss(sk);
}

SEC("struct_ops/mdctcp_undo_cwnd")
__u32 BPF_PROG(mdctcp_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	__u32 loss_cwnd = mdctcp_ca(sk)->loss_cwnd;

	return tp->snd_cwnd > loss_cwnd ? tp->snd_cwnd : loss_cwnd;
}

static __always_inline void mdctcp_demand_cwr(struct tcp_sock *tp, __u32 ce_state)
{
	if (ce_state)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR; /* ECE on the ACKs sent from now on */
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

/* Receiver: echo each segment's CE state as it was. When the state flips, a pending delayed ACK still
 * acknowledges segments of the previous state: send it now with that state, then ACK at once. */
static __always_inline void mdctcp_ce_event(struct sock *sk, struct mdctcp *ca, __u32 ce_state)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct tcp_sock *tp = mltcp_tcp_sk(sk);

	if (ca->ce_state != ce_state) {
		if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
			mdctcp_demand_cwr(tp, ca->ce_state);
			bpf_tcp_send_ack(tp, ca->prior_rcv_nxt);
		}
		icsk->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->ce_state = ce_state;
	mdctcp_demand_cwr(tp, ce_state);
}

SEC("struct_ops/mdctcp_cwnd_event")
void BPF_PROG(mdctcp_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct mdctcp *ca = mdctcp_ca(sk);

	switch (event) {
	case CA_EVENT_ECN_IS_CE:
		mdctcp_ce_event(sk, ca, 1);
		break;
	case CA_EVENT_ECN_NO_CE:
		mdctcp_ce_event(sk, ca, 0);
		break;
	case CA_EVENT_LOSS:
		mdctcp_react_to_loss(sk);
		break;
	case CA_EVENT_TX_START:
		mltcp_iter_on_tx_start(sk, &ca->it, &mltcp_d_params, &mltcp_d_flows, &mltcp_d_jobs,
				       &mltcp_d_stats);
		break;
	default:
		break;
	}
}

SEC("struct_ops/mdctcp_cong_avoid")
void BPF_PROG(mdctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	mltcp_reno_cong_avoid(sk, &mdctcp_ca(sk)->it, acked, &mltcp_d_params, &mltcp_d_stats);
}

SEC("struct_ops/mdctcp_pkts_acked")
void BPF_PROG(mdctcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	mltcp_iter_on_ack(sk, &mdctcp_ca(sk)->it, &mltcp_d_params, &mltcp_d_jobs);
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp_dctcp = {
	.init = (void *)mdctcp_init,
	.release = (void *)mdctcp_release,
	.in_ack_event = (void *)mdctcp_in_ack_event,
	.cwnd_event = (void *)mdctcp_cwnd_event,
	.ssthresh = (void *)mdctcp_ssthresh,
	.cong_avoid = (void *)mdctcp_cong_avoid,
	.undo_cwnd = (void *)mdctcp_undo_cwnd,
	.set_state = (void *)mdctcp_set_state,
	.pkts_acked = (void *)mdctcp_pkts_acked,
	/* NEEDS_ECN as the kernel's dctcp; NON_RESTRICTED like reno, cubic and the other mltcp_* (the
	 * kernel's dctcp is not: only root may select it where it is not in the allowed list) */
	.flags = TCP_CONG_NON_RESTRICTED | TCP_CONG_NEEDS_ECN,
	.name = "mltcp_dctcp",
};
