/* commands.h: the nvlprof subcommands, each an entry point taking its own argv (argv[0] = name). */
#ifndef NVLP_COMMANDS_H
#define NVLP_COMMANDS_H
int nvlp_cmd_run(int argc, char **argv);    /* analyzer/cli/run.c */
int nvlp_cmd_info(int argc, char **argv);   /* analyzer/cli/dump.c */
int nvlp_cmd_dump(int argc, char **argv);   /* analyzer/cli/dump.c */
int nvlp_cmd_report(int argc, char **argv); /* analyzer/cli/cmd_report.c */
int nvlp_cmd_diff(int argc, char **argv);   /* analyzer/cli/diff.c */
int nvlp_cmd_merge(int argc, char **argv);  /* analyzer/cli/merge.c */
int nvlp_cmd_dask(int argc, char **argv);   /* analyzer/cli/dask.c */
/*! `nvlprof export` (cli/cmd_export.c) */
int nvlp_cmd_export(int argc, char **argv);
/*! The --html variants of report and diff (cli/cmd_html.c): @return 1 if argv has --html (report
 * and diff then hand over to xh_cmd) */
int xh_wanted(int argc, char **argv);
int xh_cmd(int argc, char **argv, int diff);
struct xm_job;
struct xm_opts;
/*! Load, analyze and diagnose (as `report` does; warnings on stderr). o: NULL for the defaults.
 * @return the job, or NULL after printing the error (cli/cmd_export.c) */
struct xm_job *xm_open(char **paths, int npaths, const struct xm_opts *o);
#endif
