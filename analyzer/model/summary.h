/* summary.h: a job's compact summary, the figures `diff` compares (an_summarize, report.h). */
#ifndef NVLP_AN_SUMMARY_H
#define NVLP_AN_SUMMARY_H

#include "model/model.h"

/* Figures compared by diff; times in ms, bandwidth in GB/s, NaN where unknown. */
struct an_summary {
	double wall_ms, step_ms, comm_ms, exposed_ms, exposed_share;
	double comm_win_ms;  /* communication inside the step window (NaN without steps or GPU) */
	int comm_host;       /* comm_ms is host call time on every rank (no NCCL GPU time) */
	double comm_host_ms; /* the part of comm_ms that is host call time: all of it with
	                      * comm_host, else the calls of collectives with no GPU execution */
	int steps, gpu_data, processes, hosts;
	/* bus bandwidth per collective class and size class (GPU time only) */
	double busbw[AN_C_COUNT][AN_SIZE_CLASSES];
	double bw_bytes[AN_C_COUNT][AN_SIZE_CLASSES];
	/* host time per call, ms, per collective class and size class (every call): what diff
	 * compares where a side has no GPU time */
	double host_ms_per_call[AN_C_COUNT][AN_SIZE_CLASSES];
	/* bytes per link type */
	double nvlink_bytes, pcie_bytes, copy_p2p_bytes, copy_staged_bytes;
};

#endif
