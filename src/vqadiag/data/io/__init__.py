"""The I/O plumbing the readers share: JSON and tables, typed decoding, atomic writes and
locks, streams read once, caches, fault points for the kill tests."""
