// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * mltcp_reno: the kernel's Reno (net/ipv4/tcp_cong.c: tcp_reno_cong_avoid, tcp_reno_ssthresh,
 * tcp_reno_undo_cwnd) with MLTCP's F scaling the congestion-avoidance increase: one segment
 * more per cwnd / F acknowledged segments, i.e. F segments per RTT instead of one. Slow start,
 * the halving on loss/ECN and the undo are the kernel's, unchanged.
 */
#include "mltcp.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

MLTCP_MAPS(mltcp_r)

struct mreno {
	struct mltcp_iter it;
};
MLTCP_CA_FITS(struct mreno);

static __always_inline struct mreno *mreno_ca(struct sock *sk)
{
	return (struct mreno *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

SEC("struct_ops/mreno_init")
void BPF_PROG(mreno_init, struct sock *sk)
{
	struct mreno *ca = mreno_ca(sk);

	mltcp_iter_init(sk, &ca->it);
	mltcp_count(&mltcp_r_stats, MLTCP_STAT_INIT);
	mltcp_flow_start(sk, &mltcp_r_flows);
}

SEC("struct_ops/mreno_release")
void BPF_PROG(mreno_release, struct sock *sk)
{
	mltcp_count(&mltcp_r_stats, MLTCP_STAT_RELEASE);
	mltcp_flow_delete(sk, &mltcp_r_flows);
}

SEC("struct_ops/mreno_cong_avoid")
void BPF_PROG(mreno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	mltcp_reno_cong_avoid(sk, &mreno_ca(sk)->it, acked, &mltcp_r_params, &mltcp_r_stats);
}

SEC("struct_ops/mreno_ssthresh")
__u32 BPF_PROG(mreno_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);
	__u32 half = tp->snd_cwnd >> 1;

	mltcp_count(&mltcp_r_stats, MLTCP_STAT_SSTHRESH);
	return half > 2 ? half : 2;
}

SEC("struct_ops/mreno_undo_cwnd")
__u32 BPF_PROG(mreno_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = mltcp_tcp_sk(sk);

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC("struct_ops/mreno_cwnd_event")
void BPF_PROG(mreno_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	if (event == CA_EVENT_TX_START)
		mltcp_iter_on_tx_start(sk, &mreno_ca(sk)->it, &mltcp_r_params, &mltcp_r_flows, &mltcp_r_jobs,
				       &mltcp_r_stats);
}

SEC("struct_ops/mreno_pkts_acked")
void BPF_PROG(mreno_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	mltcp_iter_on_ack(sk, &mreno_ca(sk)->it, &mltcp_r_params, &mltcp_r_jobs);
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp_reno = {
	.init = (void *)mreno_init,
	.release = (void *)mreno_release,
	.ssthresh = (void *)mreno_ssthresh,
	.cong_avoid = (void *)mreno_cong_avoid,
	.undo_cwnd = (void *)mreno_undo_cwnd,
	.cwnd_event = (void *)mreno_cwnd_event,
	.pkts_acked = (void *)mreno_pkts_acked,
	/* like reno and cubic: any namespace may default to it, any process may select it */
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "mltcp_reno",
};
