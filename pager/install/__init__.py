"""`pager skill install` and `pager plugin install`: files Pager writes for harnesses to read.

- `skill.py`: the Pager skill (`SKILL.md`, shipped next to this file) in every skills directory
  the registry names, or through the skills installer (`npx skills add`).
- `plugin.py`: a harness's plugin or extension, built by the harness's plugin module (found by
  convention, never by switching on an id here: see `plugin.find_builder`).
- `files.py`: writes those files idempotently and keeps a record of exactly what was written, so
  that `--uninstall` removes exactly that and nothing a person changed since.
- `command.py`: the command line that runs this Pager from a file a host reads (the venv's own
  `pager`, or `PAGER_PYTHON`/`PAGER_PACKAGE_ROOT` when set).
- `pager.commands.install`: the `skill` and `plugin` subcommands that run these.

User guide and what was verified about each harness: docs/skill-and-plugins.md.
"""
