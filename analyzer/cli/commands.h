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
#endif
