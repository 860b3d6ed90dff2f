/* test_findings_wording.c: the advice table (findings/wording.c): every finding of AN_FINDINGS
 * has its usual advice, each case a detector passes has its own text, and each explanation
 * explain() makes has its text. */
#include <string.h> /* strstr */

#include "check.h"
#include "findings/findings_int.h"

int main(void)
{
	int plain = 1;
	for (int f = 0; f < AN_F_COUNT; f++) {
		const char *t = an_f_advice_text((enum an_fid)f, AN_ADV_PLAIN);
		if (!t || !*t) {
			printf("no advice for %s\n", an_fid_name((enum an_fid)f));
			plain = 0;
		}
	}
	CHECK(plain, "every finding of AN_FINDINGS has its advice");
	CHECK(an_f_advice_text(AN_F_rank_ended, AN_ADV_ENDED_SIGNAL) &&
	          strstr(an_f_advice_text(AN_F_rank_ended, AN_ADV_ENDED_SIGNAL), "SIGTERM"),
	      "rank_ended by a signal: the launcher's SIGTERM");
	CHECK(an_f_advice_text(AN_F_pcie_fallback, AN_ADV_FALLBACK_ENV) &&
	          strstr(an_f_advice_text(AN_F_pcie_fallback, AN_ADV_FALLBACK_ENV), "Unset"),
	      "pcie_fallback from the environment: unset the variables");
	CHECK(
	    an_f_advice_text(AN_F_uma_thrashing, AN_ADV_UMA_ADVISED) &&
	        strstr(an_f_advice_text(AN_F_uma_thrashing, AN_ADV_UMA_ADVISED), "Advice/prefetch"),
	    "uma_thrashing with advice: pages bounce anyway");
	CHECK(!an_f_advice_text(AN_F_COUNT, AN_ADV_PLAIN) &&
	          !an_f_advice_text(AN_F_straggler, AN_ADV_COUNT),
	      "no advice outside the table");
	CHECK(an_f_explained_advice(AN_F_pcie_fallback, AN_F_low_bus_bandwidth) &&
	          an_f_explained_advice(AN_F_straggler, AN_F_exposed_communication) &&
	          an_f_explained_advice(AN_F_pcie_fallback, AN_F_exposed_communication),
	      "each explanation explain() makes has its advice");
	CHECK(!an_f_explained_advice(AN_F_straggler, AN_F_low_bus_bandwidth),
	      "no advice for an explanation explain() does not make");
	return CHECK_DONE();
}
