"""Every formula of docs/protocols.md as a pure function: arrays in, numbers out, no I/O."""
