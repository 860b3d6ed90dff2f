/* findings.h: the diagnoses drawn from an analyzed job: id, severity, title, evidence, advice. */
#ifndef NVLP_AN_FINDINGS_H
#define NVLP_AN_FINDINGS_H

#include "json.h"
#include "model.h"

enum an_sev { AN_SEV_INFO = 0, AN_SEV_WARNING = 1, AN_SEV_CRITICAL = 2 };
const char *an_sev_name(int sev);

/* One evidence item: a number (num, with unit for text) or a string. */
struct an_ev {
	char key[32];
	int is_str;
	double num;
	char unit[8];
	char str[240];
};

#define AN_MAX_EV 20
struct an_finding {
	const char *id; /* stable: "pcie_fallback", "straggler", ... */
	int sev;
	char title[200];
	struct an_ev ev[AN_MAX_EV];
	int nev;
	char advice[400];
	/* set when another finding (its root cause) explains this one: severity demoted to info,
	 * sev_before keeps the severity it had on its own */
	const char *explained_by;
	int sev_before;
	int root_rank; /* the root is the finding of this rank (straggler), -1 any */
};

struct an_findings {
	struct an_finding *v;
	size_t n;
};

/*! Draw all findings from an analyzed job, sorted by severity (critical first); a finding
 * explained by a root cause (explained_by set, severity info) follows its root directly.
 * th: thresholds (AN_TH_*). @return 0, or -1 out of memory */
int an_findings_compute(const struct an_job *job, const double *th, struct an_findings *out);
void an_findings_free(struct an_findings *f);
/*! @return the finding with this id, or NULL */
const struct an_finding *an_findings_get(const struct an_findings *f, const char *id);
/*! Text: one block per finding. verbose=0 prints title and key evidence only. */
void an_findings_print(FILE *o, const struct an_findings *f);
/*! JSON array "findings" into an open object. */
void an_findings_json(struct jw *w, const char *key, const struct an_findings *f);
/*! Short cause name for fallback findings ("NCCL_P2P_DISABLE=1" ...) or "" */
const char *an_findings_env_cause(const struct an_findings *f);

#endif
