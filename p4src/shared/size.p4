#ifndef __MLFC_SIZE__
#define __MLFC_SIZE__

#define ROUTES_V4_SIZE 1024
#define FLOW_CLASSIFIER_SIZE 1024
#define JOB_PRIORITY_SIZE 1024
#define ECN_PROFILE_SIZE 4096
#define CONGESTION_LEVEL_SIZE 256
#define DROP_THRESHOLD_SIZE 256

// Per-job counters are indexed by job id; ids >= MAX_JOBS are counted at index 0 ("untracked").
#define MAX_JOBS 4096
#define MAX_PORTS 512
#define NUM_QUEUES 8
#define CONGESTION_SLOTS 4096   // MAX_PORTS * NUM_QUEUES

#endif
