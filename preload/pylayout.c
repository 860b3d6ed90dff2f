/* pylayout.c: CPython's internal frame layouts (3.11, 3.12, 3.13) and the one chosen for the
 * running interpreter by Py_Version, with the walk's switches (NVLPROF_PYWALK*). */
#include "pystacks_int.h"

static const struct pylayout layouts[] = {
    {0x030b00, 56, 8, 0, 32, 48, 56, 69, 72, 112, 120, 136, 168, 184, 48, 72, -1},
    {0x030c00, 56, 0, 0, 0, 8, 56, 70, 68, 112, 120, 136, 176, 192, 40, 56, 3},
    {0x030d00, 0, 0, 72, 0, 8, 56, 70, 68, 112, 120, 136, 184, 200, 40, 56, 3},
};

struct pylayout lay; /* the running interpreter's, when one is known */
/* 0 not checked yet, 1 checked and enabled, -1 none or disabled (read inline by the hooks) */
int lay_state = -1;
int lay_log;         /* NVLPROF_PYWALK_LOG=1: say what the self-check found */
int lay_test_pipe;   /* NVLPROF_PYWALK_TEST=pipe: the self-check reads through a pipe */
int lay_test_refuse; /* NVLPROF_PYWALK_TEST=refuse: the self-check fails a right layout */

/* Under resolve_mu, once. NVLPROF_PYWALK=0 turns the walk off; NVLPROF_PYWALK_TEST=skew gives it a
 * wrong layout (the self-check must then refuse it), =pipe makes the self-check read through its
 * fallback, =refuse makes it fail a right layout (the chains kept before it must then be dropped:
 * tests/runtime/test_pywalk.sh). */
void nvlp_py_layout_choose(void)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	lay_log = cfg->pywalk_log;
	unsigned v = (unsigned)(py.version >> 8) & 0xffff00u;
	lay_state = -1;
	if (!cfg->pywalk || !py.this_tstate || !py.add_pending || !py.code_type ||
	    !py.unicode_type || !py.bytes_type)
		return;
	for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
		if (layouts[i].ver == v) {
			lay = layouts[i];
			lay_state = 0;
		}
	if (lay_state == 0 && cfg->pywalk_test == NVLP_PYWALK_SKEW)
		lay.fr_previous += 8;
	lay_test_pipe = cfg->pywalk_test == NVLP_PYWALK_PIPE;
	lay_test_refuse = cfg->pywalk_test == NVLP_PYWALK_REFUSE;
	if (lay_state < 0 && lay_log)
		nvlp_warn("Python %lu.%lu: no frame layout known, GIL-released calls get no Python "
		          "location",
		          (unsigned long)(py.version >> 24),
		          (unsigned long)(py.version >> 16 & 0xff));
}
