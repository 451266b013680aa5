"""Every formula of SPEC.md as a pure function: arrays in, numbers out; no I/O, no model."""
