/* diag.h: the analyzer's warnings and errors, said by the layers below cli/ without printing: each
 * message goes to the sink cli/ installs (it prints them on stderr, in the order they are said). */
#ifndef NVLP_AN_DIAG_H
#define NVLP_AN_DIAG_H

/* Receives one message, its text whole ("nvlprof: warning: ...\n", the line end included). */
typedef void (*an_diag_sink)(const char *msg);
/*! Where messages go from now on; NULL (the start): they are dropped (a test or fuzz target
 * linking the layers without cli/main.c installs its own, if it reads them). */
void an_diag_set_sink(an_diag_sink sink);
/*! Say one message, formatted as printf does, to the sink. */
void an_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
