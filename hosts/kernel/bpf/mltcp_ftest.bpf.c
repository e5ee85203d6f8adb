// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * F test: a BPF_PROG_TYPE_SYSCALL program run with BPF_PROG_TEST_RUN that evaluates the same
 * mltcp_ratio_fp / mltcp_f_fp the congestion controls use, on parameters (the F table included) and
 * byte counts the test passes in (tests/kernel/test_kernel_mltcp.py compares it with
 * mlfc.policy.mltcp.mltcp_factor and with params.table_f_fp, the Python mirror of the interpolation).
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
