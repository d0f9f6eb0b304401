"""The command-line interface: `app` assembles the commands of one module per group (catalog,
profile, model, plan, train, preempt, run/md); `common` holds the shared options and parsers.
Nothing outside this package imports it."""
