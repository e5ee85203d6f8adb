// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * F test: a BPF_PROG_TYPE_SYSCALL program run with BPF_PROG_TEST_RUN that evaluates the same
 * mltcp_ratio_fp / mltcp_f_fp the congestion controls use, on parameters (the F table included) and
 * byte counts the test passes in (tests/kernel/test_kernel_mltcp.py compares it with
 * mlfc.policy.mltcp.mltcp_factor and with params.table_f_fp, the Python mirror of the interpolation).
 * mltcp_jtest does the same for job grouping: it runs one step of a job's life (an ACK's bytes, a
 * connection starting an iteration) through the congestion controls' mltcp_job_* functions, on a job
 * record kept between runs.
 */
#include "mltcp.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct mltcp_ftest_ctx {
	struct mltcp_params params; /* in: as the loader encodes them */
	__u64 acked;                /* in */
	__u64 bytes_per_iter;       /* in */
	__u32 ratio_fp;             /* out */
	__u32 f_fp;                 /* out */
};

/* The congestion controls read the table from a map value; so does this program (.bss is an ARRAY
 * map): the context itself may not be read at a variable offset. */
struct mltcp_params ftest_params;

SEC("syscall")
int mltcp_ftest(struct mltcp_ftest_ctx *ctx)
{
	__u32 ratio = mltcp_ratio_fp(ctx->acked, ctx->bytes_per_iter);

	__builtin_memcpy(&ftest_params, &ctx->params, sizeof(ftest_params));
	ctx->ratio_fp = ratio;
	ctx->f_fp = mltcp_f_fp(&ftest_params, ratio);
	return 0;
}

enum { JTEST_RESET, JTEST_ACK, JTEST_START };

struct mltcp_jtest_ctx {
	struct mltcp_params params; /* in */
	__u64 now_ns;               /* in: the time of the step */
	__u64 threshold_ns;         /* in: the idle gap (the starting connection's) */
	__u32 op;                   /* in: JTEST_RESET, JTEST_ACK (bytes acked) or JTEST_START */
	__u32 bytes;                /* in: JTEST_ACK */
	struct mltcp_job job;       /* out: the job after the step */
	__u32 began;                /* out: JTEST_START began the job's iteration */
	__u32 ratio_fp;             /* out: the job's bytes_ratio after the step */
	__u32 f_fp;                 /* out: F from it */
	__u32 pad;
};

struct mltcp_job jtest_job;

SEC("syscall")
int mltcp_jtest(struct mltcp_jtest_ctx *ctx)
{
	__builtin_memcpy(&ftest_params, &ctx->params, sizeof(ftest_params));
	ctx->began = 0;
	if (ctx->op == JTEST_RESET) {
		__builtin_memset(&jtest_job, 0, sizeof(jtest_job));
	} else if (ctx->op == JTEST_ACK) {
		mltcp_job_on_ack(&jtest_job, ctx->bytes, ctx->now_ns);
	} else if (ctx->op == JTEST_START) {
		ctx->began = mltcp_job_begin(&jtest_job, &ftest_params, ctx->now_ns, ctx->threshold_ns);
	}
	__builtin_memcpy(&ctx->job, &jtest_job, sizeof(jtest_job));
	ctx->ratio_fp = mltcp_job_ratio_fp(&jtest_job);
	ctx->f_fp = mltcp_f_fp(&ftest_params, ctx->ratio_fp);
	return 0;
}
