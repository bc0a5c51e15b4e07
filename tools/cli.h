/* cli.h — how a `voxconv` command declares its options (parsed by voxconv.c).
 *
 * An option is one of four kinds, told apart by its fields:
 *  - a flag:    metavar NULL; present sets *value to 1;
 *  - a choice:  choices set; the value is the index of the name given;
 *  - a number:  an integer in [lo, hi];
 *  - a text:    text set (value NULL); *text points at the argument (lists, file names,
 *               decimals), which the command parses itself.
 * Arguments that are not options (file names) go to the command's cli_args.
 */
#ifndef VC_TOOLS_CLI_H
#define VC_TOOLS_CLI_H

typedef struct cli_option {
  const char *name;           /* "--res" */
  const char *metavar;        /* "R"; NULL for a flag */
  const char *help;           /* one line; the default is appended (not for flags, or empty texts) */
  const char *const *choices; /* NULL-terminated names (value = index), or NULL */
  long long lo, hi;           /* range of a number */
  long long *value;           /* holds the default, receives the parsed value */
  const char **text;          /* a text option: holds the default, receives the argument */
} cli_option;

/* The arguments that are not options, in order. */
typedef struct cli_args {
  const char **v;
  int n;
} cli_args;

typedef struct cli_command {
  const char *name;
  const char *summary; /* one line for `voxconv --help` */
  const char *about;   /* the paragraph of `voxconv NAME --help` */
  cli_option *opts;    /* their values are the command's parameters */
  int n_opts;
  int (*run)(void);
  const char *positional; /* e.g. "FILE...": the command takes arguments that are not options;
                             NULL: it takes none, and one is a usage error */
  cli_args *args;         /* receives them (with positional); `--` ends the options */
} cli_command;

#endif
