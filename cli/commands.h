/* The subcommands. Each cmd_<name>.c defines one entry point that takes the
 * arguments after the command name and returns the process exit code:
 * 0 ok, 1 a verdict failed, 2 bad usage or input, 3 environment failure. */
#ifndef CP_CLI_COMMANDS_H
#define CP_CLI_COMMANDS_H

int cp_cmd_analyze(int argc, char **argv);
int cp_cmd_baseline(int argc, char **argv);
int cp_cmd_bench(int argc, char **argv);
int cp_cmd_calibrate(int argc, char **argv);
int cp_cmd_compare(int argc, char **argv);
int cp_cmd_convert(int argc, char **argv);
int cp_cmd_export(int argc, char **argv);
int cp_cmd_import(int argc, char **argv);
int cp_cmd_info(int argc, char **argv);
int cp_cmd_kb(int argc, char **argv);
int cp_cmd_load(int argc, char **argv);
int cp_cmd_node_bottleneck(int argc, char **argv);
int cp_cmd_pipeline(int argc, char **argv);
int cp_cmd_run(int argc, char **argv);
int cp_cmd_serve(int argc, char **argv);
int cp_cmd_suggest(int argc, char **argv);
int cp_cmd_trace(int argc, char **argv);
int cp_cmd_tune(int argc, char **argv);
int cp_cmd_validate(int argc, char **argv);
int cp_cmd_view(int argc, char **argv);

#endif
