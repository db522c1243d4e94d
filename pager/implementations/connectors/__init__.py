"""Per-implementation launch wiring. Each module has `prepare(manifest, context) -> values`:
it writes the per-launch files its manifest's templates name (in the launch's private
directory, 0600) and returns their placeholders' values."""
