"""The `pager` commands, one module per family, under the entry point `pager.cli`.

Layers, each importing only downwards (tests/test_cli_layering.py checks it):

- `pager.cli`: the entry point; it imports the one command module a command line names.
- The command modules (`broker`, `everyday`, `paging`, `operator`, `wake`, `run`, `install`,
  `store`, `harnesses`): each imports the shared modules below and the rest of Pager, never
  another command module.
- The shared modules: `common` (exit statuses, errors, the state directory and the broker),
  `acting` (who a command acts as: a session or the person, or the operator) and `show` (text
  for a person). They import no command module.

Every module keeps its module-level imports light (stdlib, `pager.domain.display`): a script
or an agent's shell runs these commands often, so each imports what it needs when it runs.
"""
