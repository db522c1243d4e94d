"""Plugin builders, one module per harness, found by `pager.install.plugin.find_builder`.

Each module defines `plugin_files(manifest, context) -> PluginPlan`: the exact files of that
harness's plugin and the steps the user has to take by hand. What each harness's format is based
on (and what is unverified) is in docs/skill-and-plugins.md.
"""
