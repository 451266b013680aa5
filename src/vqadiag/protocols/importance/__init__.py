"""Feature importance (attention, leave-one-out, GradCAM) against relevance
(docs/protocols.md §5)."""
