/* nvlp_schema.h: a trace's schema (its kinds and their fields) mapped onto this build's kinds; private to trace/ and its tests. */
#ifndef NVLP_SCHEMA_H
#define NVLP_SCHEMA_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint8_t */

#include "nvlp_format.h"

/* How records of one kind code of the file are handed out. */
enum nvlp_code_mode {
	NVLP_CM_UNDECLARED, /* not in the file's schema: a record with this code is corruption */
	NVLP_CM_DIRECT,     /* same fields as this build's kind, in the same order */
	NVLP_CM_MAPPED,     /* fields matched by name (extra ones skipped, missing ones read 0) */
	NVLP_CM_SKIP,       /* a kind this build does not know (or reads differently): skipped */
};

struct nvlp_code_map {
	uint8_t nf;        /* fields the file stores for this code */
	uint8_t has_blob;
	uint8_t mode;      /* enum nvlp_code_mode */
	uint8_t kind;      /* this build's kind (DIRECT, MAPPED) */
	uint32_t prev_off; /* its fields' place in the reader's delta pool */
};

struct nvlp_schema_map {
	unsigned major, minor;
	unsigned ncodes; /* 1 + the highest code declared */
	struct nvlp_code_map code[NVLP_MAX_FILE_KINDS];
	/* MAPPED kinds: the file's field index of each of this build's fields, -1 = not in the file */
	int8_t from[NVLP_K_COUNT][NVLP_MAX_FIELDS];
	uint32_t pool_n; /* fields of every declared code, in all */
	char unknown[256]; /* what this build does not know of the file's schema ("" if nothing) */
};

/* The built-in schema of version 1: the layout of every trace written before traces carried their
 * schema. Frozen: what those files hold does not change when kinds or fields are added. */
extern const char nvlp_schema_v1[];

/*! Parse schema text (not NUL-terminated) and map it onto this build's kinds. major: the file's
 * preamble version, which the text's first line must repeat.
 * @return 0, or -1 with a short reason in why ("line 3: ...") */
int nvlp_schema_map_build(struct nvlp_schema_map *m, unsigned major, const char *text, size_t len,
			  char *why, size_t whylen);

#endif /* NVLP_SCHEMA_H */
