"""GQA-OOD: head / tail accuracy and the accuracy-vs-tail-size curve (docs/protocols.md §3)."""
