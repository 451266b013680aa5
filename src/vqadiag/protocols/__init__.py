"""The built-in protocols, one package each: its formulas, its loader and scorer, its
suite, its command. A protocol imports only the engine (``vqadiag.data``, ``metrics``,
``models``, ``probes``, ``suites``, ``console``), never another protocol
(docs/contributing.md, "The map")."""
