/* rankview.h: how a job of many ranks is shown: which ranks the tables keep as rows (the ranks
 * that matter), the distribution of the others, and the arrival skew per communicator kind. */
#ifndef NVLP_AN_RANKVIEW_H
#define NVLP_AN_RANKVIEW_H

#include "findings/findings.h"
#include "out/report.h" /* struct an_tables */

/* Communicator kinds: the headline skew is given per kind, never averaged across them (a world
 * communicator's 5 ms straggler must not be diluted by the per-host ones' 0.03 ms). */
enum an_ckind { AN_CK_WORLD, AN_CK_HOST, AN_CK_GROUP, AN_CK_COUNT };
struct an_skew_kind {
	size_t ncomms;          /* communicators of the kind with matched collectives */
	int min_ranks, max_ranks; /* their sizes */
	uint64_t n;             /* matched collectives (each communicator's first excluded) */
	double mean_ns, max_ns;
};
struct an_skew_kinds {
	struct an_skew_kind k[AN_CK_COUNT];
	int nkinds; /* kinds with matched collectives */
	int head;   /* the kind of the headline figure: the widest present (-1 none) */
};
/*! The job's matched collectives' skew per communicator kind: world (every rank), per host (a
 * communicator on one host, not the world), groups (the others). */
void an_skew_kinds(const struct an_job *job, size_t nranks, struct an_skew_kinds *s);
/*! The kind of communicator c in a job of nranks processes */
int an_ckind_of(const struct an_comm *c, size_t nranks);
/*! COLLECTIVES: a row per communicator and call, or, past the collective_rows threshold, one row
 * per kind of communicator, call and size for communicators of the same kind (collview.c) */
void an_collectives_print(FILE *o, const struct an_job *job, const struct an_tables *t);
/*! "world", "per host", "groups" */
const char *an_ckind_name(int kind);
/*! "world", "per_host", "groups" (JSON) */
const char *an_ckind_id(int kind);

/* The columns of RANKS that get a distribution */
enum { AN_RV_WALL, AN_RV_COMM, AN_RV_EXPOSED, AN_RV_EXPOSED_SHARE, AN_RV_LAST, AN_RV_LEAD,
       AN_RV_WAITED, AN_RV_COLS };
/* Why a rank is a row */
enum { AN_WHY_FINDING = 1, AN_WHY_LAST = 2, AN_WHY_MAX = 4, AN_WHY_MIN = 8, AN_WHY_HOST = 16 };

struct an_rank_view {
	int all;       /* every rank is a row (at most ranks_shown ranks, or --all-ranks) */
	size_t nrows;  /* t->nranks */
	size_t *shown; /* the rows kept (indices into t->ranks, table order) */
	size_t nshown;
	unsigned *why;      /* per kept row: AN_WHY_* bits */
	char (*what)[48];   /* per kept row: the finding ids that name it, the columns it tops */
	uint8_t *kept;      /* per row of t->ranks: 1 kept */
	size_t nrest;       /* rows in the distribution */
	size_t named_more;  /* ranks the findings name beyond the rows kept for them */
	int rest_gpu;       /* the rest has exposure figures (GPU kernels) */
	double dist[AN_RV_COLS][4]; /* min, p50, p90, max over the rest */
};
/*! The rows of t to show for job (threshold ranks_shown in job->th; findings f may be NULL).
 * @return 0, -1 out of memory (then v shows every rank) */
int an_rank_view_build(const struct an_job *job, const struct an_tables *t,
                       const struct an_findings *f, struct an_rank_view *v);
void an_rank_view_free(struct an_rank_view *v);
/*! A column's value of row w (ms or %, as RANKS prints it; NaN where it prints "-") */
double an_rank_col(const struct an_rrow *w, int col);

/* ---- rankview_print.c ---- */
/*! RANKS (rows as v keeps them), what its columns mean, the arrival skew, the clock alignment */
void an_ranks_print(FILE *o, const struct an_job *job, const struct an_tables *t,
                    const struct an_rank_view *v);
/*! The job's skew_mean_ms, skew_max_ms (and with several communicator kinds skew_kind and
 * skew_by_kind) into an open JSON object */
void an_skew_json(struct jw *w, const struct an_job *job, size_t nranks);
#endif
