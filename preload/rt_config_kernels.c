/* rt_config_kernels.c: NVLPROF_KERNELS parsed into the configuration's kernel-tracing mode (off,
 * all or windows; what each does and costs: cupti/windows.c). */
#include <stdio.h>  /* sscanf */
#include <string.h> /* strcmp */

#include "nvlp_rt.h"
#include "rt_internal.h"

/*
 * off, all, window (the defaults below: 20/10000+500), window:ON/PERIOD (ON ms traced out of every
 * PERIOD ms, the first window at start) or window:ON/PERIOD+FIRST (the first window FIRST ms after
 * the process's first NCCL collective), with 0 < ON < PERIOD <= 3600000 and FIRST <= 3600000.
 */
void nvlp_cfg_kernels(const char *v, struct nvlp_kernels_cfg *km)
{
	*km = (struct nvlp_kernels_cfg){NVLP_KM_OFF, 20, 10000, 1, 500, 0};
	if (!*v)
		return;
	long on = 0, per = 0, first = -1;
	char tail = 0;
	int n = 0;
	if (!strcmp(v, "all"))
		km->mode = NVLP_KM_ALL;
	else if (!strcmp(v, "window")) /* the defaults' ON/PERIOD+FIRST: 20/10000+500 */
		km->mode = NVLP_KM_WINDOW;
	else if (!strcmp(v, "off"))
		km->mode = NVLP_KM_OFF;
	else if (((n = sscanf(v, "window:%ld/%ld%c", &on, &per, &tail)) == 2 ||
	          (n == 3 && tail == '+' &&
	           sscanf(v, "window:%ld/%ld+%ld%c", &on, &per, &first, &tail) == 3 && first >= 0 &&
	           first <= 3600000)) &&
	         on > 0 && per > on && per <= 3600000) {
		km->mode = NVLP_KM_WINDOW;
		km->on_ms = on;
		km->period_ms = per;
		km->anchored = first >= 0;
		km->first_ms = first >= 0 ? first : 0;
	} else {
		km->bad = 1; /* warned and noted when CUPTI starts (cupti/windows.c) */
	}
}
