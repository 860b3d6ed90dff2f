/* findings.h: the diagnoses drawn from an analyzed job: id, severity, title, evidence, advice. */
#ifndef NVLP_AN_FINDINGS_H
#define NVLP_AN_FINDINGS_H

#include <string.h> /* strcmp: an_ev_ranks */

#include "util/json.h"
#include "model/model.h"

enum an_sev { AN_SEV_INFO = 0, AN_SEV_WARNING = 1, AN_SEV_CRITICAL = 2 };

/*
 * The findings: X(id, what it says). The id is stable (JSON, diff, tests); within a severity the
 * list's order is the reading order: causes before the consequences they explain.
 */
#define AN_FINDINGS(X)                                                                             \
	X(collective_mismatch, "ranks of a communicator that called one collective differently")   \
	X(hang_suspect, "a collective some ranks never entered while others waited")             \
	X(rank_ended, "a rank that ended by a signal, a failing exit status or without an END record") \
	X(nccl_split_host, "NCCL took ranks of one machine for separate nodes (network transport)") \
	X(pcie_fallback, "NCCL traffic between NVLink-connected GPUs went over PCIe/host memory")  \
	X(peer_access_disabled, "cross-device copies staged through host memory")                 \
	X(uma_thrashing, "a managed allocation migrating back and forth")                         \
	X(straggler, "a rank the others wait for in most collectives")                            \
	X(exposed_communication, "communication not hidden behind compute")                       \
	X(low_bus_bandwidth, "collectives far below the NVLink peak")                             \
	X(dropped_records, "a process lost records because its buffers were full")                \
	X(collection_gaps, "data that was not collected")
enum an_fid {
#define AN_F_ENUM(id, doc) AN_F_##id,
	AN_FINDINGS(AN_F_ENUM)
#undef AN_F_ENUM
	    AN_F_COUNT
};
/*! "pcie_fallback", ... ("?" for an invalid id) */
const char *an_fid_name(enum an_fid fid);
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
	enum an_fid fid;
	const char *id; /* an_fid_name(fid): "pcie_fallback", "straggler", ... */
	int sev;
	/* what the finding is about, -1 where it is not about one: job communicator index, rank
	 * (as printed), device */
	int comm, rank, device;
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

/*
 * The evidence keys that code looks up (the detectors write them; findings.c, story.c, out/ and
 * model/rankview.c read them through an_ev_find); every other key is only shown.
 */
#define AN_EV_RANK "rank"                     /* num: the rank the finding is about */
#define AN_EV_SEQ "seq"                       /* num: the collective's number (hang, mismatch) */
#define AN_EV_STEP "step"                     /* num: the step it came in (mismatch, rank_ended) */
#define AN_EV_COLLECTIVE "collective"         /* str: the NCCL function (hang, low bandwidth) */
#define AN_EV_FAILED_RANK "failed_rank"       /* num, hang: the rank whose call failed */
#define AN_EV_FAILED_WITH "failed_with"       /* str, hang: what it failed with */
#define AN_EV_FAILED_SEQ "failed_seq"         /* num, hang: its number, when not the hang's */
#define AN_EV_WAITING_RANKS "waiting_ranks"   /* str, hang: the ranks that waited (the others) */
#define AN_EV_PYTHON_RANK "python_rank%d"     /* str, a key format: where rank %d called from */
#define AN_EV_PLACE_RANK "place_rank%d"       /* str, a key format: where its main thread was */
#define AN_EV_PLACE "place"                   /* str, rank_ended: its main thread at its end */
#define AN_EV_PYTHON "python"                 /* a key and key prefix: a Python location */
#define AN_EV_RANKS_SUFFIX "_ranks"           /* str keys ending so: rank lists ("0,2", "0-3") */
#define AN_EV_ENV "env"                       /* str, pcie_fallback: the settings that caused it */
#define AN_EV_EXPLAINS "explains"             /* str, a root cause: the ids it explains, "a,b" */
#define AN_EV_EXPLAINED_BY "explained_by"     /* str: the root cause's id */
#define AN_EV_SEVERITY_ALONE "severity_alone" /* str: the severity it had on its own */

/*! The first evidence item of x with this key that is a string (is_str 1) or a number (0), or
 * NULL */
const struct an_ev *an_ev_find(const struct an_finding *x, const char *key, int is_str);
/*! The string of evidence key of x, or NULL */
const char *an_ev_str(const struct an_finding *x, const char *key);
/*! The number of evidence key of x, or dflt */
double an_ev_num(const struct an_finding *x, const char *key, double dflt);
/*! 1 when e is a rank list: a string whose key ends in AN_EV_RANKS_SUFFIX. Inline:
 * model/rankview.c reads findings too, from below this layer. */
static inline int an_ev_ranks(const struct an_ev *e)
{
	size_t kl = strlen(e->key), sl = sizeof AN_EV_RANKS_SUFFIX - 1;
	return e->is_str && kl >= sl && !strcmp(e->key + kl - sl, AN_EV_RANKS_SUFFIX);
}

/*! Draw all findings from an analyzed job, sorted by severity (critical first); a finding
 * explained by a root cause (explained_by set, severity info) follows its root directly.
 * th: thresholds (AN_TH_*). @return 0, or -1 out of memory */
int an_findings_compute(const struct an_job *job, const double *th, struct an_findings *out);
void an_findings_free(struct an_findings *f);
/*! @return the (first) finding with this id, or NULL */
const struct an_finding *an_findings_get(const struct an_findings *f, const char *id);
const struct an_finding *an_findings_find(const struct an_findings *f, enum an_fid fid);
/*! Text: one block per finding. verbose=0 prints title and key evidence only. */
void an_findings_print(FILE *o, const struct an_findings *f);
/*! Evidence item e's value for people (text and HTML cards): numbers in their units
 * (an_fmt_value: "47.5 GiB", "69.2 s"), rank lists named ("rank 1", "ranks 0,2"). @return buf */
const char *an_ev_value(const struct an_ev *e, char *buf, size_t len);
/*! 1 for evidence a reader sees in the heading instead (explained_by, severity_alone) */
int an_ev_hidden(const char *key);
/*! "key: value" of e for an HTML card into buf. @return 1, or 0 (buf untouched): not shown */
int an_ev_card(const struct an_ev *e, char *buf, size_t len);
/*! JSON array "findings" into an open object. */
void an_findings_json(struct jw *w, const char *key, const struct an_findings *f);
/*! Short cause name for fallback findings ("NCCL_P2P_DISABLE=1" ...) or "" */
const char *an_findings_env_cause(const struct an_findings *f);

#endif
