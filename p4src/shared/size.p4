// Table and counter sizes, the same on every target (mlfc/contract.py holds the same numbers).
#ifndef __MLFC_SIZE__
#define __MLFC_SIZE__

// Defaults: a deployment may compile other table sizes in (`make p4 P4_SIZES="FLOW_CLASSIFIER_SIZE=16384"`,
// up to the largest tested: mlfc/pipeline_sizes.py).
#ifndef ROUTES_V4_SIZE
#define ROUTES_V4_SIZE 1024
#endif
#ifndef FLOW_CLASSIFIER_SIZE
#define FLOW_CLASSIFIER_SIZE 1024
#endif
#ifndef JOB_PRIORITY_SIZE
#define JOB_PRIORITY_SIZE 1024
#endif
#ifndef ECN_PROFILE_SIZE
#define ECN_PROFILE_SIZE 4096
#endif
#define CONGESTION_LEVEL_SIZE 256
#define DROP_THRESHOLD_SIZE 256

// Per-job counters are indexed by job id; ids >= MAX_JOBS are counted at index 0 ("untracked").
#define MAX_JOBS 4096
// Per-port counters are indexed by the 9-bit port id.
#define MAX_PORTS 512

#endif
