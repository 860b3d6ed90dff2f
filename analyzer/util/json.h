/* json.h: a tiny streaming JSON writer for the report and diff outputs (no allocation, commas
 * handled). */
#ifndef NVLP_AN_JSON_H
#define NVLP_AN_JSON_H

#include <stdint.h> /* int64_t */
#include <stdio.h>  /* FILE */

struct jw {
	FILE *f;
	int depth;
	int n[64]; /* members written at each depth */
};
/* key is NULL inside arrays (and for the top-level value). */
void jw_init(struct jw *w, FILE *f);
void jw_obj(struct jw *w, const char *key);
void jw_obj_end(struct jw *w);
void jw_arr(struct jw *w, const char *key);
void jw_arr_end(struct jw *w);
void jw_str(struct jw *w, const char *key, const char *v);
void jw_num(struct jw *w, const char *key, double v); /* NaN/inf -> null */
void jw_int(struct jw *w, const char *key, int64_t v);
void jw_bool(struct jw *w, const char *key, int v);
void jw_null(struct jw *w, const char *key);
/* Write s as a JSON string literal (quotes included). */
void jw_quote(FILE *f, const char *s);
#endif
